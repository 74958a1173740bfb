"""The chains stage for rule-based interventions, spread over worker processes.

Rule-based interventions (random characters, Wikipedia text, the toy ones) are pure string work, so the
kept traces are cut into fixed-size chunks and each chunk goes through the intervention loop
(`recovery.interventions.intervene_traces`, with the run's `ChainSettings`) in a worker process
(`recovery.parallel.map_chunks`), which commits its own chains shard and skips shard. The chunking does
not depend on the number of workers, and shards are named by chunk, so the run directory holds the same
rows in the same order whatever ``cpu_workers`` is. A killed run loses at most the chunks in flight;
their keys are not stored, so the next run redoes exactly those.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from recovery.interventions import ChainSettings, Produced, Skip, TraceJob, intervene_traces
from recovery.parallel import available_cpus
from recovery.plan import TraceReading
from recovery.run_config import RunConfig, ThinkTagsOf
from recovery.run_dir import Run, open_run, records

# Traces per chunk: ~2,500 chains of ~6k characters per shard at the paper's 9 timesteps.
CHUNK_TRACES = 256
MAX_AUTO_WORKERS = 8

_worker_state: dict[str, Any] = {}

# Modules every pipeline worker pool asks the forkserver to preload (chain and grading workers fork from the
# same server): a worker then starts with them imported instead of importing them itself.
WORKER_MODULES = ("recovery.pipeline.chain_workers", "recovery.pipeline.grade_workers")


@dataclass(frozen=True)
class ChainChunk:
    """One unit of work: traces (as stored rows) with their problems, the (intervention, t) still to do and
    their batch positions (None but under ``protocol: reference``, see `recovery.pipeline.chains_stage`)."""

    index: int
    run_dir: str
    items: tuple[tuple[dict, dict, tuple[tuple[str, float], ...], int | None], ...]


def cpu_workers(config: RunConfig) -> int:
    """The number of processes for CPU-bound stages (``cpu_workers``, 0 = one per available CPU)."""
    if config.cpu_workers > 0:
        return config.cpu_workers
    return max(1, min(available_cpus(), MAX_AUTO_WORKERS))


def chunks_of(
    run: Run,
    pending: Iterable[tuple[dict, tuple]],
    problems: dict[str, dict],
    positions: Mapping[str, int] | None = None,
) -> Iterator[ChainChunk]:
    """`ChainChunk`s of ``CHUNK_TRACES`` traces from ``pending`` ((trace row, pairs still to do), in order),
    each with its batch position from ``positions`` (None when absent)."""
    part: list = []
    index = 0
    for trace, todo in pending:
        position = positions.get(trace["id"]) if positions else None
        part.append((trace, problems[trace["problem_id"]], todo, position))
        if len(part) == CHUNK_TRACES:
            yield ChainChunk(index, str(run.path), tuple(part))
            index, part = index + 1, []
    if part:
        yield ChainChunk(index, str(run.path), tuple(part))


def init_worker(settings: ChainSettings, think_tags: ThinkTagsOf, reading: TraceReading) -> None:
    """Keep the run's settings (interventions built and described once, in the parent), its models' think
    tags (resolved in the parent, where every backend and spec the run names is registered) and its plan's
    reading of a response for this worker."""
    _worker_state["settings"] = settings
    _worker_state["think_tags"] = think_tags
    _worker_state["reading"] = reading


def run_chunk(chunk: ChainChunk) -> tuple[int, int, Counter]:
    """Intervene every pending (intervention, t) of the chunk's traces; commit chains, then skips.

    Returns (traces done, chains written, skip reasons counted).
    """
    run = open_run(chunk.run_dir)
    # Chains are collected column-wise: building the Arrow table from per-row dicts costs more than the
    # interventions themselves (bench/pipeline_scale.py).
    chains: dict[str, list] = {name: [] for name in records.CHAINS.names}
    skips: list[dict] = []
    reasons: Counter = Counter()
    jobs = (_job(item, _worker_state["think_tags"], _worker_state["reading"]) for item in chunk.items)
    for outcome in intervene_traces(jobs, _worker_state["settings"]):
        if isinstance(outcome, Produced):
            for column, value in records.chain_row(outcome.chain).items():
                chains[column].append(value)
        else:
            reasons[outcome.reason] += 1
            skips.append(skip_row(outcome))
    written = len(chains["id"])
    writer_id = f"c{chunk.index:06d}"
    if written:
        with run.tables.chains.writer(records.CHAINS, writer_id=writer_id, rows_per_shard=written + 1) as writer:
            writer.add_columns(chains)
    if skips:
        with run.tables.skips.writer(records.SKIPS, writer_id=writer_id, rows_per_shard=len(skips) + 1) as writer:
            writer.add_many(skips)
    return len(chunk.items), written, reasons


def skip_row(skip: Skip) -> dict[str, Any]:
    """The stored row of a chain the loop skipped (keyed like the chain it would have been)."""
    key = records.chain_key(skip.trace_id, skip.intervention, skip.target_t)
    return records.skip_row("chains", key, skip.reason, skip.message)


def _job(
    item: tuple[dict, dict, tuple[tuple[str, float], ...], int | None], think_tags: ThinkTagsOf, reading: TraceReading
) -> TraceJob:
    trace_row, problem_row, todo, position = item
    trace = records.trace_from_row(trace_row, think_tags(trace_row["model"]), reading)
    return TraceJob(records.problem_from_row(problem_row), trace, todo, position=position)
