"""The continuations stage on a real local Ray cluster (HF backend, the tiny reasoner): the same rows and
aggregates as the local executor at 2 replicas, and at 1 replica after that replica is killed mid-run and after
the driver is SIGKILLed mid-run and the command re-run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from recovery.configs import ConfigError
from recovery.pipeline import DatasetConfig, GradingConfig, InterventionsConfig, RunConfig, SamplingConfig, TracesConfig
from recovery.run_sections import ExecutorConfig
from recovery.store import Table

ray = pytest.importorskip("ray")

UPSTREAM = ["problems", "traces", "filter", "chains"]
DOWNSTREAM = ["continuations", "grades", "aggregate"]


def config(run_dir: Path, executor: ExecutorConfig | None = None, alongside: bool = True) -> RunConfig:
    """The toy run; ``alongside=False`` grades in the grades stage only (fewer processes to start; the
    setting never changes results, so such a run resumes and compares like any other)."""
    return RunConfig(
        run_dir=str(run_dir),
        dataset=DatasetConfig(name="toy", limit=4, options={"seed": 41}),
        traces=TracesConfig(sampling=SamplingConfig(n=1, temperature=0.0, top_p=1.0, max_new_tokens=200)),
        interventions=InterventionsConfig(
            names=["toy/wrong_continuation", "toy/random_characters"], timesteps=[0.3, 0.7]
        ),
        continuation=SamplingConfig(n=2, max_new_tokens=80, seed=5),
        flush_every=2,  # several batches, so replicas share the work and a kill lands mid-run
        executor=executor or ExecutorConfig(),
        grading=GradingConfig(alongside=alongside),
    )


def on_ray(replicas: int, address: str | None = None) -> ExecutorConfig:
    # Fractional CPUs: two replicas and the driver's grading workers share the 2-CPU test cluster.
    return ExecutorConfig(kind="ray", address=address, replicas=replicas, cpus_per_replica=0.5, max_restarts=2)


def contents(run_dir: Path) -> dict:
    """The continuations (rows sorted, whatever the shard layout) and the aggregates of a run."""
    rows = sorted(json.dumps(r, sort_keys=True) for r in Table(run_dir / "continuations").iter_rows())
    return {"continuations": rows, "aggregates": json.loads((run_dir / "aggregates.json").read_text())}


def shard_bytes(run_dir: Path) -> dict[str, bytes]:
    """The continuations table's shards, by name."""
    return {p.name: p.read_bytes() for p in Table(run_dir / "continuations").shards()}


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.fixture(scope="module")
def chains_run(tmp_path_factory) -> Path:
    """A run directory holding the stages before the continuations (run once, locally)."""
    from recovery.pipeline import run_pipeline

    path = tmp_path_factory.mktemp("ray") / "chains"
    run_pipeline(config(path), stages=UPSTREAM, progress=False, n_boot=100)
    return path


def continued(chains_run: Path, where: Path, executor: ExecutorConfig, alongside: bool = True) -> Path:
    """A copy of ``chains_run`` continued, graded and aggregated with ``executor``."""
    from recovery.pipeline import run_pipeline

    shutil.copytree(chains_run, where)
    run_pipeline(config(where, executor, alongside), stages=DOWNSTREAM, progress=False, n_boot=100)
    return where


@pytest.fixture(scope="module")
def local_run(chains_run) -> Path:
    return continued(chains_run, chains_run.parent / "local", ExecutorConfig())


@pytest.fixture(scope="module")
def local_result(local_run) -> dict:
    return contents(local_run)


