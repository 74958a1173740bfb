"""Doubt right after the intervention point (paper §4.2), detected lexically by `recovery.doubt`."""

from __future__ import annotations

from collections.abc import Iterable

from recovery.doubt import DEFAULT_FIRST_SENTENCES, MAX_SCAN_CHARS, first_doubt
from recovery.metrics import continuation_reasoning
from recovery.rewards.base import MISSING, RewardFunction, Row, Scored, check_count, completion_text

__all__ = ["CLEAN_INTERVENTIONS", "DoubtReward"]

#: Values of the ``intervention`` column that mean "no intervention" (compared case-insensitively).
CLEAN_INTERVENTIONS: frozenset[str] = frozenset({"", "none", "clean", "original", "no_intervention"})


class DoubtReward(RewardFunction):
    r"""1.0 when a doubt expression appears in the first ``first_sentences`` sentences of the completion,
    else 0.0.

    The completion of a GRPO prompt built from an intervened prefix starts right after the intervention
    point, so its first sentences are where the paper sees doubt spike ("Wait, no.", "Let me check",
    "That's not right") and help recovery; doubt fades within about five sentences (§4.2), hence the
    default of 3. Only the reasoning part is read (up to ``think_close``), and at most ``max_chars``
    characters of it. Families: `recovery.doubt.DOUBT_FAMILIES`.

    ``only_intervened=True`` scores only rows whose ``intervention`` column names an intervention; clean
    rows (``none``, ``clean``, empty or None — see `CLEAN_INTERVENTIONS`) get None, i.e. this reward
    says nothing about them, so the policy is not taught to doubt sound reasoning. That is the
    recommended setting when clean prompts are mixed in. Logged: ``doubt_rate`` (mean over scored rows),
    ``not_intervened`` and ``no_completion`` (fractions); table column ``family``.

    >>> reward = DoubtReward()
    >>> reward(completions=["\n\nWait, that step is wrong. Redo: 3 + 4 = 7.</think>7", "\n\nSo 3 + 4 = 7.</think>7"])
    [1.0, 0.0]
    >>> DoubtReward(only_intervened=True)(completions=["Hmm, no.", "Hmm, no."], intervention=["wrong_step", "none"])
    [1.0, None]
    """

    __name__ = "doubt_reward"
    extra_columns = ("family",)
    count_metrics = ("not_intervened",)

    def __init__(
        self,
        *,
        first_sentences: int = DEFAULT_FIRST_SENTENCES,
        only_intervened: bool = False,
        intervention_column: str = "intervention",
        clean_values: Iterable[str] = CLEAN_INTERVENTIONS,
        think_close: str = "</think>",
        max_chars: int = MAX_SCAN_CHARS,
        name: str | None = None,
        log_columns: bool = True,
    ) -> None:
        super().__init__(name=name, log_columns=log_columns)
        check_count("first_sentences", first_sentences)
        check_count("max_chars", max_chars)
        self.first_sentences = first_sentences
        self.only_intervened = bool(only_intervened)
        self.intervention_column = intervention_column
        self.clean_values = frozenset(str(v).strip().lower() for v in clean_values)
        self.think_close = think_close
        self.max_chars = max_chars

    def _score_row(self, row: Row, scored: Scored) -> float | None:
        if self.only_intervened:
            intervention = row.get(self.intervention_column)
            if intervention is MISSING:
                self._missing_column(self.intervention_column, scored)
                return None
            if intervention is None or str(intervention).strip().lower() in self.clean_values:
                scored.counts["not_intervened"] += 1
                return None
        text = completion_text(row.completion, self.think_close)
        if text is None:
            scored.counts["no_completion"] += 1
            return None
        window = continuation_reasoning(text[: self.max_chars], self.think_close)
        hit = first_doubt(window, self.first_sentences, max_chars=self.max_chars)
        reward = 0.0 if hit is None else 1.0
        scored.put("family", row.index, None if hit is None else hit.family)
        scored.means.setdefault("doubt_rate", []).append(reward)
        return reward
