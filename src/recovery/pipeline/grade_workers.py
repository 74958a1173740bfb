"""The grades stage (rule-based grading) spread over worker processes.

Continuations are read in fixed-size chunks; each chunk is graded in a worker process
(`recovery.parallel.map_chunks`) that commits its own grades shard. Chunks do not depend on the number of
workers and shards are named by chunk, so the stored rows and their order are the same for any
``cpu_workers``. Each worker keeps its own `Grader` (with its math-verify processes) and its own verdict
cache keyed by (answer part, problem). A killed run loses at most the chunks in flight.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from recovery.grading import Grader
from recovery.pipeline.rule_grading import CACHE_SIZE, VERDICT_TEXT, RuleGrading
from recovery.run_config import RunConfig, ThinkTagsOf
from recovery.run_dir import open_run, records
from recovery.segment import THINK, ThinkTags

CHUNK_ROWS = 16_384

_worker_state: dict[str, Any] = {}


@dataclass(frozen=True)
class GradeChunk:
    """Continuations to grade (parallel lists or Arrow arrays), the stored rows of their problems, and where to commit
    their grades. Each chunk carries only its own problems, so a worker's memory does not grow with the
    number of problems in the run."""

    index: int
    run_dir: str
    ids: Sequence[str]
    chain_ids: Sequence[str]
    problem_ids: Sequence[str]
    texts: Sequence[str | None]
    problems: dict[str, dict]
    writer_prefix: str = "g"  # shards are named <prefix><index>
    models: Sequence[str] | None = None  # who wrote each text (its think tags end its reasoning); None: <think>


def chunk_problems(problem_ids, row_of) -> dict[str, dict]:
    """The problem rows a chunk needs: ``row_of(problem_id)`` for each distinct id (a list or Arrow array)."""
    if not isinstance(problem_ids, list):
        import pyarrow.compute as pc

        problem_ids = pc.unique(problem_ids).to_pylist()
    return {pid: row_of(pid) for pid in set(problem_ids)}


def init_worker(config: RunConfig, grader=None) -> None:
    """Per-process state: a grader (``grader`` when running in the caller's process), the problems seen so
    far, and empty verdict and extraction caches."""

    _worker_state.clear()
    grader = grader or Grader(workers=config.grading.workers, timeout_s=config.grading.timeout_s)
    _worker_state["rules"] = RuleGrading({}, grader, unclosed=config.grading.unclosed)
    # Resolved here from the config handed over, not from the manifest: a backend or spec registered in the
    # parent only would not be known to a worker reading it.
    _worker_state["think_tags"] = ThinkTagsOf(config.models)


def grade_chunk(chunk: GradeChunk) -> tuple[int, Counter]:
    """Grade one chunk and commit its shard; returns (rows written, skip reasons counted)."""
    state = _worker_state
    problems = state["rules"].problems
    if len(problems) > CACHE_SIZE:  # bounded: problems are rebuilt from the chunk's rows when needed again
        problems.clear()
    for problem_id, row in chunk.problems.items():
        if problem_id not in problems:
            problems[problem_id] = records.problem_from_row(row)
    run = open_run(chunk.run_dir)
    tags = row_tags(chunk.models, state["think_tags"])
    columns, reasons = state["rules"].columns(chunk.texts, chunk.problem_ids, tags)
    columns["id"], columns["chain_id"] = chunk.ids, chunk.chain_ids
    table = run.tables.grades
    rows = len(chunk.ids)
    writer_id = f"{chunk.writer_prefix}{chunk.index:06d}"
    with table.writer(records.GRADES, writer_id=writer_id, rows_per_shard=rows + 1) as writer:
        writer.add_columns(columns)
    return rows, reasons


def row_tags(models, tags_of) -> list[ThinkTags] | None:
    """The think tags of the model of each row (``models``: a list or Arrow array of model names; ``tags_of``:
    a model's tags by name), or None when every row's model writes ``<think>`` (the columnar fast path)."""
    if models is None:
        return None
    names = models if isinstance(models, list) else models.to_pylist()
    by_name = {name: tags_of(name or "") for name in set(names)}
    if all(tags == THINK for tags in by_name.values()):
        return None
    return [by_name[name] for name in names]


def grade_columns(ids: list[str], chain_ids: list[str], grades, judged, primary: str) -> dict[str, list]:
    """The stored grade columns of many continuations (`recovery.run_dir.records.GRADES`): ``verdict`` and
    ``detail`` are the primary grade's (rule-based unless ``primary`` is ``"judge"`` and a judge ran), and both
    verdicts are kept when a judge ran."""
    columns: dict[str, list] = {name: [] for name in records.GRADES.names}
    columns["id"], columns["chain_id"] = ids, chain_ids
    for g, j in zip(grades, judged):
        chosen = j if (primary == "judge" and j is not None) else g
        columns["verdict"].append(VERDICT_TEXT[chosen.verdict])
        columns["extracted"].append(g.extracted)
        columns["detail"].append(chosen.detail[:500])
        columns["rule_verdict"].append(VERDICT_TEXT[g.verdict])
        columns["judge_verdict"].append(None if j is None else VERDICT_TEXT[j.verdict])
    return columns


def close_worker() -> None:
    """Stop the in-process grader's helpers (used when the chunks ran in the caller's process)."""
    _worker_state.clear()
