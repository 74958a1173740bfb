"""The filter stage: which original traces enter the benchmark (paper §3.2), each drop with its reason, and
the models' clean accuracy."""

from __future__ import annotations

from collections import defaultdict

from recovery.pipeline.context import Stage, StageContext, load_problems_table, load_traces_table
from recovery.run_dir import CLEAN_ACCURACY_FILE, KEPT_TABLE, records, write_clean_accuracy


def stage_filter(ctx: StageContext) -> int:
    """Decide which original traces enter the benchmark (paper §3.2); record the reason for each drop.

    The stage's outputs are ``clean_accuracy.json`` and the ``kept`` table, written in that order, the table
    as one atomic shard: it is done when both exist. A ``kept`` table without the file (a run killed between
    the two writes before they were ordered so) is recomputed; the filter is deterministic.
    """
    from recovery.data.filters import drop_longest, filter_closed, filter_correct, keep_solved_by_all

    table = ctx.run.table(KEPT_TABLE)
    if table.exists():
        if ctx.run.file(CLEAN_ACCURACY_FILE).is_file():
            return 0
        for shard in table.shards():
            shard.unlink()
    problems = load_problems_table(ctx.run)
    traces = load_traces_table(ctx.run)
    pairs = [(problems[t.problem_id], t) for t in traces.values() if t.problem_id in problems]
    cfg = ctx.config.traces.filters
    reasons: dict[str, str] = {}

    def step(current: list, result, reason: str) -> list:
        """Apply one filter's result, remembering why each dropped trace left."""
        kept_ids = {trace.id for _, trace in result.kept}
        for _, trace in current:
            if trace.id not in kept_ids:
                reasons[trace.id] = reason
        return list(result.kept)

    current = pairs
    if cfg.require_closed:
        current = step(current, filter_closed(current), "no_closing_think_tag")
    # Correctness is measured for every closed trace — it is the model's clean accuracy — and filtered on
    # only if asked.
    clean = filter_correct(current, grader=ctx.grader)
    correct_ids = {trace.id for _, trace in clean.kept}
    if cfg.require_correct:
        current = step(current, clean, "not_correct")
    if cfg.drop_longest_fraction > 0:
        current = step(current, drop_longest(current, cfg.drop_longest_fraction), "longest_fraction")
    if cfg.intersect_models and len(ctx.config.models) > 1:
        current = step(current, keep_solved_by_all(current, [m.name for m in ctx.config.models]), "not_solved_by_all")
    kept_ids = {trace.id for _, trace in current}
    rows = []
    for problem, trace in pairs:
        kept = trace.id in kept_ids
        reason = "kept" if kept else reasons.get(trace.id, "dropped")
        if not kept:
            ctx.counts[("filter", reason)] += 1
        rows.append({"id": trace.id, "model": trace.model, "problem_id": problem.id, "kept": kept, "reason": reason})
    write_clean_accuracy(ctx.run, clean_accuracy_rows(pairs, correct_ids))
    with table.writer(records.KEPT, rows_per_shard=max(len(rows), 1)) as writer:
        writer.add_many(rows)
    return len(kept_ids)


def clean_accuracy_rows(pairs, correct_ids: set[str]) -> list[dict]:
    """Accuracy of the original traces per (model, domain): the model's clean accuracy."""
    per_model: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for problem, trace in pairs:
        cell = per_model[(trace.model, problem.domain)]
        cell[0] += 1
        cell[1] += trace.id in correct_ids
    return [
        {"model": m, "domain": d, "n": n, "accuracy": (c / n if n else float("nan"))}
        for (m, d), (n, c) in sorted(per_model.items())
    ]


STAGE = Stage("filter", stage_filter, "which original traces enter the benchmark, and clean accuracy")
