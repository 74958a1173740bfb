"""The chains stage for rule-based interventions, spread over worker processes.

Rule-based interventions (random characters, Wikipedia text, the toy ones) are pure string work, so the
kept traces are cut into fixed-size chunks and each chunk is intervened in a worker process
(`recovery.parallel.map_chunks`), which commits its own chains shard and skips shard. The chunking does
not depend on the number of workers, and shards are named by chunk, so the run directory holds the same
rows in the same order whatever ``cpu_workers`` is. A killed run loses at most the chunks in flight;
their keys are not stored, so the next run redoes exactly those.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from recovery.parallel import available_cpus, map_chunks
from recovery.pipeline import records
from recovery.run_config import RunConfig
from recovery.store import RunDir

# Traces per chunk: ~2,500 chains of ~6k characters per shard at the paper's 9 timesteps.
CHUNK_TRACES = 256
MAX_AUTO_WORKERS = 8

_worker_state: dict[str, Any] = {}

# Modules every pipeline worker pool asks the forkserver to preload (chain and grading workers fork from the
# same server): a worker then starts in milliseconds instead of importing these (~0.2 s each, measured).
WORKER_MODULES = (
    "recovery.pipeline.chain_workers",
    "recovery.pipeline.chains_stage",
    "recovery.pipeline.grade_workers",
)


@dataclass(frozen=True)
class ChainChunk:
    """One unit of work: traces (as stored rows) with their problems and the (intervention, t) still to do."""

    index: int
    run_dir: str
    items: tuple[tuple[dict, dict, tuple[tuple[str, float], ...]], ...]


def cpu_workers(config: RunConfig) -> int:
    """The number of processes for CPU-bound stages (``cpu_workers``, 0 = one per available CPU)."""
    if config.cpu_workers > 0:
        return config.cpu_workers
    return max(1, min(available_cpus(), MAX_AUTO_WORKERS))


def chunks_of(run: RunDir, pending: Iterable[tuple[dict, tuple]], problems: dict[str, dict]) -> Iterator[ChainChunk]:
    """`ChainChunk`s of ``CHUNK_TRACES`` traces from ``pending`` ((trace row, pairs still to do), in order)."""
    part: list = []
    index = 0
    for trace, todo in pending:
        part.append((trace, problems[trace["problem_id"]], todo))
        if len(part) == CHUNK_TRACES:
            yield ChainChunk(index, str(run.path), tuple(part))
            index, part = index + 1, []
    if part:
        yield ChainChunk(index, str(run.path), tuple(part))


def init_worker(config: RunConfig) -> None:
    """Build and describe the intervention instances once per worker process."""
    from recovery.interventions import describe_intervention
    from recovery.pipeline.chains_stage import intervention_instances

    instances = intervention_instances(config)
    _worker_state["config"] = config
    _worker_state["instances"] = {name: (impl, describe_intervention(impl)) for name, impl in instances.items()}


def run_chunk(chunk: ChainChunk) -> tuple[int, int, Counter]:
    """Intervene every pending (intervention, t) of the chunk's traces; commit chains, then skips.

    Returns (traces done, chains written, skip reasons counted).
    """
    from recovery.interventions import WAIT_TEXT, InterventionFailed, intervene_described
    from recovery.segment import TooFewSteps, parse_trace, split_steps

    config: RunConfig = _worker_state["config"]
    instances = _worker_state["instances"]
    cfg = config.interventions
    run = RunDir(chunk.run_dir)
    # Chains are collected column-wise: building the Arrow table from per-row dicts cost more than the
    # interventions themselves (16 µs vs ~1 µs per chain, measured on R1-sized traces).
    chains: dict[str, list] = {name: [] for name in records.CHAINS.names}
    written = 0
    skips: list[dict] = []
    reasons: Counter = Counter()
    for trace_row, problem_row, todo in chunk.items:
        trace = parse_trace(trace_row["problem_id"], trace_row["model"], trace_row["text"], trace_id=trace_row["id"])
        problem = records.problem_from_row(problem_row)
        steps = split_steps(trace.reasoning)
        for name, t in todo:
            key = records.chain_key(trace.id, name, t)
            impl, recorded = instances[name]
            try:
                chain, _ = intervene_described(
                    problem,
                    trace,
                    impl,
                    t,
                    recorded,
                    seed=cfg.seed,
                    generator=None,
                    min_steps=cfg.min_steps,
                    append_wait=cfg.append_wait,
                    wait_text=WAIT_TEXT,
                    repeats=cfg.repeats,
                    between=None,
                    steps=steps,
                )
            except TooFewSteps as err:
                reasons["too_few_steps"] += 1
                skips.append(records.skip_row("chains", key, "too_few_steps", str(err)))
                continue
            except InterventionFailed as err:
                reasons[err.reason] += 1
                skips.append(records.skip_row("chains", key, err.reason, str(err)))
                continue
            for column, value in records.chain_row(chain, key).items():
                chains[column].append(value)
            written += 1
    writer_id = f"c{chunk.index:06d}"
    if written:
        with run.table("chains").writer(records.CHAINS, writer_id=writer_id, rows_per_shard=written + 1) as writer:
            writer.add_columns(chains)
    if skips:
        with run.table("skips").writer(records.SKIPS, writer_id=writer_id, rows_per_shard=len(skips) + 1) as writer:
            writer.add_many(skips)
    return len(chunk.items), written, reasons


def run_chunks(chunks: Iterator[ChainChunk], config: RunConfig, on_done) -> int:
    """Run ``chunks`` over `cpu_workers` processes; ``on_done(chunk_traces, reasons)`` after each one."""
    written = 0
    for n_traces, count, reasons in map_chunks(
        run_chunk,
        chunks,
        workers=cpu_workers(config),
        initializer=init_worker,
        initargs=(config,),
        preload=WORKER_MODULES,
    ):
        written += count
        on_done(n_traces, reasons)
    return written
