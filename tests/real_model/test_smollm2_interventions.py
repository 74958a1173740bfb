"""SmolLM2-135M-Instruct as the intervention LLM, end to end: a run config read from YAML imports real
R1-distill traces and runs the chains stage with the five LLM-backed interventions through the HF backend.

What reaches the model is recorded beside the real backend (`real_chat.RecordingGenerator`) and checked
against the real template, the paper's App. D.1 prompts and its Table 15 decoding; what comes back must be
spliced in as cleaned prose or be a failure counted with its reason in the run's stored skips. The failure
rate per intervention is printed: a 135M model is weak, so it is reported, not bounded.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

import pytest
from real_chat import RecordingGenerator, assert_plain_chat_prompt

from recovery.interventions import FailureReason, load_templates, load_topics, strip_wrappers
from recovery.pipeline.run import run_pipeline
from recovery.pipeline.validate import load_run_config
from recovery.run_dir import records
from recovery.segment import parse_trace
from recovery.store import Table

pytestmark = pytest.mark.slow

LLM_INTERVENTIONS = ("complete_step", "paraphrase", "wrong_continuation", "hallucinated_fact", "unrelated_cot")
# Short replies keep the test within seconds per call on a CPU; a paraphrase gets a little more room.
# A paraphrase cut short is a counted truncated_rewrite failure; a 135M model does not finish one in a budget
# a test can afford (measured: still cut at 320 new tokens), so the failure path is what runs here.
STEP_TOKENS, PARAPHRASE_TOKENS = 16, 24
TIMESTEP = 0.1  # an early cut: short prompts
# Paper Table 15, as printed: (temperature, top_p, seed); greedy means T=0 with no nucleus cut and no seed.
TABLE_15 = {
    "complete_step": (0.0, 1.0, None),
    "paraphrase": (0.0, 1.0, None),
    "wrong_continuation": (0.7, 0.9, 80129),
    "hallucinated_fact": (0.7, 0.9, 80129),
    "unrelated_cot": (1.0, 0.9, 80129),
}
# Which prefix steps each intervention shows as <R> (design.md §1): R_1..R_{k-1} when it replaces R_k.
SHOWS_LAST_STEP = {"complete_step": False, "wrong_continuation": False, "hallucinated_fact": True, "paraphrase": True}


def run_yaml(run_dir: Path, real: Path, llm) -> str:
    options = "\n".join(
        f"    {name}: {{max_new_tokens: {PARAPHRASE_TOKENS if name == 'paraphrase' else STEP_TOKENS}}}"
        for name in LLM_INTERVENTIONS
    )
    return f"""\
run_dir: {run_dir}
title: SmolLM2-135M-Instruct as the intervention LLM on real traces
dataset: {{name: real_traces, path: {real}, limit: 1}}
models:
  - {{name: DeepSeek-R1-Distill-Llama-8B, path: deepseek-ai/DeepSeek-R1-Distill-Llama-8B, spec: DeepSeek-R1-Distill-Llama-8B}}
traces:
  source: import
  path: {real / "thought_anchors_math_cots.jsonl"}
  fields: {{problem_id: problem_id, response: solution, question: problem, answer: gt_answer, id_prefix: thought_anchors_math}}
  filters: {{drop_longest_fraction: 0.0}}
interventions:
  names: [{", ".join(LLM_INTERVENTIONS)}]
  timesteps: [{TIMESTEP}]
  options:
{options}
  llm: {{name: {llm.name}, path: {llm.path}, gguf_file: {llm.gguf_file}, device: {llm.settings.device}}}
