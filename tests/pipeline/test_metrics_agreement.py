"""The paper's definitions computed column-wise over a run directory (`recovery.run_dir.chain_tallies`, the
aggregate stage) agree with the scalar oracle (`recovery.metrics.chain_outcome` per chain, then
`recovery.metrics.aggregate`) on real data: the toy world's run and the real R1-distill traces of
``shared/data``, continued with what each original trace wrote after the cut."""

from __future__ import annotations

import math

import pytest

from recovery.generation import GenerationResult, Sample
from recovery.metrics import aggregate, chain_outcome
from recovery.pipeline import (
    DatasetConfig,
    InterventionsConfig,
    ModelConfig,
    RunConfig,
    SamplingConfig,
    TracesConfig,
    run_pipeline,
)
from recovery.pipeline.aggregate import aggregate_tallies
from recovery.run_config import think_closers
from recovery.run_dir import chain_tallies, open_run, read_aggregates, records
from recovery.run_dir.records import CHAINS_TABLE, CONTINUATIONS_TABLE, GRADES_TABLE, PROBLEMS_TABLE, TRACES_TABLE
from recovery.segment import parse_trace
from recovery.store import RunDir
from recovery.types import Grade
from toy_runs import ToyRunSpec

LENGTHS = ("whole_pct", "remaining_pct")


def scalar_outcomes(run: RunDir) -> dict:
    """`chain_outcome` of every graded chain, from the stored rows, with its model's closing think tag."""
    closers = think_closers(open_run(run.path).config.models)
    domains = {r["id"]: r["domain"] for r in run.table(PROBLEMS_TABLE).iter_rows(["id", "domain"])}
    verdicts = {r["id"]: r["verdict"] for r in run.table(GRADES_TABLE).iter_rows(["id", "verdict"])}
    samples: dict[str, list] = {}
    for row in run.table(CONTINUATIONS_TABLE).iter_rows(["id", "chain_id", "sample_index", "text", "model"]):
        if row["id"] in verdicts:
            samples.setdefault(row["chain_id"], []).append(row)
    out = {}
    for row in run.table(CHAINS_TABLE).iter_rows():
        rows = sorted(samples.get(row["id"], []), key=lambda r: r["sample_index"])
        if not rows:
            continue
        chain = records.chain_from_row(row)
        out[chain.id] = chain_outcome(
            chain,
            domains[chain.problem_id],
            [Grade(verdicts[r["id"]]) for r in rows],
            [r["text"] for r in rows],
            think_close=closers[rows[0]["model"]],
        )
    return out


def assert_agree(run: RunDir) -> None:
    tallies = chain_tallies(run)
    oracle = scalar_outcomes(run)
    assert len(tallies) == len(oracle) > 0
    measured = 0
    for i in range(len(tallies)):
        got = tallies.outcome(i)
        want = oracle[got.chain_id]
        assert (got.model, got.domain, got.intervention, got.target_t) == (
            want.model,
            want.domain,
            want.intervention,
            want.target_t,
        )
        assert (got.n, got.k) == (want.n, want.k)
        for name in LENGTHS:
            a, b = getattr(got, name), getattr(want, name)
            assert (a is None) == (b is None), (got.chain_id, name)
            if a is not None:
                measured += 1
                assert a == pytest.approx(b, rel=1e-12, abs=1e-9), (got.chain_id, name)
    assert measured
    grouped = aggregate_tallies(tallies, n_boot=100)
    at_once = aggregate(oracle.values(), n_boot=100)
    assert [r.key for r in grouped] == [r.key for r in at_once]
    for g, o in zip(grouped, at_once, strict=True):
        assert (g.n_chains, g.at_least_once, g.majority, g.all) == (o.n_chains, o.at_least_once, o.majority, o.all)
        for name in LENGTHS:
            a, b = getattr(g, name), getattr(o, name)
            assert a.n == b.n
            for stat in ("mean", "std", "ci_low", "ci_high"):
                x, y = getattr(a, stat), getattr(b, stat)
                assert (math.isnan(x) and math.isnan(y)) or x == pytest.approx(y, rel=1e-9, abs=1e-9), (name, stat)


def test_toy_run_tallies_agree_with_the_scalar_definitions(toy_run_for):
    spec = ToyRunSpec(
        interventions=("toy/wrong_continuation", "toy/random_characters", "toy/paraphrase"),
        variants=("teacher", "wrong_answer", "two_closes"),
    )
    assert_agree(RunDir(toy_run_for(spec).path))


class Remainders:
    """A scripted backend for the real traces: each chain continues with what its original trace wrote after
    the cut (real reasoning, the closing tag, the real answer), and once more without its last step."""

    concurrency = 1  # the Generator protocol: one request in flight

    name = "remainders"

    def __init__(self) -> None:
        self.remainder_of: dict[str, str] = {}

    def generate(self, requests):
        for request in requests:
            full = self.remainder_of[request.request_id]
            reasoning, close, answer = full.partition("</think>")
            shorter = reasoning.rsplit("\n\n", 1)[0] + close + answer
            texts = (full, shorter)[: request.sampling.n]
            yield GenerationResult(request.request_id, tuple(Sample(t, len(t), "stop") for t in texts), prompt_tokens=0)

    def close(self) -> None:
        pass


def test_real_trace_run_tallies_agree_with_the_scalar_definitions(tmp_path, shared_data):
    data = shared_data / "real_traces"
    config = RunConfig(
        run_dir=str(tmp_path / "real"),
        dataset=DatasetConfig(name="real_traces", path=str(data), limit=8),
        models=[ModelConfig(name="DeepSeek-R1-Distill-Llama-8B", spec="DeepSeek-R1-Distill-Llama-8B")],
        traces=TracesConfig(
            source="import",
            path=str(data / "thought_anchors_math_cots.jsonl"),
            fields={
                "problem_id": "problem_id",
                "response": "solution",
                "question": "problem",
                "answer": "gt_answer",
                "id_prefix": "thought_anchors_math",
            },
        ),
        interventions=InterventionsConfig(names=["random_characters"], timesteps=[0.1, 0.5, 0.9]),
        continuation=SamplingConfig(n=2),
        cpu_workers=1,
    )
    backend = Remainders()
    run_pipeline(config, stages=["problems", "traces", "filter", "chains"], progress=False)
    run = RunDir(config.run_dir)
    traces = {r["id"]: r for r in run.table(TRACES_TABLE).iter_rows(["id", "problem_id", "model", "text"])}
    for chain in run.table(CHAINS_TABLE).iter_rows(["id", "trace_id", "original_prefix_chars"]):
        trace = traces[chain["trace_id"]]
        parsed = parse_trace(trace["problem_id"], trace["model"], trace["text"])
        after_cut = parsed.reasoning[chain["original_prefix_chars"] :]
        backend.remainder_of[chain["id"]] = after_cut + parsed.think_close + parsed.answer_text
    assert backend.remainder_of
    run_pipeline(config, make_generator=lambda model: backend, progress=False, n_boot=100)
    assert_agree(run)
    assert read_aggregates(run)
