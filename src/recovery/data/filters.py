"""Selection of original traces and problems (paper §3.2).

Each filter takes items — ``(Problem, Trace)`` pairs (or bare `Trace` objects where no problem is
needed) — and returns a `FilterResult`: the kept items in their input order, and a `Skips` with the
number dropped per reason (examples are item ids). None of them mutates its input.

* `filter_correct`: the original answer is graded correct (`recovery.grading`);
* `filter_closed`: the closing think tag is present;
* `drop_longest`: drop the longest ``fraction`` (2 %) of traces, by reasoning characters, per model;
* `keep_solved_by_all`: keep the problems every model solved (the input should already be correct-only);
* `cap_per_answer`: at most ``cap`` problems per distinct answer (NuminaMath, §3.2);
* `select_original_traces`: the paper's chain: closed → correct → longest 2 % → solved by all.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from recovery.data.skips import Skips
from recovery.grading import parse_numeric
from recovery.grading.grade import grade_part
from recovery.grading.verdict import trace_graded_part
from recovery.types import AnswerType, Grade, Problem, Trace

__all__ = [
    "FilterResult",
    "filter_correct",
    "filter_closed",
    "drop_longest",
    "keep_solved_by_all",
    "cap_per_answer",
    "answer_key",
    "select_original_traces",
]

T = TypeVar("T")
Pair = tuple[Problem, Trace]


@dataclass(frozen=True)
class FilterResult(Generic[T]):
    """Kept items (input order) and the dropped ones counted by reason."""

    kept: list[T]
    skips: Skips = field(default_factory=Skips)

    @property
    def dropped(self) -> int:
        return self.skips.total

    def __iter__(self):  # so that ``kept, skips = result`` reads naturally
        return iter((self.kept, self.skips))


def _trace(item: Any) -> Trace:
    return _pair_member(item, Trace, 1)


def _problem(item: Any) -> Problem:
    return _pair_member(item, Problem, 0)


def _pair_member(item: Any, kind: type[T], index: int) -> T:
    """``item`` when it is a ``kind``, else the ``kind`` at ``index`` of a (Problem, Trace) pair."""
    if isinstance(item, kind):
        return item
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[index], kind):
        return item[index]
    raise TypeError(f"expected a {kind.__name__} or a (Problem, Trace) pair, got {type(item).__name__}")


def _problem_id(item: Any) -> str:
    return item.problem_id if isinstance(item, Trace) else _problem(item).id


def filter_closed(items: Iterable[T]) -> FilterResult[T]:
    """Keep traces whose reasoning was closed (``Trace.closed``); drop ``no_closing_think_tag``."""
    kept, skips = [], Skips()
    for item in items:
        trace = _trace(item)
        if trace.closed:
            kept.append(item)
        else:
            skips.add("no_closing_think_tag", trace.id)
    return FilterResult(kept, skips)


def filter_correct(
    items: Iterable[Pair], *, grader: Any = None, grade: Callable[[str, Problem], Grade] | None = None
) -> FilterResult[Pair]:
    """Keep ``(problem, trace)`` pairs whose response is graded correct; drop ``not_correct:<verdict>``.

    What is graded is the trace's graded part (`recovery.grading.verdict.trace_graded_part`: its answer, cut by
    its model's own think tags when it parsed the trace, else its whole text). ``grader``: an object with
    ``grade_parts([(answer part, problem), ...])`` such as `recovery.grading.Grader` (math-verify in worker
    processes with hard timeouts — use it for many items); else ``grade`` (default
    `recovery.grading.grade.grade_part`, in this process).
    """
    pairs = list(items)
    for pair in pairs:
        _trace(pair), _problem(pair)  # type check up front, before any grading work
    parts = [(trace_graded_part(trace), problem) for problem, trace in pairs]
    if grader is not None:
        grades = grader.grade_parts(parts)
    else:
        grade = grade or grade_part
        grades = [grade(part, problem) for part, problem in parts]
    kept, skips = [], Skips()
    for pair, result in zip(pairs, grades, strict=True):
        if result.correct:
            kept.append(pair)
        else:
            skips.add(f"not_correct:{result.verdict.value}", pair[1].id)
    return FilterResult(kept, skips)


def _quantile(sorted_values: Sequence[int], q: float) -> float:
    """Linear-interpolation quantile (numpy's default method) of already sorted values."""
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def drop_longest(items: Iterable[T], fraction: float = 0.02) -> FilterResult[T]:
    """Drop the longest ``fraction`` of traces per model, by reasoning length in characters.

    The cut-off is the ``1 - fraction`` quantile of that model's reasoning lengths (linear interpolation,
    as ``numpy.quantile``); traces strictly longer are dropped as ``longest_2pct`` (the reason names the
    fraction). Ties: traces of equal length are always kept or dropped together, never split by input
    order, so the result does not depend on ordering; with ties at the boundary slightly fewer than the
    nominal share can go. With 144 traces of distinct lengths, 3 are dropped (lengths above the
    interpolated 98th percentile).
    """
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"fraction must lie in [0, 1), got {fraction!r}")
    items = list(items)
    lengths: dict[str, list[int]] = {}
    for item in items:
        trace = _trace(item)
        lengths.setdefault(trace.model, []).append(len(trace.reasoning))
    cutoffs = {model: _quantile(sorted(values), 1.0 - fraction) for model, values in lengths.items()}
    reason = f"longest_{fraction * 100:g}pct"
    kept, skips = [], Skips()
    for item in items:
        trace = _trace(item)
        if len(trace.reasoning) > cutoffs[trace.model]:
            skips.add(reason, trace.id)
        else:
            kept.append(item)
    return FilterResult(kept, skips)


