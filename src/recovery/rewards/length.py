"""Length overhead of a continuation against the reference continuation (paper §4.3)."""

from __future__ import annotations

import math
import re
from typing import Any

from recovery.metrics import continuation_reasoning
from recovery.rewards.base import MISSING, RewardFunction, Row, Scored, check_weight, completion_text

__all__ = ["LengthOverheadReward", "overhead_penalty"]

_UNITS = ("chars", "tokens")


def overhead_penalty(
    length: float, reference: float, *, max_overhead: float = 1.0, free_overhead: float = 0.0
) -> float:
    """0.0 up to ``reference · (1 + free_overhead)``, then linear down to -1.0 at ``reference · (1 + max_overhead)``.

    >>> [overhead_penalty(n, 100) for n in (50, 100, 150, 200, 400)]
    [0.0, 0.0, -0.5, -1.0, -1.0]
    >>> overhead_penalty(130, 100, max_overhead=0.5, free_overhead=0.1)
    -0.5
    """
    overhead = length / reference - 1.0
    if overhead <= free_overhead:
        return 0.0
    return round(-min(1.0, (overhead - free_overhead) / (max_overhead - free_overhead)), 12)


def _reference(value: Any) -> float | None:
    """A usable reference length: a finite count of at least one character or token (a reference below one
    cannot come from text, and a tiny one would make the overhead overflow to infinity)."""
    if value is None or value is MISSING or isinstance(value, bool):
        return None
    try:
        ref = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return ref if math.isfinite(ref) and ref >= 1 else None


# Reasoning up to this many characters is counted exactly; a longer one only as far as the penalty saturates,
# so a megabyte-long completion is scored in bounded time.
EXACT_COUNT_CHARS = 100_000
_SURROGATE = re.compile("[\ud800-\udfff]")


def _token_count(tokenizer: Any, text: str, cap: int) -> int:
    """Tokens of ``text`` (encoded without special tokens, as ``reference_tokens`` is). Past
    `EXACT_COUNT_CHARS` characters, prefixes of doubling length are encoded until one reaches ``cap`` tokens
    (where the penalty is already -1), so the work stays proportional to what decides the reward."""
    if not text:
        return 0
    # A lone surrogate (half of a pair, from a sliced or badly decoded string) cannot be encoded as UTF-8, so a
    # tokenizer refuses the text; it counts as one U+FFFD, as the character unit counts it as one character.
    text = _SURROGATE.sub("\ufffd", text)
    if len(text) <= EXACT_COUNT_CHARS:
        return len(tokenizer.encode(text, add_special_tokens=False))
    size = EXACT_COUNT_CHARS
    while True:
        count = len(tokenizer.encode(text[:size], add_special_tokens=False))
        if count >= cap or size >= len(text):
            return count
        size *= 2


