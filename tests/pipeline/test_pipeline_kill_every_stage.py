"""A run SIGKILLed at the end of each stage in turn (right after the stage's last write, before the next
begins) resumes to exactly the uninterrupted run: every table, clean_accuracy.json, aggregates.json and the
report's text, its skip table included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from recovery.pipeline.stages import STAGES
from recovery.store import Table

# The stage functions are the real ones; the fault injected is a SIGKILL of the whole process right after
# stage ``kill_after`` returns (the kill a user or a scheduler does, at the worst moment for that stage). Each
# attempt is its own process, forked from a driver that has only imported the modules (never run anything),
# so the attempts share the import time and nothing else; the driver prints each attempt's exit status.
SCRIPT = textwrap.dedent("""
    import dataclasses, json, os, signal, sys, traceback
    from recovery.backends.hf import HFGenerator
    from recovery.models import get_spec
    from recovery.pipeline import (DatasetConfig, InterventionsConfig, RunConfig, SamplingConfig, TracesConfig,
                                   run_pipeline)
    from recovery.pipeline.stages import STAGES
    from recovery.toy import load_tiny_reasoner
    # Imported on first use by every attempt: the checkpoint's model and tokenizer classes (by the loading each
    # attempt does itself) and the report's figures (by the report stage). Only imported here, never run.
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM, PreTrainedTokenizerFast
    from recovery.report.run_report import run_report_data

    def killed_after(fn):
        def call(*args, **kwargs):
            out = fn(*args, **kwargs)
            os.kill(os.getpid(), signal.SIGKILL)
            return out
        return call

    def attempt(run_dir, kill_after):
        if kill_after != "none":
            stage = STAGES[kill_after]
            STAGES[kill_after] = dataclasses.replace(stage, run=killed_after(stage.run))
        model, tokenizer = load_tiny_reasoner()
        config = RunConfig(
            run_dir=run_dir,
            dataset=DatasetConfig(name="toy", limit=3, options={"seed": 41}),
            traces=TracesConfig(sampling=SamplingConfig(n=1, temperature=0.0, top_p=1.0, max_new_tokens=200)),
            interventions=InterventionsConfig(names=["toy/wrong_continuation", "toy/random_characters"], timesteps=[0.1, 0.5]),
            continuation=SamplingConfig(n=2, max_new_tokens=120, seed=5), cpu_workers=2, flush_every=3,
        )
        factory = lambda m: HFGenerator(model, tokenizer, spec=get_spec("tiny-reasoner"), seed=0, max_batch_requests=1)
        run_pipeline(config, make_generator=factory, progress=False, n_boot=100)

    statuses = []
    for run_dir, kill_after in json.loads(sys.argv[1]):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                attempt(run_dir, kill_after)
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush(); sys.stderr.flush()
                os._exit(code)
        status = os.waitpid(pid, 0)[1]
        statuses.append(-os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))
    print(json.dumps(statuses))
""")


def attempts(plan: list[tuple[Path, str]]) -> list[int]:
    """Run each ``(run_dir, kill_after)`` in its own process, in order; their exit statuses (-9: killed)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps([[str(d), k] for d, k in plan])],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def contents(run_dir: Path) -> dict:
    """Every output of a run, independent of shard layout and of the folder it lives in."""
    out: dict = {}
    for table in sorted(p for p in run_dir.iterdir() if p.is_dir() and p.name != "report"):
        rows = [json.dumps(r, sort_keys=True, default=str) for r in Table(table).iter_rows()]
        out[table.name] = sorted(rows)
    for name in ("clean_accuracy.json", "aggregates.json"):
        out[name] = json.loads((run_dir / name).read_text())
    out["report.md"] = (run_dir / "report" / "report.md").read_text().replace(str(run_dir), "RUN")
    return out


@pytest.mark.slow
def test_kill_at_the_end_of_every_stage_then_resume(tmp_path):
    reference, killed = tmp_path / "reference", tmp_path / "killed"
    # killed once at the end of each stage, resumed by the next process, then finished
    plan = [(reference, "none"), *[(killed, stage) for stage in STAGES], (killed, "none")]
    assert attempts(plan) == [0, *[-9] * len(STAGES), 0]
    expected, got = contents(reference), contents(killed)
    assert got.keys() == expected.keys()
    for name in expected:
        assert got[name] == expected[name], name
    assert "Skipped items" in got["report.md"]
