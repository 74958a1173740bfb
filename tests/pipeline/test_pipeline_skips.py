"""What a run says it did and skipped is read back from its stored outputs: the same after a resume, from
`recovery report RUN`, and never counting a graded ``no_answer`` as a skip."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from recovery.generation import GenerationResult
from recovery.pipeline import DatasetConfig, InterventionsConfig, RunConfig, SamplingConfig, TracesConfig, run_pipeline
from recovery.pipeline.outcome import NothingMeasured
from recovery.run_dir import grade_verdicts, open_run, summary_skips
from recovery.store import RunDir


class FailingFirstChains:
    """The real tiny-reasoner backend behind a server that fails the first ``failures`` continuation
    requests (a server outage cannot be staged here; everything else is the real generator)."""

    concurrency = 1  # the Generator protocol: one request in flight

    def __init__(self, inner, failures: int) -> None:
        self.inner, self.name, self.spec, self.left = inner, inner.name, inner.spec, failures

    def generate(self, requests):
        failing = [r for r in requests if r.prefill][: self.left]
        self.left -= len(failing)
        for request in failing:
            yield GenerationResult(request.request_id, (), prompt_tokens=0, error="HTTP 503: server overloaded")
        ids = {r.request_id for r in failing}
        yield from self.inner.generate([r for r in requests if r.request_id not in ids])

    def close(self):
        self.inner.close()


def config(path) -> RunConfig:
    return RunConfig(
        run_dir=str(path),
        dataset=DatasetConfig(name="toy", limit=4, options={"seed": 21}),
        traces=TracesConfig(sampling=SamplingConfig(n=1, temperature=0.0, top_p=1.0, max_new_tokens=200)),
        interventions=InterventionsConfig(
            names=["toy/random_characters", "toy/wrong_continuation"], timesteps=[0.1, 0.5]
        ),
        continuation=SamplingConfig(n=3, max_new_tokens=60),
        flush_every=4,
        cpu_workers=2,
    )


def test_counts_come_from_the_stored_outputs(tmp_path, hf_factory):
    cfg = config(tmp_path / "run")
    first = run_pipeline(
        cfg, make_generator=lambda m: FailingFirstChains(hf_factory(m), failures=2), progress=False, n_boot=50
    )
    run = RunDir(cfg.run_dir)
    n_continuations, n_grades = run.table("continuations").count(), run.table("grades").count()
    assert first.written["continuations"] == n_continuations  # continuations, not chains
    assert first.written["grades"] == n_grades > 0  # graded alongside generation counts as grades written
    assert sum(first.grades.values()) == n_grades and first.grades == grade_verdicts(run)
    assert "no_answer" in first.grades  # 60 new tokens leave some continuations unclosed ...
    assert not [k for k in first.skips if "unclosed" in k or "no_answer" in k]  # ... which were graded, not skipped
    assert first.skips["continuations/generation_error"] == 2
    # `recovery report RUN` in a later process counts what the run counted.
    in_run = summary_skips(run, Counter({tuple(k.split("/", 1)): v for k, v in first.skips.items()}))
    assert summary_skips(run, Counter()) == in_run
    assert {"stage": "continuations", "reason": "generation_error", "count": 2} in in_run
    # Resumed with a healthy server: the two chains are continued and no longer count as skipped.
    again = run_pipeline(cfg, make_generator=hf_factory, progress=False, n_boot=50)
    assert again.written["continuations"] == 2 * 3 and run.table("grades").count() == n_grades + 6
    assert not [s for s in summary_skips(run, Counter()) if s["reason"] == "generation_error"]
    assert [s for s in summary_skips(run, Counter()) if s["stage"] == "chains"] == [
        s for s in in_run if s["stage"] == "chains"
    ]
    md = (run.path / "report" / "report.md").read_text()
    assert "grades by verdict.no_answer" in md


def test_traces_without_a_think_tag_are_stored_skips_not_regenerated(tmp_path, hf_factory):
    class NoTags:
        concurrency = 1  # the Generator protocol: one request in flight

        def __init__(self, inner):
            self.inner, self.name, self.spec, self.calls = inner, inner.name, inner.spec, 0

        def generate(self, requests):
            self.calls += len(requests)
            for result in self.inner.generate(requests):
                samples = tuple(
                    replace(s, text=s.text.replace("<think>", "").replace("</think>", "")) for s in result.samples
                )
                yield replace(result, samples=samples)

        def close(self):
            pass

    # Under the authors' prompts the stage stores the response as the model wrote it (no opener added), so a
    # response holding neither of its model's tags has no reasoning at all for the project's reading.
    cfg = replace(
        config(tmp_path / "run"),
        interventions=InterventionsConfig(names=["toy/random_characters"]),
        protocol="reference",
        protocol_parts={"interventions": "default"},
    )
    backend = NoTags(hf_factory(None))
    summary = run_pipeline(cfg, stages=["problems", "traces"], make_generator=lambda m: backend, progress=False)
    assert summary.skips == {"traces/no_think_tag": 4} and backend.calls == 4
    run_pipeline(cfg, stages=["problems", "traces"], make_generator=lambda m: backend, progress=False)
    assert backend.calls == 4  # not generated again
    assert summary_skips(RunDir(cfg.run_dir), Counter()) == [{"stage": "traces", "reason": "no_think_tag", "count": 4}]

    # The authors' reading takes such a response as a trace whose reasoning never closed; the filter drops it.
    authors = replace(cfg, run_dir=str(tmp_path / "authors"), protocol_parts={})
    with pytest.raises(NothingMeasured, match="kept 0 of 4 traces") as nothing:
        run_pipeline(authors, stages=["problems", "traces", "filter"], make_generator=lambda m: backend)
    assert "traces/no_think_tag" not in nothing.value.summary.skips and backend.calls == 8
    traces = list(RunDir(authors.run_dir).table("traces").iter_rows(["closed"]))
    assert len(traces) == 4 and not any(row["closed"] for row in traces)
    assert open_run(authors.run_dir).kept_ids() == set()
