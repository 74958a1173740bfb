"""A run SIGKILLed in the middle of the continuation stage resumes to exactly the uninterrupted result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter

import pytest

from recovery.store import Table

# Three runs, each its own process forked from one driver that has only imported the modules (never run
# anything), so they share the import time and nothing else: the uninterrupted run, a run SIGKILLed by the
# driver once two continuation shards are stored, and the same command again. The driver prints each one's
# exit status (-9: killed; 0 for the second means it ended before the kill) and the continuations the killed
# run had stored.
SCRIPT = textwrap.dedent("""
    import json, os, signal, sys, time, traceback
    from pathlib import Path
    from recovery.backends.hf import HFGenerator
    from recovery.models import get_spec
    from recovery.pipeline import DatasetConfig, InterventionsConfig, RunConfig, SamplingConfig, TracesConfig, run_pipeline
    from recovery.store import Table
    from recovery.toy import load_tiny_reasoner
    # Imported on first use by every run (the checkpoint's classes, the report's figures): imported here once.
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM, PreTrainedTokenizerFast
    from recovery.report.run_report import run_report_data

    def attempt(run_dir):
        model, tokenizer = load_tiny_reasoner()
        config = RunConfig(
            run_dir=run_dir,
            dataset=DatasetConfig(name="toy", limit=4, options={"seed": 77}),
            traces=TracesConfig(sampling=SamplingConfig(n=1, temperature=0.0, top_p=1.0, max_new_tokens=200)),
            interventions=InterventionsConfig(names=["toy/wrong_continuation", "toy/random_characters"], timesteps=[0.3, 0.7]),
            continuation=SamplingConfig(n=2, max_new_tokens=160, seed=5),
            flush_every=2,
        )
        # One request per batch: sampled tokens then never depend on how chains were batched before the kill.
        factory = lambda m: HFGenerator(model, tokenizer, spec=get_spec("tiny-reasoner"), seed=0, max_batch_requests=1)
        run_pipeline(config, make_generator=factory, progress=False, n_boot=100)

    def started(run_dir):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                attempt(run_dir)
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush(); sys.stderr.flush()
                os._exit(code)
        return pid

    def exit_status(status):
        return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)

    reference, killed = sys.argv[1:3]
    statuses = [exit_status(os.waitpid(started(reference), 0)[1])]
    pid, shards, deadline = started(killed), Path(killed) / "continuations", time.time() + 600
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:  # it ended before it could be killed
            break
        if time.time() > deadline or (shards.is_dir() and len(list(shards.glob("part-*.parquet"))) >= 2):
            os.kill(pid, signal.SIGKILL)
            status = os.waitpid(pid, 0)[1]
            break
        time.sleep(0.05)
    statuses.append(exit_status(status))
    stored_before = Table(shards).count() if shards.is_dir() else 0
    statuses.append(exit_status(os.waitpid(started(killed), 0)[1]))
    print(json.dumps({"statuses": statuses, "stored_before_the_resume": stored_before}))
