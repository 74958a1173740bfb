"""The filter stage: which original traces enter the benchmark (paper §3.2), each drop with its reason, and
the models' clean accuracy.

The steps run in the order of the run's ``selection`` protocol part: the project's (closed → correct → longest
2 % of the reasoning → solved by all) or the authors' (`recovery.data.reference_selection`: correct → solved
by all → per model closed, longest whole responses, answer cap), either followed by the optional draw. A run
whose traces come from another run (``traces.source: run``) takes that run's verdicts
(`recovery.pipeline.run_reuse`).
"""

from __future__ import annotations

from collections import defaultdict

from recovery.data.filters import cap_per_answer, drop_longest, filter_closed, filter_correct, keep_solved_by_all
from recovery.data.reference_selection import Selection, draw_problems, reference_selection
from recovery.grading import Grader
from recovery.grading.verdict import trace_graded_part
from recovery.parallel import map_threads
from recovery.pipeline.context import Stage, StageContext
from recovery.pipeline.judge_input import run_judge
from recovery.pipeline.run_reuse import reuse_selection
from recovery.run_dir import CLEAN_ACCURACY_FILE, records, write_clean_accuracy
from recovery.run_filters import FilterConfig
from recovery.segment import authors_closed
from recovery.types import Grade


def stage_filter(ctx: StageContext) -> int:
    """Decide which original traces enter the benchmark (paper §3.2); record the reason for each drop.

    The stage's outputs are ``clean_accuracy.json`` and the ``kept`` table, written in that order, the table
    as one atomic shard: it is done when both exist. A ``kept`` table without the file (a run killed between
    the two writes before they were ordered so) is recomputed; the filter is deterministic.
    """
    table = ctx.run.tables.kept
    if table.exists():
        if ctx.run.file(CLEAN_ACCURACY_FILE).is_file():
            return 0
        for shard in table.shards():
            shard.unlink()
    if ctx.config.traces.source == "run":
        return reuse_selection(ctx)
    problems = ctx.run.problems()
    traces = ctx.run.traces()
    pairs = [(problems[t.problem_id], t) for t in traces.values() if t.problem_id in problems]
    if ctx.plan.selection.authors_order:
        kept_ids, reasons, correct_ids = _reference_order(ctx, pairs, list(problems))
    else:
        kept_ids, reasons, correct_ids = _default_order(ctx, pairs)
    rows = []
    for problem, trace in pairs:
        kept = trace.id in kept_ids
        reason = "kept" if kept else reasons.get(trace.id, "dropped")
        if not kept:
            ctx.log.count("filter", reason)
        rows.append({"id": trace.id, "model": trace.model, "problem_id": problem.id, "kept": kept, "reason": reason})
    write_clean_accuracy(ctx.run, clean_accuracy_rows(pairs, correct_ids))
    with table.writer(records.KEPT, rows_per_shard=max(len(rows), 1)) as writer:
        writer.add_many(rows)
    return len(kept_ids)


def _default_order(ctx: StageContext, pairs: list) -> tuple[set[str], dict[str, str], set[str]]:
    """The project's order: closed → correct → longest fraction (reasoning) → solved by all models, then the
    answer cap (`recovery.data.filters.cap_per_answer`) and the draw when configured. Returns the kept trace
    ids, the reason of each dropped one, and the correct ones (of the closed traces: the clean accuracy)."""

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
    if cfg.max_per_answer is not None:
        current = step(current, cap_per_answer(current, cfg.max_per_answer), "answer_cap")
    current = _drawn(cfg, [m.name for m in ctx.config.models], current, reasons)
    return {trace.id for _, trace in current}, reasons, correct_ids


def _reference_order(ctx: StageContext, pairs: list, order: list[str]) -> tuple[set[str], dict[str, str], set[str]]:
    """The authors' order (`recovery.data.reference_selection`), the pairs taken in the problems' order (their
    files' order), correctness from the run's LLM judge when one is configured (the authors select with
    theirs: ``scripts/judge_answers.py --mode single``), else from the rule-based grader. Every trace is
    graded, closed or not; the clean accuracy counts the correct closed ones, as the default order does."""

    cfg = ctx.config.traces.filters
    position = {pid: i for i, pid in enumerate(order)}
    pairs = sorted(pairs, key=lambda pair: position[pair[0].id])
    grades = _judged(ctx, pairs) if ctx.config.grading.judge is not None else _rule_grades(ctx.grader, pairs)
    correct = {trace.id for (_, trace), grade in zip(pairs, grades, strict=True) if grade.correct}
    selection = reference_selection(
        pairs,
        correct,
        [m.name for m in ctx.config.models],
        require_correct=cfg.require_correct,
        intersect=cfg.intersect_models,
        require_closed=cfg.require_closed,
        drop_longest_fraction=cfg.drop_longest_fraction,
        max_per_answer=cfg.max_per_answer,
    )
    kept = _drawn(cfg, [m.name for m in ctx.config.models], selection.kept, selection.reasons)
    clean = {trace.id for _, trace in pairs if trace.id in correct and authors_closed(trace.text)}
    return {trace.id for _, trace in kept}, selection.reasons, clean


def _drawn(filters: FilterConfig, models: list[str], current: list, reasons: dict[str, str]) -> list:
    """``filters.draw`` problems among those every one of ``models`` kept
    (`recovery.data.reference_selection.draw_problems`), or ``current`` unchanged when no draw is configured."""
    if filters.draw is None:
        return current
    return draw_problems(Selection(current, reasons), models, filters.draw, filters.draw_seed).kept


def _rule_grades(grader: Grader, pairs: list) -> list[Grade]:
    """The rule ``grader``'s verdict on each trace's graded part (`recovery.grading.verdict.trace_graded_part`:
    its answer, cut by its model's tags, or its whole text when it never closed)."""
    return grader.grade_parts([(trace_graded_part(trace), problem) for problem, trace in pairs])


def _judged(ctx: StageContext, pairs: list) -> list[Grade]:
    """The run's LLM judge (`recovery.pipeline.judge_input.run_judge`, shown the authors' input when the
    ``selection`` part follows them) on each whole trace, read with its model's tags; each call is counted in
    the run's `StageLog` under ``filter``, a failed one with its reason."""
    judge = run_judge(ctx, ctx.plan.judge_inputs.selection)
    width = ctx.concurrency([ctx.config.grading.judge])
    tags = ctx.run.think_tags
    grades = list(map_threads(lambda pair: judge(pair[0], pair[1].text, tags(pair[1].model)), pairs, width=width))
    ctx.log.judge_calls("filter", grades)
    return grades


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
