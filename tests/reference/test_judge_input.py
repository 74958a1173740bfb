"""The answer judge's input and verdicts against the authors' code (issue 29, part ``grading``; data:
make_metrics.py, which ran their scripts/judge_answers.py in completions mode).

Their judge sees the question with the reasoning instruction and the last 8,000 characters of the complete
answer (prefix, separator, continuation) after its last ``</think>``, and scores 1 only for a reply that is
exactly "Correct" once stripped. Under ``protocol: reference`` this project's grades stage sends the same
prompt, byte for byte, for every continuation (closed, unclosed, and unclosed longer than the extract), and
its verdicts give their scores; the default input (the bare question, the continuation alone) differs.
"""

from __future__ import annotations

import json
import shutil

import pytest

from recovery.generation import GenerationResult, Sample
from recovery.grading.judge import LLMJudge, authors_extract, needs_prefix, reference_prompt
from recovery.metrics import complete_answer
from recovery.model_config import ModelConfig
from recovery.pipeline import run_pipeline
from recovery.plan import plan_for, protocol_label
from recovery.run_config import GradingConfig
from recovery.run_dir import open_run
from recovery.store import RunDir
from recovery.types import Continuation
from reference.metrics_run import build_run, continuation_texts, data, intervened, problem_of, run_config, sha

TRACES = {t["id"]: t for t in data()["traces"]}
REPLIES = {c["judge_prompt_sha256"]: c["judge_reply"] for chain in data()["chains"] for c in chain["completions"]}


class RecordingJudge:
    """The judge model: answers each prompt with the reply the authors' run got for the same prompt (an
    unknown prompt gets a reply no parser accepts), and records every user message."""

    concurrency = 1  # the Generator protocol: one request in flight

    name = "recording-judge"

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def generate(self, requests):
        for r in requests:
            system, user = r.messages[0].content, r.messages[-1].content
            self.seen.append((system, user))
            reply = REPLIES.get(sha(user), "<prompt the authors never sent>")
            yield GenerationResult(r.request_id, (Sample(reply, 1, "stop"),), prompt_tokens=0)

    def close(self) -> None:
        pass


def _shown(prefix: str, text: str, tail: int) -> str:
    """What the grades stage hands the judge (`recovery.pipeline.judge_input.judged_texts`)."""
    return complete_answer(prefix, text) if needs_prefix(text, tail) else text


def test_the_reference_judges_prompt_is_the_authors_for_every_completion():
    judge = LLMJudge(generator=None, prompt="reference", authors_input=True)
    default_input = LLMJudge(generator=None, prompt="reference")
    kinds = set()
    for chain in data()["chains"]:
        problem = problem_of(TRACES[chain["trace_id"]])
        for text, completion in zip(continuation_texts(chain), chain["completions"], strict=True):
            system, user = judge.messages(problem, _shown(chain["prefix"], text, judge.shown_chars))
            assert system.content == data()["judge_system_prompt"]
            assert sha(user.content) == completion["judge_prompt_sha256"]
            if completion["judge_prompt"] is not None:
                assert user.content == completion["judge_prompt"]
            # The whole complete answer gives the same extract: the prefix matters only where `needs_prefix`.
            whole = complete_answer(chain["prefix"], text)
            assert judge.messages(problem, whole)[1].content == user.content
            # Today's reference prompt shows the bare question: another prompt, always.
            assert sha(default_input.messages(problem, text)[1].content) != completion["judge_prompt_sha256"]
            kinds.add(("</think>" in text, needs_prefix(text, judge.shown_chars)))
    assert kinds == {(True, False), (False, True), (False, False)}  # closed; unclosed short; unclosed long


def test_the_authors_reply_reading_gives_their_scores():
    parse = reference_prompt().parse
    replies = {c["judge_reply"] for chain in data()["chains"] for c in chain["completions"]}
    assert {" Correct\n", "Correct.", "Correct!", "correct"} <= replies  # the strict reading is exercised
    for chain in data()["chains"]:
        for completion in chain["completions"]:
            assert int(parse(completion["judge_reply"]).correct) == completion["score"]