""")


@pytest.mark.slow
def test_sigkill_during_continuations_then_resume(tmp_path, tiny_reasoner):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    reference, killed = tmp_path / "reference", tmp_path / "killed"
    command = [sys.executable, "-c", SCRIPT, str(reference), str(killed)]
    driver = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1200)
    assert driver.returncode == 0, driver.stderr[-3000:]
    printed = json.loads(driver.stdout.strip().splitlines()[-1])
    statuses, done_before = printed["statuses"], printed["stored_before_the_resume"]
    assert statuses[1] != 0, "the run finished before it could be killed; make it longer"
    assert statuses == [0, -9, 0], driver.stderr[-3000:]
    shards = killed / "continuations"
    total = Table(reference / "continuations").count()
    assert 0 < done_before < total, (done_before, total)

    ids = [r["id"] for r in Table(shards).iter_rows(["id"])]
    assert len(ids) == len(set(ids)) == total  # nothing duplicated, nothing missing
    per_chain = Counter(r["chain_id"] for r in Table(shards).iter_rows(["chain_id"]))
    assert set(per_chain.values()) == {2}
    assert json.loads((killed / "aggregates.json").read_text()) == json.loads(
        (reference / "aggregates.json").read_text()
    )
    texts = {r["id"]: r["text"] for r in Table(shards).iter_rows(["id", "text"])}
    assert texts == {r["id"]: r["text"] for r in Table(reference / "continuations").iter_rows(["id", "text"])}


def test_filter_stage_is_done_only_with_clean_accuracy(tmp_path, hf_factory):
    """A run killed after the filter's ``kept`` table but before ``clean_accuracy.json`` (the order before the
    fix) recomputes both on resume instead of skipping the stage and losing the file for good."""
    from recovery.pipeline import DatasetConfig, RunConfig, SamplingConfig, TracesConfig, run_pipeline

    config = RunConfig(
        run_dir=str(tmp_path / "run"),
        dataset=DatasetConfig(name="toy", limit=4, options={"seed": 3}),
        traces=TracesConfig(sampling=SamplingConfig(n=1, temperature=0.0, top_p=1.0, max_new_tokens=200)),
    )
    stages = ["problems", "traces", "filter"]
    run_pipeline(config, stages=stages, make_generator=hf_factory, progress=False)
    accuracy = tmp_path / "run" / "clean_accuracy.json"
    expected, kept = accuracy.read_text(), sorted(map(str, Table(tmp_path / "run" / "kept").iter_rows()))
    accuracy.unlink()  # the state a kill between the two writes left
    run_pipeline(config, stages=stages, make_generator=hf_factory, progress=False)
    assert accuracy.read_text() == expected
    assert sorted(map(str, Table(tmp_path / "run" / "kept").iter_rows())) == kept
    assert len(Table(tmp_path / "run" / "kept").shards()) == 1


def test_resume_removes_stale_temporary_files_everywhere_in_the_run(tmp_path):
    """Atomic writes outside the tables (JSON in the run root, report/, its figures) leave their temporary
    files behind when killed; a resumed run removes them as it removes the tables' own."""
    from recovery.pipeline import DatasetConfig, RunConfig, run_pipeline
    from recovery.store import atomic_write_text

    config = RunConfig(run_dir=str(tmp_path / "run"), dataset=DatasetConfig(name="toy", limit=2))
    run_pipeline(config, stages=["problems"], progress=False)
    root = tmp_path / "run"
    atomic_write_text(root / "report" / "figures" / "keep.png", "kept")
    stale = [
        root / ".aggregates.json.0a1b.tmp",
        root / "report" / ".report.html.77ff.tmp",
        root / "report" / "figures" / ".majority.png.12ab.tmp",
        root / "problems" / ".part-w0-000001.parquet.9c.tmp",
    ]
    for path in stale:
        path.write_text("partial")
    run_pipeline(config, stages=["problems"], progress=False)
    assert not [p for p in stale if p.exists()]
    assert (root / "report" / "figures" / "keep.png").read_text() == "kept" and (root / "config.json").is_file()


def test_what_may_change_on_resume_is_what_the_config_fields_declare(tmp_path):
    """A run resumes under a config whose changes are all in fields declared `results_neutral` (throughput,
    where work runs, names), in the run's config and its grading section alike; a change of any other field,
    or of a neutral field's neighbour in grading, is refused before work."""
    import dataclasses

    from recovery.configs import ConfigError, results_neutral_keys
    from recovery.pipeline import run_pipeline
    from recovery.run_config import DatasetConfig, GradingConfig, RunConfig, SamplingConfig
    from recovery.run_dir.writing import check_resumable
    from recovery.run_sections import ExecutorConfig

    assert results_neutral_keys(RunConfig) == {"run_dir", "wandb", "flush_every", "cpu_workers", "title", "executor"}
    assert results_neutral_keys(GradingConfig) == {"workers", "alongside"}
    config = RunConfig(run_dir=str(tmp_path / "run"), dataset=DatasetConfig(name="toy", limit=2))
    run_pipeline(config, stages=["problems"], progress=False)
    neutral = dataclasses.replace(
        config,
        flush_every=3,
        cpu_workers=1,
        title="renamed",
        executor=ExecutorConfig(replicas=2),
        grading=dataclasses.replace(config.grading, workers=5, alongside=False),
    )
    check_resumable(neutral)
    for changed in (
        dataclasses.replace(config, continuation=SamplingConfig(seed=1)),
        dataclasses.replace(config, grading=dataclasses.replace(config.grading, timeout_s=9.0)),
    ):
        with pytest.raises(ConfigError, match="different config"):
            check_resumable(changed)
