"""`recovery demo` whose measurement measured nothing ends like `recovery run` (issue 26): exit 1 and one
error line naming the demo's run and the cause, not a demo summary of empty numbers."""

from __future__ import annotations

from dataclasses import replace

from typer.testing import CliRunner

from recovery.cli import app
from recovery.demo import DemoSize
from recovery.demo.run import plan_demo
from recovery.pipeline import run_pipeline


class CutShort:
    """The real tiny-reasoner backend with every reply cut after a few characters, as a model whose traces
    stop before closing the think block (only the reply is cut; the model and its prompts are real)."""

    concurrency = 1  # the Generator protocol: one request in flight

    def __init__(self, inner) -> None:
        self.inner, self.name, self.spec = inner, inner.name, inner.spec

    def generate(self, requests):
        for result in self.inner.generate(requests):
            samples = tuple(replace(s, text=s.text[:12], finish_reason="length") for s in result.samples)
            yield replace(result, samples=samples)

    def close(self) -> None:
        self.inner.close()


def test_a_demo_measurement_that_kept_no_trace_exits_1_with_the_line(tmp_path, hf_factory):
    out = tmp_path / "demo"
    # The demo's own "before" run, its traces generated (and stored) by the cut-short backend: the demo
    # resumes it, and its filter keeps nothing.
    before = plan_demo(out, DemoSize.of(quick=True), 0, train=False, grpo=False).before
    run_pipeline(
        before, stages=["problems", "traces"], make_generator=lambda m: CutShort(hf_factory(m)), progress=False
    )
    result = CliRunner().invoke(app, ["demo", "--quick", "--no-train", "--no-progress", "--out", str(out)])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {before.run_dir}: filter: kept 0 of "), result.output
    assert "no_closing_think_tag" in errors[0] and "traces.sampling.max_new_tokens" in errors[0]
