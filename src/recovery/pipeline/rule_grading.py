"""Rule-based grading of many continuations, each distinct (answer part, problem) graded once: the grades
stage's row-by-row path (`RuleGrading.grades`, beside the judge) and its workers' column-wise path
(`RuleGrading.columns`) share the grader, the verdict cache and the unclosed-reasoning rule."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from recovery.grading.integer_grades import integer_golds, plain_integer_grades
from recovery.grading.verdict import NEVER_CLOSED, graded_parts, graded_parts_column
from recovery.segment import ThinkTags
from recovery.types import Verdict, check_unclosed

__all__ = ["CACHE_SIZE", "VERDICT_TEXT", "RuleGrading"]

CACHE_SIZE = 200_000
VERDICT_TEXT = {verdict: verdict.value for verdict in Verdict}  # Enum .value is slow per row


@dataclass
class RuleGrading:
    """Grades continuations against ``problems`` (by id) with ``grader`` (a `recovery.grading.Grader`):
    verdicts are cached by (answer part, problem) in ``cache``, holding at most ``cache_size`` entries;
    ``unclosed`` is what reasoning that never closed gets (`recovery.grading.verdict`). Each answer part is
    graded as written (`recovery.grading.Grader.grade_parts`): for a math answer, which of its boxes and
    sentences is the answer is part of the verdict (`recovery.grading.reading`)."""

    problems: dict
    grader: Any
    cache: dict = field(default_factory=dict)
    cache_size: int = CACHE_SIZE
    unclosed: str = "no_answer"

    def __post_init__(self) -> None:
        check_unclosed(self.unclosed)

    def columns(self, texts, problem_ids, tags: Sequence[ThinkTags] | None = None) -> tuple[dict, Counter]:
        """`grades` then `grade_columns` (rule-based, no judge), column-wise: the grade columns
        (``verdict``, ``extracted``, ``detail``, ``rule_verdict``, ``judge_verdict``) as Arrow arrays, and
        the skip reasons counted. ``unclosed`` is handled as in `grades`; ``tags[i]`` are the think tags of
        the model that wrote ``texts[i]`` (None: every model writes ``<think>``).

        Each distinct (answer part, problem) is graded once: plain boxed integers against integer golds in
        Arrow (`recovery.grading.integer_grades`), the others by the grader (or found in the cache). Rows get
        their pair's grade by index in Arrow, so per-row work never runs in the interpreter (millions of rows).
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        texts = texts if isinstance(texts, pa.Array) else pa.array(texts, pa.string())
        problem_ids = problem_ids if isinstance(problem_ids, pa.Array) else pa.array(problem_ids, pa.string())
        answers, reasons = graded_parts_column(texts, unclosed=self.unclosed, tags=tags)
        # One code per distinct (answer part, problem) pair, from the codes of each; null where the reasoning
        # never closed.
        answer_codes, problem_codes = pc.dictionary_encode(answers), pc.dictionary_encode(problem_ids)
        n_problems = max(1, len(problem_codes.dictionary))
        pair_codes = pc.add(
            pc.multiply(pc.cast(answer_codes.indices, pa.int64()), n_problems),
            pc.cast(problem_codes.indices, pa.int64()),
        )
        encoded = pc.dictionary_encode(pair_codes)
        pairs = encoded.dictionary.to_numpy()
        pair_answers = pc.take(answer_codes.dictionary, pa.array(pairs // n_problems))
        problem_names = problem_codes.dictionary.to_pylist()
        pair_problems = pa.array(pairs % n_problems)
        golds = pc.take(integer_golds(self.problems[name] for name in problem_names), pair_problems)
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
            grades = self.grade_keys(keys)
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

    def grades(self, texts: list, problem_ids: list[str], tags: Sequence[ThinkTags] | None = None):
        """Rule-based `Grade`s of continuation ``texts`` (one per text) and the skip reasons counted; ``tags[i]``
        are the think tags of the model that wrote ``texts[i]`` (None: ``<think>`` for every text).

        Unclosed reasoning is ``no_answer`` without grading (counted as ``unclosed_reasoning``), or, with
        ``unclosed="grade"``, graded on its whole text (counted as ``unclosed_graded``), so that a correct
        boxed answer inside reasoning that never closed counts. Verdicts are cached by (answer part, problem);
        each distinct miss is graded once per call.
        """
        parts, reasons = graded_parts(texts, unclosed=self.unclosed, tags=tags)
        keys = [None if part is None else (part, problem_id) for part, problem_id in zip(parts, problem_ids)]
        known = [key for key in keys if key is not None]
        graded = iter(self.grade_keys(known))
        grades = [NEVER_CLOSED if key is None else next(graded) for key in keys]
        return grades, reasons

    def grade_keys(self, keys: list[tuple[str, str]]) -> list:
        """The `Grade` of each (answer part, problem id) in ``keys``: from the cache, else graded (each distinct
        miss once; misses are cached while the cache holds fewer than ``cache_size``)."""
        grades: list = []
        misses: dict[tuple[str, str], list[int]] = {}
        for key in keys:
            hit = self.cache.get(key)
            if hit is None:
                misses.setdefault(key, []).append(len(grades))
            grades.append(hit)
        if misses:
            missed = list(misses)
            pairs = [(answer, self.problems[pid]) for answer, pid in missed]
            for key, grade in zip(missed, self.grader.grade_parts(pairs)):
                for slot in misses[key]:
                    grades[slot] = grade
                if len(self.cache) < self.cache_size:
                    self.cache[key] = grade
        return grades
