"""The grades stage: rule-based grading of every continuation (in worker processes), optionally beside an
LLM judge whose disagreements with the rules are logged."""

from __future__ import annotations

from collections.abc import Iterator

import recovery.pipeline.grade_workers as grade_workers
from recovery.grading.verdict import NEVER_CLOSED
from recovery.parallel import map_threads
from recovery.pipeline.chain_workers import WORKER_MODULES, cpu_workers
from recovery.pipeline.context import Stage, StageContext
from recovery.pipeline.executors import InProcesses, InThreads, StageWork, run_work
from recovery.pipeline.grade_workers import grade_columns
from recovery.pipeline.judge_input import judged_texts, run_judge
from recovery.pipeline.rule_grading import RuleGrading
from recovery.run_dir import records
from recovery.types import Grade


def stage_grades(ctx: StageContext, batch_size: int = 16384, cache_size: int = 200_000) -> int:
    """Grade every continuation not yet graded. A continuation whose reasoning never closed has no final
    answer: it is graded ``no_answer`` rather than scored on an intermediate number — unless
    ``grading.unclosed`` is ``grade`` (the authors' protocol), which grades (and judges) its whole text.

    Verdicts are cached by (text after the reasoning, problem): samples often end identically, and the
    verdict depends on nothing else. Rows are read and written column-wise (millions of them). Without a
    judge, chunks are graded and committed by worker processes; with one, each batch is graded here and its
    judge calls made in threads, as many in flight as the judge's backend takes.
    """
    judge = run_judge(ctx, ctx.plan.judge_inputs.grades)
    if judge is None:
        done = ctx.run.tables.grades.keys("id")
        # Everything may have been graded alongside generation: then nothing is read.
        if ctx.run.tables.continuations.count() <= len(done):
            return 0
        workers = cpu_workers(ctx.config)
        initargs = (ctx.config, ctx.grader if workers <= 1 else None)
        executor = InProcesses(workers, grade_workers.init_worker, initargs, WORKER_MODULES)
        return run_work(_chunk_work(ctx, done, batch_size), executor)
    return run_work(_judged_work(ctx, judge, batch_size, cache_size), InThreads(1))


def _chunk_work(ctx: StageContext, done, chunk_rows: int) -> StageWork:
    """Chunks of the continuations still to grade, each graded and committed by a worker (the run's grader
    serves when there is one worker)."""
    source = ctx.run.tables.continuations
    problem_rows = {r["id"]: r for r in ctx.run.problem_rows()}
    # The bar counts the continuations still to grade (every stored grade belongs to one).
    bar = ctx.bar(total=max(source.count() - len(done), 0), desc="grading", unit="continuation")

    def chunks() -> Iterator[grade_workers.GradeChunk]:
        index = 0
        for batch in source.iter_batches(["id", "chain_id", "problem_id", "text", "model"], batch_size=chunk_rows):
            columns = [batch.column(i).to_pylist() for i in range(5)]
            if done:
                keep = ~done.contains_many(columns[0])
                columns = [[v for v, k in zip(col, keep) if k] for col in columns]
            if columns[0]:
                problems = grade_workers.chunk_problems(columns[2], problem_rows.__getitem__)
                ids, chain_ids, problem_ids, texts, models = columns
                yield grade_workers.GradeChunk(
                    index, str(ctx.run.path), ids, chain_ids, problem_ids, texts, problems, models=models
                )
                index += 1

    def commit(result: tuple[int, object]) -> int:
        count = result[0]
        bar.update(count)
        return count

    def finished() -> None:
        grade_workers.close_worker()
        bar.close()

    return StageWork(chunks(), grade_workers.grade_chunk, commit, finished)


def _judged_work(ctx: StageContext, judge, batch_size: int, cache_size: int) -> StageWork:
    """Batches of the continuations still to grade: rule grades here, one judge call per continuation (in
    threads: on the Ray executor one in flight per replica, in order), disagreements logged, a shard each."""
    done = ctx.run.tables.grades.keys("id")
    problems = ctx.run.problems()
    primary = ctx.config.grading.primary
    width = ctx.concurrency([ctx.config.grading.judge])
    disagreements = ctx.run.tables.judge_disagreements
    # The authors' judge input: the complete answer where it differs from the continuation's (`needs_prefix`).
    shown = judged_texts(ctx.run, judge.shown_chars) if judge.authors_input else None
    rules = RuleGrading(problems, ctx.grader, cache_size=cache_size, unclosed=ctx.config.grading.unclosed)
    writer = ctx.run.tables.grades.writer(records.GRADES, rows_per_shard=max(batch_size, 50_000))
    total = ctx.run.tables.continuations.count()
    bar = ctx.bar(total=total, desc="grading", unit="continuation")

    def grade(batch) -> tuple[int, dict[str, list], int]:
        ids, chain_ids, problem_ids, texts, models = (batch.column(i).to_pylist() for i in range(5))
        finished = done.contains_many(ids)
        keep = [i for i in range(len(ids)) if not finished[i]]
        tags = [ctx.run.think_tags(models[i] or "") for i in keep]
        grades, _ = rules.grades([texts[i] for i in keep], [problem_ids[i] for i in keep], tags)
        items = [
            (problems[problem_ids[i]], shown(chain_ids[i], texts[i] or "") if shown else texts[i] or "", g, t)
            for i, g, t in zip(keep, grades, tags)
        ]
        judged: list[Grade | None] = list(map_threads(_judged(judge), items, width=width))
        ctx.log.judge_calls("grades", judged)  # an unclosed continuation was not judged (None)
        _log_disagreements(ctx, disagreements, [(ids[i], chain_ids[i], g, j) for i, g, j in zip(keep, grades, judged)])
        columns = grade_columns([ids[i] for i in keep], [chain_ids[i] for i in keep], grades, judged, primary)
        return len(keep), columns, batch.num_rows

    def commit(result: tuple[int, dict[str, list], int]) -> int:
        count, columns, rows_read = result
        writer.add_columns(columns)
        writer.flush()
        bar.update(rows_read)
        return count

    def finished() -> None:
        writer.flush()
        bar.close()

    batches = ctx.run.continuation_batches(["id", "chain_id", "problem_id", "text", "model"], batch_size=batch_size)
    return StageWork(batches, grade, commit, finished)


def _judged(judge):
    """``(problem, text, rule grade, think tags) → judge's grade``; None for an unclosed continuation (no
    answer)."""

    def judged(item) -> Grade | None:
        problem, text, rule, tags = item
        return None if rule is NEVER_CLOSED else judge(problem, text, tags)

    return judged


def _log_disagreements(ctx: StageContext, table, items) -> None:
    """Record every continuation where the rule-based grader and the judge disagree (and count them)."""
    rows = []
    for cid, chain_id, rule, judged in items:
        if judged is None or judged.correct == rule.correct:
            continue
        rows.append(
            {
                "id": cid,
                "chain_id": chain_id,
                "rule_verdict": str(rule.verdict),
                "rule_detail": rule.detail[:300],
                "judge_verdict": str(judged.verdict),
                "judge_detail": judged.detail[:300],
            }
        )
    if rows:
        with table.writer(records.DISAGREEMENTS, writer_id="judge") as writer:
            writer.add_many(rows)


STAGE = Stage("grades", stage_grades, "a verdict per continuation")
