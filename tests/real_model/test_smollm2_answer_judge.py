"""SmolLM2-135M-Instruct as the answer judge (`grading.judge`) of a real toy run: the tiny reasoner writes the
traces and continuations, the rule-based grader and SmolLM2 both grade every closed continuation, and the
rule-vs-judge disagreement log (``judge_disagreements``) must be exactly the grades where the two differ.
Run with the project's judge prompt and once with the authors' reference prompt. A 135M judge is weak: the
disagreement count is printed, not bounded."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from real_chat import RecordingGenerator, assert_plain_chat_prompt

from recovery.grading.judge import JUDGE_SYSTEM, LLMJudge, parse_judge_reply, reference_prompt
from recovery.pipeline.run import run_pipeline
from recovery.pipeline.validate import load_run_config
from recovery.run_dir import records
from recovery.store import Table
from recovery.types import Verdict

pytestmark = pytest.mark.slow

VERDICT_TEXT = {v: str(v) for v in Verdict}


def run_yaml(run_dir: Path, judge, judge_prompt: str) -> str:
    return f"""\
run_dir: {run_dir}
title: tiny reasoner graded by rules and by SmolLM2-135M-Instruct
dataset: {{name: toy, limit: 3, options: {{seed: 5}}}}
traces: {{sampling: {{n: 1, temperature: 0.0, top_p: 1.0, max_new_tokens: 200}}}}
interventions: {{names: [toy/random_characters, toy/wrong_continuation], timesteps: [0.3]}}
continuation: {{n: 1, max_new_tokens: 200}}
grading:
  judge: {{name: {judge.name}, path: {judge.path}, gguf_file: {judge.gguf_file}, device: {judge.settings.device}}}
  judge_prompt: {judge_prompt}
"""


@pytest.mark.parametrize("judge_prompt", ["default", "reference"])
def test_smollm2_as_the_answer_judge(
    judge_prompt, tmp_path, smollm2, smollm2_config, smollm2_factory, hf_factory, capsys
):
    start = time.perf_counter()
    config_path = tmp_path / "run.yaml"
    config_path.write_text(run_yaml(tmp_path / "run", smollm2_config, judge_prompt))
    config = load_run_config(config_path)
    assert config.grading.judge == smollm2_config and config.grading.primary == "rule"
    recorders: list[RecordingGenerator] = []

    def factory(model_config):
        if model_config.gguf_file is None:
            return hf_factory(model_config)  # the tiny reasoner writes traces and continuations
        recorders.append(RecordingGenerator(smollm2_factory(model_config)))
        return recorders[-1]

    stages = ("problems", "traces", "filter", "chains", "continuations", "grades")
    summary = run_pipeline(config, stages=stages, make_generator=factory, progress=False)
    (recorder,) = recorders
    run = Path(config.run_dir)
    problems = {r["id"]: records.problem_from_row(r) for r in Table(run / "problems").iter_rows()}
    continuations = {r["id"]: r for r in Table(run / "continuations").iter_rows()}
    grades = {g["id"]: g for g in Table(run / "grades").iter_rows()}
    assert grades and set(grades) == set(continuations)

    # Every judged continuation was asked once, on the plain chat template, greedily, with the chosen prompt;
    # its stored judge verdict is what the model's real reply parses to.
    judge = LLMJudge(generator=None, prompt=judge_prompt)  # builds the expected messages only
    reference = reference_prompt() if judge_prompt == "reference" else None
    reply_of = {}
    for call in recorder.calls:
        assert_plain_chat_prompt(call, smollm2.tokenizer)
        sampling = call.request.sampling
        assert (sampling.temperature, sampling.n) == (0.0, 1)
        assert sampling.max_new_tokens == (8 if reference is None else reference.max_new_tokens)
        assert call.request.messages[0].content == (JUDGE_SYSTEM if reference is None else reference.system)
        reply_of[call.request.messages] = call.reply
    judged = {cid: g for cid, g in grades.items() if g["judge_verdict"] is not None}
    assert len(recorder.calls) == len(judged) > 0
    for cid, g in judged.items():
        c = continuations[cid]
        messages = tuple(judge.messages(problems[c["problem_id"]], c["text"]))
        reply = reply_of[messages]
        expected = parse_judge_reply(reply) if reference is None else reference.parse(reply)
        assert g["judge_verdict"] == VERDICT_TEXT[expected.verdict], reply
    # Unjudged continuations are the ones that never closed their reasoning (no answer to judge).
    assert all(g["rule_verdict"] == "no_answer" for cid, g in grades.items() if cid not in judged)
    assert all(g["verdict"] == g["rule_verdict"] for g in grades.values())  # the rule-based grader stays primary

    # The disagreement log is exactly the judged grades where rule and judge differ on "correct".
    differ = {cid for cid, g in judged.items() if (g["rule_verdict"] == "correct") != (g["judge_verdict"] == "correct")}
    logged = {r["id"]: r for r in Table(run / "judge_disagreements").iter_rows()} if differ else {}
    assert set(logged) == differ and Table(run / "judge_disagreements").exists() == bool(differ)
    for cid, row in logged.items():
        assert (row["rule_verdict"], row["judge_verdict"]) == (
            grades[cid]["rule_verdict"],
            grades[cid]["judge_verdict"],
        )
        assert row["chain_id"] == grades[cid]["chain_id"]
    # The run's summary counts them, beside the verdicts of all its grades.
    assert summary.grades.get("judge_disagrees", 0) == len(differ)
    assert {v: n for v, n in summary.grades.items() if v != "judge_disagrees"} == Counter(
        g["verdict"] for g in grades.values()
    )

    with capsys.disabled():
        pairs = Counter((g["rule_verdict"], g["judge_verdict"]) for g in judged.values())
        print(
            f"\nSmolLM2 as answer judge ({judge_prompt} prompt), {len(judged)} of {len(grades)} continuations judged "
            f"({time.perf_counter() - start:.1f} s, {recorder.seconds:.1f} s judging): {len(differ)} disagreements; "
            f"(rule, judge) counts {dict(sorted(pairs.items()))}; replies {dict(Counter(reply_of.values()))}"
        )