class LengthOverheadReward(RewardFunction):
    r"""Penalty for a continuation longer than the reference one: 0.0 up to the reference length, then
    linearly down to -1.0 at ``+max_overhead`` (default +100 %, i.e. twice the reference); None
    without a usable reference.

    The paper (§4.3) measures the CoT-length change after an intervention against the original trace
    of the same model and problem; neutral and adversarial interventions inflate it by +50 % to +200 %.
    Here the reference is the *remaining* original reasoning — what the model wrote after the cut
    point in its own un-intervened trace — carried in the dataset column ``reference_length``, and the
    measured length is the continuation's reasoning, so the ratio is the ``remaining_pct`` of
    `recovery.metrics.length_change`.

    Unit (``unit=``), chosen to match how ``reference_length`` was computed:

    * ``"chars"`` (default): characters of the completion's reasoning, up to ``think_close`` (the whole
      completion when it never closes). ``reference_length`` = ``Intervened.original_reasoning_chars -
      Intervened.original_prefix_chars``. Tokenizer-free, and exactly the unit of the core metrics.
    * ``"tokens"``: tokens of the same span, the completion's reasoning up to ``think_close``, counted with
      ``tokenizer`` (the policy's) as ``reference_tokens`` counts the remaining original reasoning
      (`recovery.training_data.render.PromptRenderer.count_tokens`: the text encoded without special
      tokens). The closing tag, the answer and EOS are on neither side.

    Shorter than the reference is not rewarded (0.0): the paper links paraphrase-shortened traces to
    *lower* accuracy, so brevity alone is not the goal. ``free_overhead`` allows some slack before the
    penalty starts. Logged: ``overhead_pct`` (mean over scored rows), ``no_reference`` (fraction); table
    column ``overhead_pct``.

    >>> reward = LengthOverheadReward()
    >>> reward(completions=["a" * 80 + "</think>5", "a" * 150 + "</think>5", "a" * 500, "abc"],
    ...        reference_length=[100, 100, 100, None])
    [0.0, -0.5, -1.0, None]
    >>> class Chars:  # a tokenizer with one token per character
    ...     def encode(self, text, add_special_tokens=False): return list(text)
    >>> LengthOverheadReward(unit="tokens", tokenizer=Chars())(
    ...     completions=["a" * 10 + "</think>5", "a" * 15 + "</think>5"], reference_length=[10, 10])
    [0.0, -0.5]
    """

    __name__ = "length_overhead_reward"
    extra_columns = ("overhead_pct",)
    count_metrics = ("no_reference",)

    def __init__(
        self,
        *,
        max_overhead: float = 1.0,
        free_overhead: float = 0.0,
        unit: str = "chars",
        reference_column: str = "reference_length",
        think_close: str = "</think>",
        tokenizer: Any = None,
        name: str | None = None,
        log_columns: bool = True,
    ) -> None:
        super().__init__(name=name, log_columns=log_columns)
        if unit not in _UNITS:
            raise ValueError(f"unit must be one of {_UNITS}, got {unit!r}")
        if unit == "tokens" and not callable(getattr(tokenizer, "encode", None)):
            raise ValueError(
                "unit='tokens' needs the policy's tokenizer (tokenizer=...), to count the reasoning "
                "span as reference_tokens does"
            )
        check_weight("max_overhead", max_overhead)
        check_weight("free_overhead", free_overhead)
        if not max_overhead > free_overhead:
            raise ValueError(f"max_overhead ({max_overhead}) must exceed free_overhead ({free_overhead})")
        self.max_overhead = float(max_overhead)
        self.free_overhead = float(free_overhead)
        self.unit = unit
        self.reference_column = reference_column
        self.think_close = think_close
        self.tokenizer = tokenizer

    def _length(self, row: Row, scored: Scored, reference: float) -> int | None:
        text = completion_text(row.completion, self.think_close)
        if text is None:
            scored.counts["no_completion"] += 1
            return None
        reasoning = continuation_reasoning(text, self.think_close)
        if self.unit == "tokens":
            # Where the penalty saturates, bounded: a reference near the largest float would overflow to inf
            # (a cap this large only means the whole text is encoded).
            cap = min(reference * (1 + self.max_overhead), 2.0**62)
            return _token_count(self.tokenizer, reasoning, math.ceil(cap) + 1)
        return len(reasoning)

    def _score_row(self, row: Row, scored: Scored) -> float | None:
        value = row.get(self.reference_column)
        if value is MISSING:
            self._missing_column(self.reference_column, scored)
            return None
        reference = _reference(value)
        if reference is None:
            scored.counts["no_reference"] += 1
            return None
        length = self._length(row, scored, reference)
        if length is None:
            return None
        overhead_pct = 100.0 * (length / reference - 1.0)
        scored.put("overhead_pct", row.index, round(overhead_pct, 2))
        scored.means.setdefault("overhead_pct", []).append(overhead_pct)
        return overhead_penalty(length, reference, max_overhead=self.max_overhead, free_overhead=self.free_overhead)
