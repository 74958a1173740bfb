"""The grades stage (rule-based grading) spread over worker processes.

Continuations are read in fixed-size chunks; each chunk is graded in a worker process
(`recovery.parallel.map_chunks`) that commits its own grades shard. Chunks do not depend on the number of
workers and shards are named by chunk, so the stored rows and their order are the same for any
``cpu_workers``. Each worker keeps its own `Grader` (with its math-verify processes) and its own verdict
cache keyed by (answer part, problem). A killed run loses at most the chunks in flight.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from recovery.grading import answer_part, extract_answer
from recovery.pipeline import records
from recovery.pipeline.config import RunConfig
from recovery.store import RunDir
from recovery.types import Grade, Verdict

CHUNK_ROWS = 16_384
CACHE_SIZE = 200_000
# A continuation whose reasoning never closed has no final answer to grade.
UNCLOSED = Grade(Verdict.NO_ANSWER, None, "reasoning never closed")
VERDICT_TEXT = {verdict: verdict.value for verdict in Verdict}  # Enum .value is slow per row

_worker_state: dict[str, Any] = {}


@dataclass(frozen=True)
class GradeChunk:
    """Continuations to grade (parallel lists), the stored rows of their problems, and where to commit
    their grades. Each chunk carries only its own problems, so a worker's memory does not grow with the
    number of problems in the run."""

    index: int
    run_dir: str
    ids: list[str]
    chain_ids: list[str]
    problem_ids: list[str]
    texts: list[str | None]
    problems: dict[str, dict]
    writer_prefix: str = "g"  # shards are named <prefix><index>


def chunk_problems(problem_ids: list[str], row_of) -> dict[str, dict]:
    """The problem rows a chunk needs: ``row_of(problem_id)`` for each distinct id."""
    return {pid: row_of(pid) for pid in set(problem_ids)}


def init_worker(config: RunConfig, grader=None) -> None:
    """Per-process state: a grader (``grader`` when running in the caller's process), the problems seen so
    far, and empty verdict and extraction caches."""
    from recovery.grading import Grader

    _worker_state.clear()
    _worker_state["problems"] = {}
    _worker_state["grader"] = grader or Grader(workers=config.grading.workers, timeout_s=config.grading.timeout_s)
    _worker_state["cache"] = {}
    _worker_state["extractions"] = {}


def grade_chunk(chunk: GradeChunk) -> tuple[int, Counter]:
    """Grade one chunk and commit its shard; returns (rows written, skip reasons counted)."""
    state = _worker_state
    problems = state["problems"]
    if len(problems) > CACHE_SIZE:  # bounded: problems are rebuilt from the chunk's rows when needed again
        problems.clear()
    for problem_id, row in chunk.problems.items():
        if problem_id not in problems:
            problems[problem_id] = records.problem_from_row(row)
    grades, reasons = rule_grades(chunk.texts, chunk.problem_ids, problems, state["grader"], state["cache"],
                                  extractions=state["extractions"])  # fmt: skip
    columns = grade_columns(chunk.ids, chunk.chain_ids, grades, [None] * len(grades), "rule")
    table = RunDir(chunk.run_dir).table("grades")
    with table.writer(records.GRADES, writer_id=f"{chunk.writer_prefix}{chunk.index:06d}", rows_per_shard=len(grades) + 1) as writer:
        writer.add_columns(columns)
    return len(grades), reasons


def rule_grades(texts: list, problem_ids: list[str], problems: dict, grader, cache: dict, cache_size: int = CACHE_SIZE,
                extractions: dict | None = None):  # fmt: skip
    """Rule-based `Grade`s of continuation ``texts`` (one per text) and the skip reasons counted.

    Unclosed reasoning is ``no_answer`` without grading. Verdicts are cached by (answer part, problem);
    each distinct miss is graded once per call. The answer is taken out of each distinct answer part once
    (``extractions``, keyed by (answer part, answer type)): extraction does not depend on the problem, and
    across problems the same closing sentences recur.
    """
    reasons: Counter = Counter()
    grades: list = []
    misses: dict[tuple[str, str], list[int]] = {}
    for text, problem_id in zip(texts, problem_ids):
        key = grading_key(text or "", problem_id)
        if key is None:
            grades.append(UNCLOSED)
            reasons["unclosed_reasoning"] += 1
            continue
        hit = cache.get(key)
        if hit is None:
            misses.setdefault(key, []).append(len(grades))
        grades.append(hit)
    if misses:
        keys = list(misses)
        extractions = {} if extractions is None else extractions
        answers = [_extracted(answer, problems[problem_id].answer_type, extractions, cache_size) for answer, problem_id in keys]
        for key, grade in zip(keys, grader.grade_extracted([(a, problems[k[1]]) for a, k in zip(answers, keys)])):
            for slot in misses[key]:
                grades[slot] = grade
            if len(cache) < cache_size:
                cache[key] = grade
    return grades, reasons


def _extracted(answer_text: str, answer_type, extractions: dict, cache_size: int) -> str | None:
    """``extract_answer(answer_part(answer_text), answer_type)``, remembered in ``extractions``."""
    key = (answer_text, answer_type)
    if key in extractions:
        return extractions[key]
    answer = extract_answer(answer_part(answer_text), answer_type)
    if len(extractions) < cache_size:
        extractions[key] = answer
    return answer


def grading_key(text: str, problem_id: str) -> tuple[str, str] | None:
    """(answer part, problem) — what a verdict depends on — or None when the reasoning never closed.

    Continuations start inside the reasoning, so they normally hold a closing tag and no opening one;
    that common case is cut directly, anything else goes through `answer_part`'s full tag rules.
    """
    if "<think>" not in text and "<thought>" not in text:
        for close in ("</think>", "</thought>"):
            end = text.find(close)
            if end >= 0:
                return text[end + len(close) :], problem_id
        return None
    if "</think>" not in text and "</thought>" not in text:
        return None
    return answer_part(text), problem_id


def grade_columns(ids: list[str], chain_ids: list[str], grades, judged, primary: str) -> dict[str, list]:
    """`records.grade_row` for many continuations at once, column-wise."""
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
