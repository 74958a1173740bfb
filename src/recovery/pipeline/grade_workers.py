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

from recovery.grading import Grader, extract_answer
from recovery.grading.verdict import NEVER_CLOSED, graded_parts, graded_parts_column
from recovery.pipeline.integer_grades import integer_golds, plain_integer_grades
from recovery.run_config import RunConfig, ThinkTagsOf
from recovery.run_dir import open_run, records
from recovery.segment import THINK, ThinkTags
from recovery.types import Verdict

CHUNK_ROWS = 16_384
CACHE_SIZE = 200_000
VERDICT_TEXT = {verdict: verdict.value for verdict in Verdict}  # Enum .value is slow per row

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
    _worker_state["problems"] = {}
    _worker_state["grader"] = grader or Grader(workers=config.grading.workers, timeout_s=config.grading.timeout_s)
    _worker_state["cache"] = {}
    _worker_state["extractions"] = {}
    _worker_state["unclosed"] = config.grading.unclosed
    # Resolved here from the config handed over, not from the manifest: a backend or spec registered in the
    # parent only would not be known to a worker reading it.
    _worker_state["think_tags"] = ThinkTagsOf(config.models)


def grade_chunk(chunk: GradeChunk) -> tuple[int, Counter]:
    """Grade one chunk and commit its shard; returns (rows written, skip reasons counted)."""
    state = _worker_state
    problems = state["problems"]
    if len(problems) > CACHE_SIZE:  # bounded: problems are rebuilt from the chunk's rows when needed again
        problems.clear()
    for problem_id, row in chunk.problems.items():
        if problem_id not in problems:
            problems[problem_id] = records.problem_from_row(row)
    run = open_run(chunk.run_dir)
    columns, reasons = rule_grade_arrays(
        chunk.texts,
        chunk.problem_ids,
        problems,
        state["grader"],
        state["cache"],
        extractions=state["extractions"],
        unclosed=state["unclosed"],
        tags=row_tags(chunk.models, state["think_tags"]),
    )
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