def keep_solved_by_all(items: Iterable[T], models: Iterable[str] | None = None) -> FilterResult[T]:
    """Keep the items of problems that every model has at least one trace for in ``items``.

    Pass items that are already correct-only: presence then means "solved". ``models`` defaults to every
    model present in ``items``; naming models explicitly makes a model with no traces at all drop every
    problem. Dropped items are counted as ``not_solved_by_all_models``.
    """
    items = list(items)
    solved: dict[str, set[str]] = {}
    present: list[str] = []
    for item in items:
        trace = _trace(item)
        solved.setdefault(_problem_id(item), set()).add(trace.model)
        if trace.model not in present:
            present.append(trace.model)
    required = set(present if models is None else models)
    kept, skips = [], Skips()
    for item in items:
        if required <= solved[_problem_id(item)]:
            kept.append(item)
        else:
            skips.add("not_solved_by_all_models", _trace(item).id)
    return FilterResult(kept, skips)


def answer_key(answer: str, answer_type: AnswerType | str = AnswerType.NUMERIC) -> str:
    """What makes two answers "the same answer": the exact numeric value when the text parses as one
    number (``2``, ``2.0`` and ``\\frac{4}{2}`` share a key), else the whitespace-collapsed text."""
    if AnswerType(answer_type) in (AnswerType.NUMERIC, AnswerType.EXPRESSION):
        parsed = parse_numeric(answer)
        if parsed is not None:
            return f"{parsed.value}{'%' if parsed.percent else ''}"
    return " ".join(answer.split())


def cap_per_answer(items: Iterable[T], cap: int = 20) -> FilterResult[T]:
    """Keep at most ``cap`` problems per distinct answer (`answer_key`), the first ones in input order.

    Items are `Problem` objects or ``(Problem, Trace)`` pairs; with pairs a problem counts once however many
    traces it has, and all its pairs are kept or dropped together (``answer_cap``).
    """
    if cap < 1:
        raise ValueError(f"cap must be ≥ 1, got {cap!r}")
    items = list(items)
    allowed: set[str] = set()
    per_key: dict[str, int] = {}
    for item in items:
        problem = _problem(item)
        if problem.id in allowed:
            continue
        key = answer_key(problem.answer, problem.answer_type)
        if per_key.get(key, 0) < cap:
            per_key[key] = per_key.get(key, 0) + 1
            allowed.add(problem.id)
    kept, skips = [], Skips()
    for item in items:
        problem = _problem(item)
        if problem.id in allowed:
            kept.append(item)
        else:
            skips.add("answer_cap", problem.id)
    return FilterResult(kept, skips)


def select_original_traces(
    items: Iterable[Pair],
    *,
    fraction: float = 0.02,
    models: Iterable[str] | None = None,
    grader: Any = None,
    grade: Callable[[str, Problem], Grade] | None = None,
) -> FilterResult[Pair]:
    """The paper's selection of original traces, in order: closing tag present → correct → drop the
    longest ``fraction`` per model → problems solved by every model. Skips of all steps are merged.

    The longest-2 % cut is taken over the closed, correct traces of each model.
    """
    skips = Skips()
    result: FilterResult[Pair] = filter_closed(items)
    skips.update(result.skips)
    result = filter_correct(result.kept, grader=grader, grade=grade)
    skips.update(result.skips)
    result = drop_longest(result.kept, fraction)
    skips.update(result.skips)
    result = keep_solved_by_all(result.kept, models)
    skips.update(result.skips)
    return FilterResult(result.kept, skips)
