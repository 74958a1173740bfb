"""A run that measured nothing is not a success (issue 26): a stage whose every backend request failed, or a
filter that kept no trace, ends the run with `NothingMeasured` and one line saying why — counts and the most
common reason verbatim — after writing ``summary.json`` and a report that says the same. A run where only
some requests failed measures the rest and lists each distinct reason with its count."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from recovery.cli import app
from recovery.generation import GenerationResult
from recovery.models import get_spec
from recovery.pipeline import DatasetConfig, InterventionsConfig, RunConfig, SamplingConfig, TracesConfig, run_pipeline
from recovery.pipeline.outcome import NothingMeasured
from recovery.store import RunDir

# What the OpenAI backend makes of a server's HTTP 422 (`recovery.backends.openai_loop.failure_reason`).
REFUSAL = 'HTTP 422: {"detail": "prompt must be a string."}'


class RefusingServer:
    """A backend in front of a server that refuses every request: each result carries the server's reason,
    as the OpenAI backend returns it. It stands in for the failing server, not for anything under test."""

    concurrency = 1  # the Generator protocol: one request in flight

    name = "openai"
    spec = get_spec("tiny-reasoner")

    def generate(self, requests):
        for request in requests:
            yield GenerationResult(request.request_id, (), prompt_tokens=0, error=REFUSAL)

    def close(self) -> None:
        pass


class RefusingSome:
    """The real tiny-reasoner backend behind a server that refuses the requests ``refuse`` picks."""

    concurrency = 1  # the Generator protocol: one request in flight

    def __init__(self, inner, refuse) -> None:
        self.inner, self.name, self.spec, self.refuse = inner, inner.name, inner.spec, refuse

    def generate(self, requests):
        refused = [r for r in requests if self.refuse(r)]
        for request in refused:
            yield GenerationResult(request.request_id, (), prompt_tokens=0, error=REFUSAL)
        yield from self.inner.generate([r for r in requests if r not in refused])

    def close(self) -> None:
        self.inner.close()


def config(path, *, trace_tokens: int = 200) -> RunConfig:
    return RunConfig(
        run_dir=str(path),
        dataset=DatasetConfig(name="toy", limit=4, options={"seed": 21}),
        traces=TracesConfig(sampling=SamplingConfig(n=1, temperature=0.0, top_p=1.0, max_new_tokens=trace_tokens)),
        interventions=InterventionsConfig(names=["toy/random_characters"], timesteps=[0.5]),
        continuation=SamplingConfig(n=2, max_new_tokens=40),
        flush_every=4,
        cpu_workers=1,
    )


def test_every_trace_request_failing_fails_the_run_with_the_reason_and_resumes(tmp_path, hf_factory):
    cfg = config(tmp_path / "run")
    with pytest.raises(NothingMeasured) as caught:
        run_pipeline(cfg, make_generator=lambda m: RefusingServer(), progress=False, n_boot=50)
    assert str(caught.value) == f"traces: 4 of 4 requests failed: {REFUSAL}"
    summary = caught.value.summary
    assert summary.failed_requests == [{"stage": "traces", "reason": REFUSAL, "count": 4, "of": 4}]
    assert list(summary.written) == ["problems", "traces"]  # the stages after it did not run on nothing
    run = RunDir(cfg.run_dir)
    assert not run.table("kept").exists()
    stored = json.loads((run.path / "summary.json").read_text())
    assert stored["outcome"] == str(caught.value) and stored["skips"] == {"traces/generation_error": 4}
    report = (run.path / "report" / "report.md").read_text()
    assert f"**Nothing was measured**: traces: 4 of 4 requests failed: {REFUSAL}" in report
    assert "no intervened chain has been graded yet" not in report
    # `recovery report RUN` later rewrites it from the stored summary, and says the same.
    (run.path / "report" / "report.md").unlink()
    assert CliRunner().invoke(app, ["report", str(run.path)]).exit_code == 0
    assert (
        f"**Nothing was measured**: traces: 4 of 4 requests failed: {REFUSAL}"
        in (run.path / "report" / "report.md").read_text()
    )
    # What was done stays; with a server that answers, the same run goes on from there.
    resumed = run_pipeline(cfg, stages=["problems", "traces", "filter"], make_generator=hf_factory, progress=False)
    assert resumed.written["traces"] == 4 and resumed.written["filter"] > 0 and resumed.outcome is None
    assert resumed.failed_requests == []


def test_some_failed_requests_are_listed_by_reason_and_the_rest_measured(tmp_path, hf_factory):
    cfg = config(tmp_path / "run")
    left = {"refusals": 2}

    def refuse_two_traces(request) -> bool:
        if request.prefill or not left["refusals"]:
            return False
        left["refusals"] -= 1
        return True

    summary = run_pipeline(
        cfg,
        stages=["problems", "traces"],
        make_generator=lambda m: RefusingSome(hf_factory(m), refuse_two_traces),
        progress=False,
    )
    assert summary.outcome is None and summary.written["traces"] == 2
    assert summary.failed_requests == [{"stage": "traces", "reason": REFUSAL, "count": 2, "of": 4}]


def test_every_continuation_failing_stores_each_reason_verbatim(tmp_path, hf_factory):
    cfg = config(tmp_path / "run")
    with pytest.raises(NothingMeasured) as caught:
        run_pipeline(
            cfg,
            make_generator=lambda m: RefusingSome(hf_factory(m), lambda r: bool(r.prefill)),
            progress=False,
            n_boot=50,
        )
    run = RunDir(cfg.run_dir)
    n_chains = run.table("chains").count()
    assert n_chains > 0
    assert str(caught.value) == f"continuations: {n_chains} of {n_chains} requests failed: {REFUSAL}"
    assert "grades" not in caught.value.summary.written
    details = {(r["reason"], r["detail"]) for r in run.table("skips").iter_rows() if r["stage"] == "continuations"}
    assert details == {("generation_error", REFUSAL)}


def test_a_filter_that_kept_nothing_names_the_cause_and_the_setting(tmp_path, hf_factory):
    # Six new tokens: the tiny reasoner's traces are cut long before they close the think block.
    cfg = config(tmp_path / "run", trace_tokens=6)
    # Generating the traces alone is a legitimate partial run: nothing was meant to be filtered yet.
    partial = run_pipeline(cfg, stages=["problems", "traces"], make_generator=hf_factory, progress=False)
    assert partial.outcome is None and partial.written["traces"] == 4
    with pytest.raises(NothingMeasured) as caught:
        run_pipeline(cfg, make_generator=hf_factory, progress=False, n_boot=50)
    assert str(caught.value) == (
        "filter: kept 0 of 4 traces of model 'tiny-reasoner': 4 no_closing_think_tag — 4 of its traces stopped "
        "at traces.sampling.max_new_tokens (6) before closing the think block: raise it"
    )
    assert list(caught.value.summary.written) == ["problems", "traces", "filter"]
    assert str(caught.value) in (RunDir(cfg.run_dir).path / "report" / "report.md").read_text()


def test_an_llm_that_refuses_every_request_fails_the_chains_or_grades_stage(tmp_path, hf_factory):
    """The intervention LLM and the LLM judge are backends too: when every call to one fails, the line gives
    its stage, the counts and the server's reason (as the chat wrapper raised it)."""
    from recovery.pipeline import GradingConfig, ModelConfig

    def make_generator(model):
        return RefusingServer() if model.name == "refusing" else hf_factory(model)

    base = config(tmp_path / "chains")
    llm = InterventionsConfig(names=["complete_step"], timesteps=[0.5], llm=ModelConfig(name="refusing"))
    with pytest.raises(NothingMeasured) as chains:
        run_pipeline(replace(base, interventions=llm), make_generator=make_generator, progress=False, n_boot=50)
    n = len(RunDir(base.run_dir).table("skips").keys("id"))
    assert n > 0
    assert str(chains.value) == f"chains: {n} of {n} requests failed: RuntimeError: generation failed: {REFUSAL}"

    judged = replace(
        config(tmp_path / "grades"),
        grading=GradingConfig(judge=ModelConfig(name="refusing")),
        continuation=SamplingConfig(n=2, max_new_tokens=200),  # closed continuations: the judge is asked
    )
    with pytest.raises(NothingMeasured) as grades:
        run_pipeline(judged, make_generator=make_generator, progress=False, n_boot=50)
    (failed,) = grades.value.summary.failed_requests
    assert failed["stage"] == "grades" and failed["count"] == failed["of"] > 0
    assert str(grades.value) == (
        f"grades: {failed['of']} of {failed['of']} requests failed: RuntimeError: generation failed: {REFUSAL}"
    )