"""


def template_pattern(text: str) -> re.Pattern[str]:
    """An App. D.1 message with its placeholders as capture groups, in order."""
    pieces = re.split(r"<(Q|R|TOPIC)>", text)
    return re.compile("".join(re.escape(p) if i % 2 == 0 else "(.*)" for i, p in enumerate(pieces)), re.DOTALL)


def identify(messages) -> tuple[str, tuple[str, ...]]:
    """Which App. D.1 template a chat is, and its placeholder values (fails unless exactly one matches)."""
    system, user = messages
    found = []
    for name, template in load_templates().items():
        match = template_pattern(template.user).fullmatch(user.content)
        if system.role == "system" and system.content == template.system and user.role == "user" and match:
            found.append((name, match.groups()))
    assert len(found) == 1, f"not exactly one App. D.1 template: {[f[0] for f in found]}"
    return found[0]


def test_smollm2_as_the_intervention_llm(tmp_path, shared_data, smollm2, smollm2_config, smollm2_factory, capsys):
    start = time.perf_counter()
    config_path = tmp_path / "run.yaml"
    config_path.write_text(run_yaml(tmp_path / "run", shared_data / "real_traces", smollm2_config))
    config = load_run_config(config_path)
    assert config.interventions.llm == smollm2_config
    recorders: list[RecordingGenerator] = []

    def factory(model_config):
        # Only the intervention LLM is asked for: these stages never continue a chain.
        recorders.append(RecordingGenerator(smollm2_factory(model_config)))
        return recorders[-1]

    summary = run_pipeline(
        config, stages=("problems", "traces", "filter", "chains"), make_generator=factory, progress=False
    )
    (recorder,) = recorders
    run = Path(config.run_dir)
    tokenizer = smollm2.tokenizer
    problems = {r["id"]: r for r in Table(run / "problems").iter_rows()}
    kept = {r["id"] for r in Table(run / "kept").iter_rows() if r["kept"]}
    traces = {r["id"]: parse_trace(r["problem_id"], r["model"], r["text"]) for r in Table(run / "traces").iter_rows()}
    assert len(kept) == 1

    # What reached the model: the plain chat template, the App. D.1 prompts, the Table 15 decoding.
    calls: dict[str, list] = {name: [] for name in LLM_INTERVENTIONS}
    questions = {p["question"] for p in problems.values()}
    reasonings = [traces[t].reasoning for t in kept]
    for call in recorder.calls:
        assert_plain_chat_prompt(call, tokenizer)
        name, values = identify(call.request.messages)
        calls[name].append(call)
        if name == "unrelated_cot":
            topic, topic_again = values
            assert topic == topic_again and topic in load_topics()  # only a topic: never the problem
        else:
            question, shown = values
            assert question in questions
            # <R> is the start of the trace's own reasoning, whole steps only.
            assert any(r.startswith(shown) and r[len(shown) : len(shown) + 2] == "\n\n" for r in reasonings)
        sampling = call.request.sampling
        assert (sampling.temperature, sampling.top_p, sampling.seed) == TABLE_15[name]
        assert sampling.top_k is None and sampling.n == 1
        assert sampling.max_new_tokens == (PARAPHRASE_TOKENS if name == "paraphrase" else STEP_TOKENS)
        assert call.result.error is None and call.reply is not None
    assert {name: len(c) for name, c in calls.items()} == dict.fromkeys(LLM_INTERVENTIONS, len(kept))

    # What came back: every item is a chain whose inserted text is cleaned prose from the reply, or a skip.
    chains = list(Table(run / "chains").iter_rows())
    skips = [s for s in Table(run / "skips").iter_rows() if s["stage"] == "chains"]
    chain_keys = {c["key"] for c in chains}
    skipped = {s["item"]: s for s in skips}
    failures: dict[str, Counter] = {name: Counter() for name in LLM_INTERVENTIONS}
    for trace_id in kept:
        for name in LLM_INTERVENTIONS:
            key = records.chain_key(trace_id, name, TIMESTEP)
            assert (key in chain_keys) != (key in skipped), f"{name} on {trace_id}: neither or both chain and skip"
            if key in skipped:
                assert skipped[key]["reason"] in {r.value for r in FailureReason}
                failures[name][skipped[key]["reason"]] += 1
    specials = [t for t in tokenizer.all_special_tokens if t]
    for chain in chains:
        name, text = chain["intervention"], chain["inserted_text"]
        replies = [c.reply for c in calls[name]]
        assert text.strip() == text and re.search(r"[A-Za-z]{2,}", text), f"{name}: not prose: {text!r}"
        assert not any(tok in text for tok in specials) and "<think>" not in text and "</think>" not in text
        assert strip_wrappers(text) == text  # nothing left for the cleaning to remove
        if name == "paraphrase":
            steps = text.split("\n\n")
            assert all(s.strip() for s in steps) and any(all(s in r for s in steps) for r in replies)
        else:
            assert "\n\n" not in text and any(text in r for r in replies), f"{name}: not from a reply: {text!r}"
        trace = traces[chain["trace_id"]]
        assert chain["prefix"] != trace.reasoning[: len(chain["prefix"])]  # the chain really changed
    # The run's summary counts the same failures.
    counted = Counter({k.split("/", 1)[1]: v for k, v in summary.skips.items() if k.startswith("chains/")})
    assert counted == sum(failures.values(), Counter())

    truncated = Counter(name for name, cs in calls.items() for c in cs if c.result.samples[0].finish_reason == "length")
    with capsys.disabled():
        print(
            f"\nSmolLM2 as intervention LLM on {len(kept)} real traces at t={TIMESTEP} "
            f"({time.perf_counter() - start:.1f} s, {recorder.seconds:.1f} s generating):"
        )
        for name in LLM_INTERVENTIONS:
            n_fail = sum(failures[name].values())
            reasons = ", ".join(f"{r}={n}" for r, n in sorted(failures[name].items())) or "-"
            print(
                f"  {name:<20} failed {n_fail}/{len(kept)} ({reasons}); replies cut at max_new_tokens: "
                f"{truncated[name]}/{len(kept)}"
            )
