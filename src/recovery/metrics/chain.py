"""Sample and chain level: K of N correct → the three robustness levels, and the CoT-length change of a
continuation (paper §4.1, §4.3). Each definition has one implementation on NumPy arrays, so millions of
chains are measured at once; the scalar functions are views of it for one chain."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from recovery.types import Grade, Intervened, Verdict


def majority_threshold(n):
    """Smallest K that is a majority of N samples: ⌊N/2⌋ + 1 (5 of 8, 2 of 3); element-wise on arrays.

    >>> majority_threshold(8), majority_threshold(3), majority_threshold(1)
    (5, 2, 1)
    """
    counts = np.asarray(n)
    if np.any(counts < 1):
        raise ValueError(f"need at least one sample, got n={n}")
    threshold = counts // 2 + 1
    return int(threshold) if threshold.ndim == 0 else threshold


def robustness_levels(k, n) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """K correct of N → (at-least-once K ≥ 1, majority K ≥ ⌊N/2⌋+1, all K = N), element-wise.

    >>> [level.tolist() for level in robustness_levels([0, 4, 5, 8], [8, 8, 8, 8])]
    [[False, True, True, True], [False, False, True, True], [False, False, False, True]]
    """
    k, n = np.asarray(k), np.asarray(n)
    if np.any((k < 0) | (k > n)):
        raise ValueError(f"need 0 ≤ k ≤ n, got k={k}, n={n}")
    return k >= 1, k >= majority_threshold(n), k == n


@dataclass(frozen=True, slots=True)
class RobustnessLevels:
    """The paper's three strictness levels for one chain with K of N continuations correct."""

    at_least_once: bool
    majority: bool
    all: bool


def robustness(k: int, n: int) -> RobustnessLevels:
    """`robustness_levels` of one chain.

    >>> robustness(4, 8)
    RobustnessLevels(at_least_once=True, majority=False, all=False)
    """
    return RobustnessLevels(*(bool(level) for level in robustness_levels(k, n)))


# ---------------------------------------------------------------------------------------------- lengths


class LengthFn(Protocol):
    def __call__(self, text: str) -> int: ...


def char_length(text: str) -> int:
    """Length in characters (the default unit)."""
    return len(text)


def token_length(tokenizer) -> LengthFn:
    """Length in tokens of ``tokenizer`` (anything with ``encode(text, add_special_tokens=False)``)."""

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False)) if text else 0

    return count


@dataclass(frozen=True, slots=True)
class LengthChange:
    """CoT-length change of one continuation, in percent.

    ``whole_pct``: the paper's Tables 5–6 measure — the whole intervened CoT (prefix + continuation) with
    the inserted text removed, against the original CoT of the same trace.
    ``remaining_pct``: the continuation alone against the original reasoning after the cut — the cost of
    finishing from the intervention point (it isolates the recovery from the unchanged prefix).
    """

    whole_pct: float
    remaining_pct: float | None


def continuation_reasoning(continuation: str, think_close: str = "</think>") -> str:
    """The reasoning part of a continuation: up to the closing think tag, or all of it if never closed."""
    end = continuation.find(think_close)
    return continuation if end < 0 else continuation[:end]


def reasoning_lengths(texts, think_close: str) -> np.ndarray:
    """The length in characters (not bytes) of `continuation_reasoning` of every text of an Arrow string
    array without nulls, as float64: the same definition, column-wise."""
    import pyarrow.compute as pc

    before_close = pc.list_element(pc.split_pattern(texts, think_close, max_splits=1), 0)
    return pc.utf8_length(before_close).to_numpy(zero_copy_only=False).astype(np.float64)


def length_change_pct(kept, original_prefix, original_total, new) -> tuple[np.ndarray, np.ndarray]:
    """(whole_pct, remaining_pct) of continuations from their lengths (any unit), element-wise.

    ``kept`` = intervened prefix minus inserted text, ``original_prefix`` / ``original_total`` = the original
    reasoning up to the cut / in all, ``new`` = the continuation's reasoning. ``whole_pct`` is NaN where the
    original reasoning is empty, ``remaining_pct`` also where nothing of it remained after the cut.

    >>> length_change_pct([6, 6], [10, 20], [20, 20], [24, 24])
    (array([50., 50.]), array([140.,  nan]))
    """
    kept, prefix, total, new = (np.asarray(x, dtype=np.float64) for x in (kept, original_prefix, original_total, new))
    remaining = total - prefix
    with np.errstate(invalid="ignore", divide="ignore"):
        whole = np.where(total > 0, 100.0 * ((kept + new) - total) / total, np.nan)
        after_cut = np.where((total > 0) & (remaining > 0), 100.0 * (new - remaining) / remaining, np.nan)
    return whole, after_cut