def rule_grade_arrays(
    texts,
    problem_ids,
    problems: dict,
    grader,
    cache: dict,
    cache_size: int = CACHE_SIZE,
    extractions: dict | None = None,
    unclosed: str = "no_answer",
    tags: Sequence[ThinkTags] | None = None,
) -> tuple[dict, Counter]:
    """`rule_grades` then `grade_columns` (rule-based, no judge), column-wise: the grade columns
    (``verdict``, ``extracted``, ``detail``, ``rule_verdict``, ``judge_verdict``) as Arrow arrays, and
    the skip reasons counted. ``unclosed`` is handled as in `rule_grades`; ``tags[i]`` are the think tags of
    the model that wrote ``texts[i]`` (None: every model writes ``<think>``).

    Each distinct (answer part, problem) is graded once: plain boxed integers against integer golds in
    Arrow (`recovery.pipeline.integer_grades`), the others by ``grader`` (or found in ``cache``). Rows get
    their pair's grade by index in Arrow, so per-row work never runs in the interpreter (millions of rows).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    texts = texts if isinstance(texts, pa.Array) else pa.array(texts, pa.string())
    problem_ids = problem_ids if isinstance(problem_ids, pa.Array) else pa.array(problem_ids, pa.string())
    answers, reasons = graded_parts_column(texts, unclosed=unclosed, tags=tags)
    # One code per distinct (answer part, problem) pair, from the codes of each; null where the reasoning
    # never closed.
    answer_codes, problem_codes = pc.dictionary_encode(answers), pc.dictionary_encode(problem_ids)
    n_problems = max(1, len(problem_codes.dictionary))
    pair_codes = pc.add(
        pc.multiply(pc.cast(answer_codes.indices, pa.int64()), n_problems), pc.cast(problem_codes.indices, pa.int64())
    )
    encoded = pc.dictionary_encode(pair_codes)
    pairs = encoded.dictionary.to_numpy()
    pair_answers = pc.take(answer_codes.dictionary, pa.array(pairs // n_problems))
    problem_names = problem_codes.dictionary.to_pylist()
    pair_problems = pa.array(pairs % n_problems)
    golds = pc.take(integer_golds(problems[name] for name in problem_names), pair_problems)
    # Plain boxed integers against integer golds are settled in Arrow; only the other pairs meet the grader.
    settled, verdicts, extracted, details = plain_integer_grades(pair_answers, golds)
    if settled.false_count:
        rest = pc.invert(settled)
        keys = list(
            zip(
                pc.filter(pair_answers, rest).to_pylist(),
                (problem_names[i] for i in pc.filter(pair_problems, rest).to_pylist()),
            )
        )
        grades = grade_keys(keys, problems, grader, cache, cache_size, extractions)
        verdict_texts = [VERDICT_TEXT[g.verdict] for g in grades]
        verdicts = pc.replace_with_mask(verdicts, rest, pa.array(verdict_texts, pa.string()))
        extracted = pc.replace_with_mask(extracted, rest, pa.array([g.extracted for g in grades], pa.string()))
        details = pc.replace_with_mask(details, rest, pa.array([g.detail[:500] for g in grades], pa.string()))
    codes = encoded.indices
    verdict = pc.fill_null(pc.take(verdicts, codes), VERDICT_TEXT[NEVER_CLOSED.verdict])
    columns = {
        "verdict": verdict,
        "extracted": pc.take(extracted, codes),
        "detail": pc.fill_null(pc.take(details, codes), NEVER_CLOSED.detail),
        "rule_verdict": verdict,
        "judge_verdict": pa.nulls(len(texts), pa.string()),
    }
    return columns, reasons


def rule_grades(
    texts: list,
    problem_ids: list[str],
    problems: dict,
    grader,
    cache: dict,
    cache_size: int = CACHE_SIZE,
    extractions: dict | None = None,
    unclosed: str = "no_answer",
    tags: Sequence[ThinkTags] | None = None,
):
    """Rule-based `Grade`s of continuation ``texts`` (one per text) and the skip reasons counted; ``tags[i]``
    are the think tags of the model that wrote ``texts[i]`` (None: ``<think>`` for every text).

    Unclosed reasoning is ``no_answer`` without grading (counted as ``unclosed_reasoning``), or, with
    ``unclosed="grade"``, graded on its whole text (counted as ``unclosed_graded``), so that a correct
    boxed answer inside reasoning that never closed counts. Verdicts are cached by (answer part, problem);
    each distinct miss is graded once per call. The answer is taken out of each distinct answer part once
    (``extractions``, keyed by (answer part, answer type)): extraction does not depend on the problem, and
    across problems the same closing sentences recur.
    """
    parts, reasons = graded_parts(texts, unclosed=unclosed, tags=tags)
    keys = [None if part is None else (part, problem_id) for part, problem_id in zip(parts, problem_ids)]
    known = [key for key in keys if key is not None]
    graded = iter(grade_keys(known, problems, grader, cache, cache_size, extractions))
    grades = [NEVER_CLOSED if key is None else next(graded) for key in keys]
    return grades, reasons


def grade_keys(
    keys: list[tuple[str, str]],
    problems: dict,
    grader,
    cache: dict,
    cache_size: int = CACHE_SIZE,
    extractions: dict | None = None,
) -> list:
    """The `Grade` of each (answer part, problem id) in ``keys``: from ``cache``, else graded (each distinct
    miss once; misses are added to ``cache`` while it holds fewer than ``cache_size``)."""
    grades: list = []
    misses: dict[tuple[str, str], list[int]] = {}
    for key in keys:
        hit = cache.get(key)
        if hit is None:
            misses.setdefault(key, []).append(len(grades))
        grades.append(hit)
    if misses:
        missed = list(misses)
        extractions = {} if extractions is None else extractions
        answers = [_extracted(answer, problems[pid].answer_type, extractions, cache_size) for answer, pid in missed]
        for key, grade in zip(missed, grader.grade_extracted([(a, problems[k[1]]) for a, k in zip(answers, missed)])):
            for slot in misses[key]:
                grades[slot] = grade
            if len(cache) < cache_size:
                cache[key] = grade
    return grades


def _extracted(answer_text: str, answer_type, extractions: dict, cache_size: int) -> str | None:
    """``extract_answer(answer_text, answer_type)`` of an answer part (already cut by its model's tags: a
    tag of another family in it is text), remembered in ``extractions``."""
    key = (answer_text, answer_type)
    if key in extractions:
        return extractions[key]
    answer = extract_answer(answer_text, answer_type)
    if len(extractions) < cache_size:
        extractions[key] = answer
    return answer


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