def test_two_replicas_give_the_local_shards_and_aggregates(cluster, chains_run, local_run, local_result, tmp_path):
    """Two replicas sharing the batches give the local run's rows, in the local run's very shards (one batch
    a shard, committed in batch order through the same writer). One replica's rows are checked against the
    same local run by the two tests after this one (a replica killed, the driver killed), so a run of its own
    here would repeat their check."""
    run_dir = continued(chains_run, tmp_path / "ray2", on_ray(2))
    assert contents(run_dir) == local_result
    n_chains = Table(run_dir / "chains").count()
    assert n_chains >= 8 and len(shard_bytes(run_dir)) == -(-n_chains // 2)  # batches of 2 chains (flush_every)
    assert shard_bytes(run_dir) == shard_bytes(local_run)
    deadline = time.time() + 30
    while ray.util.list_named_actors() and time.time() < deadline:
        time.sleep(0.1)
    assert not ray.util.list_named_actors(), "every replica is stopped when the stage ends"


def test_a_replica_killed_mid_run_is_restarted_and_its_batch_redone(cluster, chains_run, local_result, tmp_path):
    from recovery.pipeline.ray_replicas import REPLICA_PREFIX

    run_dir = tmp_path / "killed"
    shards = run_dir / "continuations"
    killed: list[tuple[str, int]] = []

    def kill_after_the_first_batch() -> None:
        deadline = time.time() + 120
        while time.time() < deadline and not killed:
            names = [n for n in ray.util.list_named_actors() if n.startswith(REPLICA_PREFIX)]
            if names and shards.is_dir() and list(shards.glob("part-*.parquet")):
                ray.kill(ray.get_actor(names[0]), no_restart=False)
                killed.append((names[0], len(list(shards.glob("part-*.parquet")))))
            time.sleep(0.02)

    thread = threading.Thread(target=kill_after_the_first_batch, daemon=True)
    thread.start()
    continued(chains_run, run_dir, on_ray(1), alongside=False)  # one replica: its next batch is in flight when it dies
    thread.join()
    assert killed and killed[0][1] < 8, "the replica was killed while batches were left"
    ids = [r["id"] for r in Table(shards).iter_rows(["id"])]
    assert len(ids) == len(set(ids))  # nothing appended twice
    assert contents(run_dir) == local_result


DRIVER = textwrap.dedent("""
    import sys
    sys.path[:0] = [sys.argv[3]]
    from test_ray_executor import DOWNSTREAM, config, on_ray
    from recovery.pipeline import run_pipeline

    run_pipeline(config(sys.argv[1], on_ray(1, sys.argv[2]), False), stages=DOWNSTREAM, progress=False, n_boot=100)
""")


@pytest.mark.slow
def test_the_driver_sigkilled_mid_run_resumes_to_the_same_result(cluster, chains_run, local_result, tmp_path):
    run_dir = tmp_path / "driver"
    shutil.copytree(chains_run, run_dir)
    shards = run_dir / "continuations"
    command = [sys.executable, "-c", DRIVER, str(run_dir), cluster, str(Path(__file__).parent)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if shards.is_dir() and len(list(shards.glob("part-*.parquet"))) >= 2:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the driver finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = Table(shards).count()
    assert 0 < before < len(local_result["continuations"])

    out = subprocess.run(command, env=env, capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    per_chain = Counter(r["chain_id"] for r in Table(shards).iter_rows(["chain_id"]))
    assert set(per_chain.values()) == {2}  # every chain once, with its two samples
    assert contents(run_dir) == local_result


def test_a_ray_executor_without_ray_fails_before_any_work(monkeypatch, tmp_path):
    from recovery.pipeline.validate import check_run_config

    monkeypatch.setitem(sys.modules, "ray", None)  # what importlib sees where ray is not installed
    with pytest.raises(ConfigError, match=r"^run\.executor\.kind: ray is not installed \(pip install"):
        check_run_config(config(tmp_path, on_ray(1)), where="run", stages=DOWNSTREAM)
    check_run_config(config(tmp_path, on_ray(1)), where="run", stages=["problems"])  # no generation: fine


def test_bad_executor_settings_fail_in_one_line(tmp_path):
    from recovery.configs import from_mapping

    with pytest.raises(ConfigError, match=r"executor.kind: 'slurm' is not one of 'local', 'ray'"):
        from_mapping(RunConfig, {"run_dir": "r", "dataset": {"name": "toy"}, "executor": {"kind": "slurm"}})
    with pytest.raises(ValueError, match=r"executor.replicas must be ≥ 1"):
        ExecutorConfig(kind="ray", replicas=0)


def test_a_pool_generates_a_batch_whole_on_one_replica(cluster, tmp_path):
    """`RayGenerator.generate_whole` (how the continuations stage uses a pool) sends the whole batch to one
    idle replica and returns its results in request order; `generate` (every other stage) cuts a call into one
    chunk per replica. The per-replica counts are what the stage's progress bar shows."""
    from recovery.backends.registry import make_generator
    from recovery.generation import GenerationRequest, Message, SamplingParams
    from recovery.model_config import ModelConfig
    from recovery.pipeline.ray_replicas import RayGenerator, ReplicaPool

    pool = ReplicaPool(on_ray(2), make_generator, ModelConfig(name="tiny-reasoner"))
    generator = RayGenerator(pool)
    try:
        sampling = SamplingParams(n=1, temperature=0.0, top_p=1.0, max_new_tokens=4)
        requests = [
            GenerationRequest(f"r{i}", sampling, messages=(Message("user", f"{i} + {i} = ?"),)) for i in range(4)
        ]
        assert [r.request_id for r in generator.generate_whole(requests)] == ["r0", "r1", "r2", "r3"]
        assert sorted(pool.throughput.requests) == [0, 4]  # one replica did the whole batch
        assert [r.request_id for r in generator.generate(requests)] == ["r0", "r1", "r2", "r3"]
        assert sorted(pool.throughput.requests) == [2, 6]  # then a chunk of two on each
        assert generator.status().startswith("r0 ") and "/s" in generator.status()
    finally:
        generator.close()


GENERATING_TABLES = ("traces", "chains", "skips", "continuations", "grades", "judge_disagreements")


def every_stage_config(run_dir: Path, llm, executor: ExecutorConfig | None = None) -> RunConfig:
    """A toy run in which every generating stage generates: the tiny reasoner writes the traces and the
    continuations, SmolLM2 writes an LLM-backed intervention and judges the answers."""
    from recovery.pipeline import GradingConfig

    return RunConfig(
        run_dir=str(run_dir),
        dataset=DatasetConfig(name="toy", limit=3, options={"seed": 41}),
        traces=TracesConfig(sampling=SamplingConfig(n=1, temperature=0.0, top_p=1.0, max_new_tokens=200)),
        interventions=InterventionsConfig(
            names=["toy/random_characters", "wrong_continuation"],
            timesteps=[0.5],  # one timestep: every generating stage still generates, on both replicas of each model
            options={"wrong_continuation": {"max_new_tokens": 16}},
            llm=llm,
        ),
        continuation=SamplingConfig(n=2, max_new_tokens=60, seed=5),
        flush_every=2,
        executor=executor or ExecutorConfig(),
        grading=GradingConfig(alongside=False, judge=llm),
    )


def tables(run_dir: Path) -> dict:
    """Every table a generating stage writes (rows sorted, whatever the shard layout) and the aggregates."""
    got = {
        name: sorted(json.dumps(r, sort_keys=True) for r in Table(run_dir / name).iter_rows())
        for name in GENERATING_TABLES
    }
    return {**got, "aggregates": json.loads((run_dir / "aggregates.json").read_text())}


@pytest.mark.slow
def test_every_generating_stage_on_ray_writes_the_local_tables(cluster, smollm2_folder, tmp_path):
    """Traces, the LLM-backed intervention, the continuations and the LLM judge on two replicas per model
    give the tables of a local run, row for row. SmolLM2 is the session's GGUF load saved as a plain folder
    (`smollm2_folder`): each of its replicas loads it at once instead of de-quantizing the GGUF."""
    from recovery.pipeline import run_pipeline

    local = every_stage_config(tmp_path / "local", smollm2_folder)
    run_pipeline(local, progress=False, n_boot=100)
    on_cluster = every_stage_config(tmp_path / "ray", smollm2_folder, on_ray(2))
    seen: set[str] = set()
    running = threading.Event()
    running.set()

    def watch_replicas() -> None:
        while running.is_set():
            seen.update(ray.util.list_named_actors())
            time.sleep(0.05)

    watcher = threading.Thread(target=watch_replicas, daemon=True)
    watcher.start()
    try:
        run_pipeline(on_cluster, progress=False, n_boot=100)
    finally:
        running.clear()
        watcher.join()
    assert len(seen) == 4, f"two replicas of each model generated: {sorted(seen)}"
    want, got = tables(tmp_path / "local"), tables(tmp_path / "ray")
    assert want["traces"] and want["continuations"] and want["grades"]
    llm_chains = [json.loads(r) for r in want["chains"] if json.loads(r)["intervention"] == "wrong_continuation"]
    assert llm_chains, "SmolLM2 wrote some of the chains"
    assert any(json.loads(r)["judge_verdict"] is not None for r in want["grades"]), "the judge graded"
    assert got == want
    deadline = time.time() + 30
    while ray.util.list_named_actors() and time.time() < deadline:
        time.sleep(0.1)
    assert not ray.util.list_named_actors(), "every model's replicas are stopped when the run ends"


def test_an_unreachable_cluster_fails_in_one_line_before_any_work(tmp_path):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run_dir = tmp_path / "never"
    toy = Path(__file__).parents[2] / "eval" / "toy.yaml"
    command = [
        sys.executable,
        "-m",
        "recovery",
        "run",
        str(toy),
        "--run-dir",
        str(run_dir),
        "--ray-address",
        f"127.0.0.1:{port}",
    ]
    out = subprocess.run(command, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    assert out.returncode == 2, out.stdout + out.stderr
    assert len(lines) == 1 and f"executor.address: cannot reach a Ray cluster at 127.0.0.1:{port}" in lines[0]
    assert not run_dir.exists(), "nothing was written"


def test_a_malformed_cluster_address_is_named():
    from recovery.pipeline.ray_replicas import check_reachable

    with pytest.raises(ConfigError, match=r"^executor.address: 'headnode' is not host:port, 'auto' or a ray://"):
        check_reachable("headnode")
