"""The aggregate stage: the run's per-chain tallies (`recovery.run_dir.tallies`) summarised per
(model, domain, intervention, timestep) into ``aggregates.json``.

Statistics are computed one group at a time from the tallies' arrays, so no Python object per chain ever
exists for the whole run.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from recovery.metrics import DEFAULT_GROUP_BY, AggregateRow, summarize_chains
from recovery.parallel import available_cpus
from recovery.pipeline.context import Stage, StageContext
from recovery.plan import LengthMeasure
from recovery.run_config import think_closers
from recovery.run_dir import ChainTallies, Run, chain_tallies, write_aggregates


def aggregate_tallies(tallies: ChainTallies, *, n_boot: int = 2000, seed: int = 0) -> list[AggregateRow]:
    """The rows of `recovery.metrics.aggregate` by (model, domain, intervention, timestep), computed from
    the arrays one group at a time (`recovery.metrics.summarize_chains`); each group's values keep stored
    chain order, so the statistics, bootstrap intervals included, are exactly those of aggregating every
    `ChainOutcome` at once."""

    def group_row(members) -> AggregateRow:
        first = members[0]
        key = {name: tallies.values[name][tallies.codes[name][first]] for name in ("model", "domain", "intervention")}
        key["target_t"] = float(tallies.target_t[first])
        stats = summarize_chains(
            tallies.k[members],
            tallies.n[members],
            tallies.whole_pct[members],
            tallies.remaining_pct[members],
            n_boot=n_boot,
            seed=seed,
            problems=tallies.codes["problem"][members],
        )
        if tallies.completions is not None:  # the authors' mean over completions (`ChainTallies.completions`)
            mean, std = tallies.completions.group_mean_std(members)
            whole = replace(stats[3], mean=mean, std=std)
            stats = (*stats[:3], whole, stats[4])
        return AggregateRow({b: key[b] for b in DEFAULT_GROUP_BY}, len(members), *stats)

    # Groups in threads: the bootstrap's draws, gathers and sums run in NumPy without the GIL, and each
    # summary seeds its own generator, so the rows do not depend on the threads.
    with ThreadPoolExecutor(max_workers=max(1, min(available_cpus(), 8))) as pool:
        rows = list(pool.map(group_row, tallies.groups()))
    rows.sort(key=lambda r: tuple(str(r.key[b]) for b in DEFAULT_GROUP_BY))
    return rows


def aggregate_run(
    run: Run,
    *,
    n_boot: int = 2000,
    seed: int = 0,
    think_close: Mapping[str, str] | None = None,
    length: LengthMeasure | None = None,
) -> list[AggregateRow]:
    """Aggregate per (model, domain, intervention, timestep) and write ``aggregates.json`` atomically
    (``think_close``, ``length``: see `recovery.run_dir.chain_tallies`)."""
    tallies = chain_tallies(run, think_close, length=length)
    rows = aggregate_tallies(tallies, n_boot=n_boot, seed=seed)
    write_aggregates(run, rows)
    return rows


def stage_aggregate(ctx: StageContext) -> int:
    """The aggregate stage: `aggregate_run` with the run's seed, each model's closing think tag and the
    style of its ``length`` part (``protocol: reference``: the authors' length overhead)."""
    config = ctx.config
    rows = aggregate_run(
        ctx.run,
        n_boot=ctx.n_boot,
        seed=config.interventions.seed,
        think_close=think_closers(config.models),
        length=ctx.plan.length,
    )
    return len(rows)


STAGE = Stage("aggregate", stage_aggregate, "robustness and length change per (model, domain, intervention, t)")
