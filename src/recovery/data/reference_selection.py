"""The authors' trace selection (``protocol: reference``, part ``selection``), and the problem draw.

The authors' ``scripts/filter_correct.py`` (ExplainableML/RLLM-CoT-Robustness at f3ec899; functions ``main``,
``filter_one``, ``length_percentile_cutoff``) selects, given each model's graded traces:

1. ``main``: the problems *every* model answered correctly (the intersection on correctness,
   ``--require-intersection``), before any other filter;
2. ``filter_one``, per model, in this order: the correct traces of the intersection's problems; those that
   close their reasoning (``--require-closing-think``); those no longer than the ``1 - fraction`` cut-off of
   the model's remaining *whole responses* (``--drop-top-length-fraction``; `length_cutoff`); at most
   ``cap`` problems per reference answer string, the first ones in order (``--max-per-reference-answer``).

So a model's unclosed or overlong trace drops that problem for that model only, where the project's default
order (closed → correct → longest 2 % of the reasoning → solved by all, `recovery.data.filters`) drops it
for every model.

The paper then uses 600 Math problems "that all models solved correctly"; which 600 is not in the authors'
code. Our reading (`draw_problems`): a seeded draw among the problems every model kept after its per-model
filters, so that every model has the same problems (the paper's 21,000 chains per model are 600 × 35).

`reference_selection` returns the kept pairs and, for each dropped trace, the reason that dropped it
(the names of the filter stage's ``kept`` table).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from recovery.ids import item_seed
from recovery.segment import authors_closed
from recovery.types import Problem, Trace

__all__ = [
    "ANSWER_CAP",
    "LONGEST",
    "NOT_CLOSED",
    "NOT_CORRECT",
    "NOT_DRAWN",
    "NOT_KEPT_BY_ALL",
    "NOT_SOLVED_BY_ALL",
    "Selection",
    "draw_problems",
    "length_cutoff",
    "reference_selection",
]

Pair = tuple[Problem, Trace]

# The reasons of the filter stage's ``kept`` table (the default order's names where the step is shared).
NOT_CORRECT = "not_correct"
NOT_SOLVED_BY_ALL = "not_solved_by_all"
NOT_CLOSED = "no_closing_think_tag"
LONGEST = "longest_fraction"
ANSWER_CAP = "answer_cap"
NOT_KEPT_BY_ALL = "not_kept_by_all_models"
NOT_DRAWN = "not_drawn"


@dataclass
class Selection:
    """The kept ``(problem, trace)`` pairs in input order, and the reason each dropped trace (by id) left."""

    kept: list[Pair]
    reasons: dict[str, str] = field(default_factory=dict)

    def keep_if(self, test: Callable[[Pair], bool], reason: str) -> None:
        """Keep the pairs that pass ``test``; the others leave with ``reason``."""
        kept = []
        for pair in self.kept:
            if test(pair):
                kept.append(pair)
            else:
                self.reasons[pair[1].id] = reason
        self.kept = kept


def length_cutoff(lengths: Iterable[int], fraction: float) -> int | None:
    """The longest length kept when the top ``fraction`` is dropped, by the authors' rule
    (``scripts/filter_correct.py`` ``length_percentile_cutoff``): the sorted lengths' entry at
    ``min(n - 1, max(0, floor((1 - fraction) n) - 1))``; None (keep all) for no lengths or no fraction.

    Lengths equal to the cut-off are kept, so one trace is dropped from any small set of distinct lengths:

    >>> length_cutoff([10, 40, 20, 30], 0.02), length_cutoff([5] * 3, 0.02), length_cutoff([], 0.02)
    (30, 5, None)
    """
    ordered = sorted(lengths)
    percentile = 1.0 - fraction
    if not ordered or not fraction or percentile >= 1.0:
        return None
    return ordered[min(len(ordered) - 1, max(0, math.floor(percentile * len(ordered)) - 1))]


def reference_selection(
    pairs: Sequence[Pair],
    correct: set[str],
    models: Sequence[str],
    *,
    require_correct: bool = True,
    intersect: bool = True,
    require_closed: bool = True,
    drop_longest_fraction: float = 0.0,
    max_per_answer: int | None = None,
) -> Selection:
    """The authors' selection of ``pairs`` (input order is their order: the problems' order), given the ids of
    the ``correct`` traces (graded on the whole text, closed or not, as their judge sees an unclosed trace).

    ``intersect`` keeps the problems every one of ``models`` answered correctly (with one model, every
    correct one). The per-model steps follow; a trace "closes" by the authors' test,
    `recovery.segment.authors_closed` (``</think>`` anywhere in its text, whatever its model's family); its length is that of the whole response, `Trace.text`; the
    answer cap counts each model's problems per exact reference answer string (`Problem.answer`).
    """
    selection = Selection(list(pairs))
    if require_correct:
        selection.keep_if(lambda pair: pair[1].id in correct, NOT_CORRECT)
    if intersect and len(models) > 1:
        solved: dict[str, set[str]] = {}
        for problem, trace in pairs:
            if trace.id in correct:
                solved.setdefault(problem.id, set()).add(trace.model)
        required = set(models)
        selection.keep_if(lambda pair: required <= solved.get(pair[0].id, set()), NOT_SOLVED_BY_ALL)
    if require_closed:
        selection.keep_if(lambda pair: authors_closed(pair[1].text), NOT_CLOSED)
    if drop_longest_fraction:
        by_model: dict[str, list[int]] = {}
        for _, trace in selection.kept:
            by_model.setdefault(trace.model, []).append(len(trace.text))
        cutoffs = {model: length_cutoff(lengths, drop_longest_fraction) for model, lengths in by_model.items()}

        def short_enough(pair: Pair) -> bool:
            cutoff = cutoffs[pair[1].model]
            return cutoff is None or len(pair[1].text) <= cutoff

        selection.keep_if(short_enough, LONGEST)
    if max_per_answer is not None:
        seen: dict[tuple[str, str], int] = {}

        def under_cap(pair: Pair) -> bool:
            key = (pair[1].model, pair[0].answer)
            seen[key] = seen.get(key, 0) + 1
            return seen[key] <= max_per_answer

        selection.keep_if(under_cap, ANSWER_CAP)
    return selection


def draw_problems(selection: Selection, models: Sequence[str], draw: int, seed: int = 0) -> Selection:
    """Keep the traces of ``draw`` problems drawn among those every one of ``models`` kept (all of them when
    fewer are eligible); the others leave as `NOT_KEPT_BY_ALL` or `NOT_DRAWN`. Updates ``selection`` in place
    and returns it.

    The draw ranks the eligible problems by ``item_seed(seed, "draw", problem id)`` and takes the first
    ``draw``: it does not depend on the input order or on the other problems, and a larger draw contains a
    smaller one with the same seed.
    """
    if draw < 1:
        raise ValueError(f"draw must be ≥ 1, got {draw!r}")
    kept_by: dict[str, set[str]] = {}
    for problem, trace in selection.kept:
        kept_by.setdefault(problem.id, set()).add(trace.model)
    required = set(models)
    eligible = {pid for pid, have in kept_by.items() if required <= have}
    drawn = set(sorted(eligible, key=lambda pid: (item_seed(seed, "draw", pid), pid))[:draw])
    selection.keep_if(lambda pair: pair[0].id in eligible, NOT_KEPT_BY_ALL)
    selection.keep_if(lambda pair: pair[0].id in drawn, NOT_DRAWN)
    return selection