def test_authors_extract_looks_for_the_think_tag_only():
    assert authors_extract("a</think>b</think> 4 ") == "4"
    assert authors_extract(" x</thought> 4 ") == "x</thought> 4"  # EXAONE's tag is text to the authors


@pytest.fixture(scope="module")
def ungraded(tmp_path_factory):
    path = tmp_path_factory.mktemp("judge") / "source"
    build_run(path, grades=False, manifest=False)
    return path


def _grade(source, tmp_path, name: str, protocol: str, grading: GradingConfig | None = None):
    run_dir = tmp_path / name
    shutil.copytree(source, run_dir)
    config = run_config(run_dir, protocol, judge=True)
    if grading is not None:
        config.grading = grading
    judge = RecordingJudge()
    run_pipeline(config, stages=["grades"], make_generator=lambda _model: judge, progress=False)
    return config, judge, RunDir(run_dir)


def test_the_grades_stage_under_reference_sends_the_authors_prompts_and_keeps_their_scores(ungraded, tmp_path):
    config, judge, run = _grade(ungraded, tmp_path, "reference", "reference")
    # The plan resolves the authors' grading once; the run's manifest records it as resolved.
    for grading in (plan_for(config).grading, open_run(run.path).config.grading):
        assert (grading.primary, grading.judge_prompt, grading.unclosed) == ("judge", "reference", "grade")
    assert config.grading.primary == "rule"  # the config as given is not rewritten
    sent = [sha(user) for _, user in judge.seen]
    expected = [c["judge_prompt_sha256"] for chain in data()["chains"] for c in chain["completions"]]
    assert sorted(sent) == sorted(expected)  # every completion judged once, with the authors' prompt
    assert {system for system, _ in judge.seen} == {data()["judge_system_prompt"]}
    summary = json.loads(run.file("summary.json").read_text(encoding="utf-8"))
    assert summary["protocol"] == protocol_label("reference")  # the run's summary names it
    verdicts = {r["id"]: r["verdict"] for r in run.table("grades").iter_rows(["id", "verdict"])}
    for chain in data()["chains"]:
        chain_id = intervened(chain, TRACES[chain["trace_id"]]).id
        for i, completion in enumerate(chain["completions"]):
            assert (verdicts[Continuation(chain_id, i, "").id] == "correct") == bool(completion["score"])


def test_the_grades_stage_by_default_shows_the_judge_other_prompts(ungraded, tmp_path):
    grading = GradingConfig(
        judge=ModelConfig(name="judge"), primary="judge", judge_prompt="reference", unclosed="grade"
    )
    config, judge, run = _grade(ungraded, tmp_path, "default", "default", grading)
    assert plan_for(config).styles["grading"] == "default" and not plan_for(config).judge_inputs.grades
    assert "protocol" not in json.loads(run.file("summary.json").read_text(encoding="utf-8"))  # as before
    expected = {c["judge_prompt_sha256"] for chain in data()["chains"] for c in chain["completions"]}
    assert judge.seen and not expected & {sha(user) for _, user in judge.seen}


def test_reference_without_a_judge_keeps_the_rule_grader_and_grades_unclosed_continuations(tmp_path):
    grading = plan_for(run_config(tmp_path, "reference")).grading
    assert grading.judge is None and grading.primary == "rule" and grading.unclosed == "grade"
    judged = plan_for(run_config(tmp_path, "reference", judge=True)).grading
    assert (judged.primary, judged.judge_prompt) == ("judge", "reference")
    mixed = plan_for(run_config(tmp_path, "reference", judge=True, parts={"grading": "default"})).grading
    assert (mixed.primary, mixed.judge_prompt, mixed.unclosed) == (
        "rule",
        "default",
        "no_answer",
    )
