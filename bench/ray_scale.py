"""(a) The continuations stage on the local executor vs the Ray executor at 1 and 2 replicas, in one process.

Builds one toy run up to its chains (tiny reasoner, HF backend on CPU), then continues copies of it with
each executor and checks that the three give the same rows. Ray's start-up is measured and printed
separately: the cluster (``ray.init``) and the replicas (start an actor, build its backend, answer an empty
batch), so the ratios can be read with or without it:

  overhead N %   Ray at 1 replica vs local, stage time less the replica start-up (target ≤ 15 %)
  speed-up N×    Ray at 2 replicas vs Ray at 1, same correction

The tiny reasoner decodes on one CPU thread, so on a 2-core machine two replicas can at most double the
rate (the driver and the grading workers share those cores). Make generation long enough (≥ 1 minute
locally) that the start-up does not dominate. Usage:

(b) The driver at scale: the continuations stage on Ray with a stand-in engine that takes the time a GPU
replica would (``--tokens-per-s`` per replica, ``--sample-tokens`` decoded per sample, slept rather than
computed, the texts that long), 8 and 16 replicas, the paper's shape (8 samples per chain, 64 chains a
batch). To keep the bench short every batch takes ``--time-scale`` of its real time, so the driver and the
store face that many times the real rate. Each replica logs when it was busy:

  idle N %       the replicas' time not spent generating, in the steady state (from the last replica's
                 first batch to the first replica's last one), at 16 replicas (target ≤ 5 %)
  one driver keeps N replicas busy   the driver's batch rate with an engine that takes no time, times the
                 time a real replica takes for a batch

    python bench/ray_scale.py [--part a|b|both] [--problems 200] [--max-new-tokens 300] [--flush-every 4]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from recovery.pipeline import DatasetConfig, InterventionsConfig, RunConfig, SamplingConfig, TracesConfig, run_pipeline
from recovery.run_config import ExecutorConfig
from recovery.store import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))


def config(run_dir: Path, args, executor: ExecutorConfig | None = None) -> RunConfig:
    return RunConfig(
        run_dir=str(run_dir),
        dataset=DatasetConfig(name="toy", limit=args.problems, options={"seed": 3}),
        traces=TracesConfig(sampling=SamplingConfig(n=1, temperature=0.0, top_p=1.0, max_new_tokens=200)),
        interventions=InterventionsConfig(
            names=["toy/wrong_continuation", "toy/random_characters"], timesteps=[0.3, 0.7]
        ),
        continuation=SamplingConfig(n=args.n, max_new_tokens=args.max_new_tokens, seed=5),
        flush_every=args.flush_every,
        executor=executor or ExecutorConfig(),
    )


def rows(run_dir: Path) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in Table(run_dir / "continuations").iter_rows())


def replica_startup(replicas: int, cpus: float) -> float:
    """Seconds to start ``replicas`` actors with the tiny reasoner and have each answer an empty batch."""
    import functools

    import ray

    from recovery.backends.registry import make_generator
    from recovery.model_config import ModelConfig
    from recovery.pipeline.ray_replicas import Replica

    start = time.perf_counter()
    actor = ray.remote(Replica).options(num_cpus=cpus)
    factory = functools.partial(make_generator, seed=5)
    actors = [actor.remote(factory, ModelConfig(name="tiny-reasoner"), i) for i in range(replicas)]
    ray.get([a.generate.remote("warm-up", []) for a in actors])
    seconds = time.perf_counter() - start
    for a in actors:
        ray.kill(a)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["a", "b", "both"], default="both")
    parser.add_argument("--problems", type=int, default=200)
    parser.add_argument("--n", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=300)
    parser.add_argument("--flush-every", type=int, default=4)
    parser.add_argument("--cpus", type=float, default=2.0, help="CPUs of the local Ray cluster")
    parser.add_argument("--tokens-per-s", type=float, default=8100.0, help="(b) one replica's decode rate")
    parser.add_argument("--sample-tokens", type=int, default=1500, help="(b) tokens decoded per sample")
    parser.add_argument("--time-scale", type=float, default=0.05, help="(b) share of a batch's real time slept")
    parser.add_argument("--batches-per-replica", type=int, default=6, help="(b) batches each replica generates")
    args = parser.parse_args()
    if args.part in ("a", "both"):
        local_vs_ray(args)
    if args.part in ("b", "both"):
        from ray_paced import driver_at_scale

        driver_at_scale(args)


def local_vs_ray(args) -> None:
    import ray

    cpus_per_replica = args.cpus / 4  # fractional: two replicas leave room for the driver's workers
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "chains"
        run_pipeline(config(base, args), stages=["problems", "traces", "filter", "chains"], progress=False)
        chains = Table(base / "chains").count()
        times: dict[str, float] = {}
        results: dict[str, list[str]] = {}
        start = time.perf_counter()
        ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
        cluster_start = time.perf_counter() - start
        startup = {r: replica_startup(r, cpus_per_replica) for r in (1, 2)}
        plan = {"local": ExecutorConfig()}
        plan |= {f"ray {r}": ExecutorConfig(kind="ray", replicas=r, cpus_per_replica=cpus_per_replica) for r in (1, 2)}
        for name, executor in plan.items():
            run_dir = Path(tmp) / name.replace(" ", "")
            shutil.copytree(base, run_dir)
            start = time.perf_counter()
            run_pipeline(config(run_dir, args, executor), stages=["continuations"], progress=False)
            times[name] = time.perf_counter() - start
            results[name] = rows(run_dir)
        ray.shutdown()
    same = results["ray 1"] == results["local"] == results["ray 2"]
    print(
        f"workload: {chains} chains × {args.n} samples, max_new_tokens {args.max_new_tokens}, batches of "
        f"{args.flush_every} chains; same rows on all three: {same}"
    )
    print(f"ray start-up: cluster {cluster_start:.1f} s; replicas {startup[1]:.1f} s (1), {startup[2]:.1f} s (2)")
    for name, seconds in times.items():
        print(f"{name:8s} {seconds:7.1f} s  ({len(results[name]) / seconds:.1f} continuations/s)")
    net1, net2 = times["ray 1"] - startup[1], times["ray 2"] - startup[2]
    print(
        f"overhead {100 * (net1 / times['local'] - 1):.1f} % (Ray, 1 replica vs local, less replica start-up; "
        f"{100 * (times['ray 1'] / times['local'] - 1):.0f} % with it)"
    )
    print(
        f"speed-up {net1 / net2:.2f}× (Ray, 2 replicas vs 1, less replica start-up; "
        f"{times['ray 1'] / times['ray 2']:.2f}× with it; vs local {times['local'] / times['ray 2']:.2f}×)"
    )


if __name__ == "__main__":
    main()
