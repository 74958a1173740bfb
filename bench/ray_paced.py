"""Part (b) of bench/ray_scale.py: can one driver keep many GPU replicas busy?

The continuations stage runs on the Ray executor against a stand-in engine (`PacedStandIn`): pipeline_scale's
deterministic continuations, each sample padded to ``sample_tokens`` tokens of text, returned after the time
a replica decoding ``tokens_per_s`` would take for the batch (times ``time_scale``). The replicas log when
they were busy, so the share of their time spent waiting on the driver and the store is measured, not
inferred. The driver's own capacity is measured with an engine that takes no time at all.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from pipeline_scale import StandInGenerator, seed_run_dir
from recovery.pipeline import InterventionsConfig, ModelConfig, RunConfig, SamplingConfig, run_pipeline
from recovery.run_config import DatasetConfig, ExecutorConfig
from recovery.segment import DEFAULT_TIMESTEPS
from recovery.store import Table

CHARS_PER_TOKEN = 3.5  # as docs/distributed.md assumes for R1-distill text
FILLER = "Let me carefully compute the next partial result and check it against the last one.\n\n"
SAMPLES_PER_CHAIN = 8  # the paper's N
CHAINS_PER_BATCH = 64  # the run config's default flush_every


class PacedStandIn(StandInGenerator):
    """A stand-in GPU replica: a batch takes (its samples × ``sample_tokens``) / ``tokens_per_s`` seconds,
    scaled by ``time_scale``; each sample's text is ``sample_tokens`` tokens long. Every batch appends its
    busy interval (wall clock) to ``log_dir``/<pid>.jsonl, one file per replica process."""

    name = "paced-stand-in"

    def __init__(self, tokens_per_s: float, sample_tokens: int, time_scale: float, log_dir: str) -> None:
        super().__init__()
        self.seconds_per_token = time_scale / tokens_per_s
        self.sample_tokens = sample_tokens
        self.padding = FILLER * max(0, round(sample_tokens * CHARS_PER_TOKEN / len(FILLER)) - 1)
        self.log = Path(log_dir) / f"{os.getpid()}.jsonl"

    def generate(self, requests: Sequence) -> Iterator:
        from recovery.generation import GenerationResult, Sample

        start = time.time()
        requests = list(requests)
        results = [
            GenerationResult(
                r.request_id,
                tuple(Sample(self.padding + s.text, self.sample_tokens, s.finish_reason) for s in r.samples),
                prompt_tokens=r.prompt_tokens,
                prefilled_tokens=r.prefilled_tokens,
            )
            for r in super().generate(requests)
        ]
        tokens = sum(r.sampling.n for r in requests) * self.sample_tokens
        time.sleep(max(0.0, tokens * self.seconds_per_token - (time.time() - start)))
        if requests:
            with self.log.open("a") as f:
                f.write(json.dumps([start, time.time()]) + "\n")
        yield from results


def paced_factory(settings: dict, _model: ModelConfig) -> PacedStandIn:
    return PacedStandIn(**settings)


def steady_idle(log_dir: Path) -> tuple[float, float, int]:
    """``(idle share, steady-state seconds, replicas)`` from the replicas' busy intervals: the steady state
    runs from the last replica's first batch to the first replica's last one, when every replica has work."""
    spans = [[json.loads(line) for line in p.read_text().splitlines()] for p in sorted(log_dir.glob("*.jsonl"))]
    begin = max(s[0][0] for s in spans)
    end = min(s[-1][1] for s in spans)
    if end <= begin:
        return math.nan, 0.0, len(spans)
    busy = sum(max(0.0, min(b, end) - max(a, begin)) for s in spans for a, b in s)
    return 1 - busy / (len(spans) * (end - begin)), end - begin, len(spans)


def batch_span(log_dir: Path) -> tuple[float, int]:
    """Seconds from the first batch's start to the last one's end, and the number of batches."""
    intervals = [json.loads(line) for p in log_dir.glob("*.jsonl") for line in p.read_text().splitlines()]
    return max(b for _, b in intervals) - min(a for a, _ in intervals), len(intervals)


def config(run_dir: Path, executor: ExecutorConfig | None = None) -> RunConfig:
    return RunConfig(
        run_dir=str(run_dir),
        dataset=DatasetConfig(name="synthetic"),
        models=[ModelConfig(name="stand-in")],
        interventions=InterventionsConfig(names=["random_characters"]),
        continuation=SamplingConfig(n=SAMPLES_PER_CHAIN),
        flush_every=CHAINS_PER_BATCH,
        executor=executor or ExecutorConfig(),
    )


def continue_on(base: Path, where: Path, replicas: int, settings: dict) -> Path:
    """A copy of the chains run ``base`` continued on ``replicas`` paced replicas; returns its log folder."""
    import functools

    log_dir = where.parent / f"{where.name}-log"
    log_dir.mkdir()
    shutil.copytree(base, where)
    executor = ExecutorConfig(kind="ray", replicas=replicas, cpus_per_replica=0.05, max_restarts=0)
    factory = functools.partial(paced_factory, {**settings, "log_dir": str(log_dir)})
    run_pipeline(config(where, executor), stages=["continuations"], make_generator=factory, progress=False)
    return log_dir


def driver_at_scale(args) -> None:
    import ray

    most = 16
    chains = most * args.batches_per_replica * CHAINS_PER_BATCH
    traces = math.ceil(chains / len(DEFAULT_TIMESTEPS))
    real_batch_s = CHAINS_PER_BATCH * SAMPLES_PER_CHAIN * args.sample_tokens / args.tokens_per_s
    settings = {"tokens_per_s": args.tokens_per_s, "sample_tokens": args.sample_tokens, "time_scale": args.time_scale}
    print(
        f"\n(b) stand-in GPU replicas: {traces} traces → {traces * len(DEFAULT_TIMESTEPS)} chains × "
        f"{SAMPLES_PER_CHAIN} samples of {args.sample_tokens} tokens, {CHAINS_PER_BATCH} chains a batch; a real "
        f"replica at {args.tokens_per_s:,.0f} tokens/s takes {real_batch_s:.1f} s a batch, the stand-in "
        f"{real_batch_s * args.time_scale:.2f} s (time scale {args.time_scale}: the driver faces "
        f"{1 / args.time_scale:.0f}× the real rate)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "chains"
        seed_run_dir(base, traces)
        run_pipeline(config(base), stages=["chains"], progress=False)
        ray.init(
            num_cpus=args.cpus,
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": {"PYTHONPATH": str(Path(__file__).resolve().parent)}},
        )
        try:
            idle = {}
            for replicas in (8, most):
                log_dir = continue_on(base, Path(tmp) / f"paced{replicas}", replicas, settings)
                idle[replicas] = steady_idle(log_dir)
                share, seconds, seen = idle[replicas]
                print(
                    f"  {replicas:2d} replicas: idle {100 * share:.1f} % of {seen} replicas' time over {seconds:.1f} s"
                )
            instant = continue_on(base, Path(tmp) / "instant", most, {**settings, "time_scale": 0.0})
            span, batches = batch_span(instant)
            written = Table(Path(tmp) / "instant" / "continuations").count()
        finally:
            ray.shutdown()
    rate = batches / span
    print(
        f"idle {100 * idle[most][0]:.1f} % (replicas waiting on the driver and the store, at {most} replicas, "
        f"steady state, {1 / args.time_scale:.0f}× the real batch rate; target ≤ 5 %)"
    )
    print(
        f"driver alone (an engine that takes no time, {most} replicas): {rate:.1f} batches/s "
        f"({rate * CHAINS_PER_BATCH * SAMPLES_PER_CHAIN:,.0f} continuations/s, {written:,} written) → "
        f"one driver keeps {rate * real_batch_s:,.0f} replicas busy at {args.tokens_per_s:,.0f} tokens/s each"
    )