def length_change_from_counts(kept: int, original_prefix: int, original_total: int, new: int) -> LengthChange:
    """`length_change_pct` of one continuation (``remaining_pct`` None where it is undefined).

    >>> length_change_from_counts(6, 10, 20, 24)
    LengthChange(whole_pct=50.0, remaining_pct=140.0)
    """
    if original_total <= 0:
        raise ValueError("original reasoning is empty; length change is undefined")
    whole, remaining = length_change_pct(kept, original_prefix, original_total, new)
    return LengthChange(whole_pct=float(whole), remaining_pct=None if np.isnan(remaining) else float(remaining))


def length_change(
    intervened: Intervened,
    continuation: str,
    *,
    original_reasoning: str | None = None,
    length: LengthFn = char_length,
    think_close: str = "</think>",
) -> LengthChange:
    """Length overhead of one continuation of ``intervened``.

    In characters this needs only the lengths stored on `Intervened`. In another unit (``length`` =
    `token_length(tokenizer)`) pass ``original_reasoning`` so the original pieces can be re-measured. The
    original is measured in the same two pieces as the intervened CoT, cut at the same place: tokens merge
    across a cut (R1-distill's ``"." + "\n\n"`` is one token), and the model continues after a hard token
    boundary, so an unchanged prefix continued by the original's own remainder is 0 % either way.

    >>> from recovery.types import Intervened
    >>> iv = Intervened("tr", "p", "m", "wikipedia_text", "neutral", 0.5, 0.5, 1, 4, "aaaa\\n\\nXXXX", "XXXX",
    ...                 10, 20)
    >>> lc = length_change(iv, "b" * 14 + "</think>")      # 6 kept + 14 new = 20 → 0 %
    >>> (lc.whole_pct, lc.remaining_pct)                    # remaining: 14 vs 20 - 10 = 10 → +40 %
    (0.0, 40.0)
    """
    reasoning_cont = continuation_reasoning(continuation, think_close)
    if length is char_length:
        kept = len(intervened.prefix) - len(intervened.inserted_text)
        original_total = intervened.original_reasoning_chars
        original_prefix = intervened.original_prefix_chars
    else:
        if original_reasoning is None:
            raise ValueError("length in a unit other than characters needs original_reasoning")
        kept = max(length(intervened.prefix) - length(intervened.inserted_text), 0)
        original_prefix = length(original_reasoning[: intervened.original_prefix_chars])
        original_total = original_prefix + length(original_reasoning[intervened.original_prefix_chars :])
    if original_total <= 0:
        raise ValueError(f"chain {intervened.id}: original reasoning is empty; length change is undefined")
    return length_change_from_counts(kept, original_prefix, original_total, length(reasoning_cont))


# ------------------------------------------------------------------------------------------- chain level


@dataclass(frozen=True, slots=True)
class ChainOutcome:
    """One intervened chain after grading its N continuations: the unit the paper aggregates."""

    chain_id: str
    model: str
    domain: str
    intervention: str
    category: str
    target_t: float
    n: int
    k: int
    whole_pct: float | None = None
    remaining_pct: float | None = None
    problem_id: str | None = None  # the unit of sampling of pooled intervals; None: a problem of its own

    @property
    def levels(self) -> RobustnessLevels:
        return robustness(self.k, self.n)


class UngradableChain(ValueError):
    """Every grade of a chain says the gold answer is unusable; the chain cannot be scored."""


def chain_outcome(
    intervened: Intervened,
    domain: str,
    grades: Sequence[Grade],
    continuations: Sequence[str] | None = None,
    *,
    length: LengthFn = char_length,
    original_reasoning: str | None = None,
    think_close: str = "</think>",
) -> ChainOutcome:
    """Fold N grades (and optionally the N continuation texts, for length) into a `ChainOutcome`.

    ``NO_ANSWER``, ``TIMEOUT`` and ``ERROR`` count as not correct (the model did not reach a verifiable
    answer); ``UNPARSABLE_GOLD`` on every sample raises `UngradableChain` so callers skip and count it.
    Length changes are the mean over the continuations, whose reasoning ends at ``think_close``.
    """
    if not grades:
        raise ValueError(f"chain {intervened.id}: no grades")
    if all(g.verdict is Verdict.UNPARSABLE_GOLD for g in grades):
        raise UngradableChain(f"chain {intervened.id}: gold answer of problem {intervened.problem_id} is unparsable")
    whole = remaining = None
    if continuations is not None:
        if len(continuations) != len(grades):
            raise ValueError(f"chain {intervened.id}: {len(continuations)} continuations but {len(grades)} grades")
        changes = [
            length_change(intervened, c, length=length, original_reasoning=original_reasoning, think_close=think_close)
            for c in continuations
        ]
        whole = float(np.mean([c.whole_pct for c in changes]))
        rem = [c.remaining_pct for c in changes if c.remaining_pct is not None]
        remaining = float(np.mean(rem)) if rem else None
    return ChainOutcome(
        chain_id=intervened.id,
        model=intervened.model,
        domain=domain,
        intervention=intervened.intervention,
        category=str(intervened.category),
        target_t=intervened.target_t,
        n=len(grades),
        k=sum(g.correct for g in grades),
        whole_pct=whole,
        remaining_pct=remaining,
        problem_id=intervened.problem_id,
    )
