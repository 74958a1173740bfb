"""Doubt right after the intervention point (paper §4.2), detected lexically by `recovery.doubt`, rewarded when
it supports recovery."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from recovery.doubt import DEFAULT_FIRST_SENTENCES, MAX_SCAN_CHARS, first_doubt
from recovery.metrics import continuation_reasoning
from recovery.rewards.base import (
    MISSING,
    TRAINER_KWARGS,
    RewardFunction,
    Scored,
    batch_size,
    check_count,
    completion_text,
)
from recovery.rewards.correctness import CorrectnessReward

__all__ = ["CLEAN_INTERVENTIONS", "PAY_FOR", "DoubtReward"]

#: Values of the ``intervention`` column that mean "no intervention" (compared case-insensitively).
CLEAN_INTERVENTIONS: frozenset[str] = frozenset({"", "none", "clean", "original", "no_intervention"})
#: What the reward pays for: doubt that ends in a correct answer (the default), or the expression alone.
PAY_FOR: tuple[str, ...] = ("recovery", "expression")


class DoubtReward(RewardFunction):
    r"""1.0 when a doubt expression appears in the first ``first_sentences`` sentences of the completion and
    the completion ends correct, else 0.0; None where it says nothing (clean rows, an unusable gold).

    The completion of a GRPO prompt built from an intervened prefix starts right after the intervention
    point, so its first sentences are where the paper sees doubt spike ("Wait, no.", "Let me check",
    "That's not right"); doubt fades within about five sentences (§4.2), hence the default of 3. Only the
    reasoning part is read (up to ``think_close``), at most ``max_chars`` characters of it. Families:
    `recovery.doubt.DOUBT_FAMILIES`.

    The paper's finding is that doubt *supports recovery*, so by default (``pay_for="recovery"``) the
    reward pays for doubt only when the continuation's final answer is correct — the verdict of
    ``correctness`` (a `CorrectnessReward`, the same verdict the benchmark stores; default one with its
    defaults). A policy that opens every continuation with "Wait," earns nothing for it when its answers are
    wrong. ``pay_for="expression"`` pays for the expression alone (an ablation; gameable).

    Which rows it scores: by default (``only_intervened=True``) only rows whose ``intervention`` column names
    an intervention; clean rows (``none``, ``clean``, empty or None — see `CLEAN_INTERVENTIONS`) get None,
    so the policy is never taught to doubt sound reasoning. ``interventions`` (names) and ``categories``
    (``benign``, ``neutral``, ``adversarial``; read from the ``category`` column) restrict it further, e.g.
    ``categories=("neutral", "adversarial")``: a paraphrase needs no doubt. Rows outside get None.

    Logged: ``doubt_rate`` (doubt among scored rows, whatever the answer), ``recovered_doubt_rate`` (doubt
    and a correct answer), and the fractions ``not_intervened``, ``not_selected``, ``no_completion``;
    table column ``family``.

    >>> reward = DoubtReward()
    >>> reward(
    ...     completions=["\n\nWait, 3 + 4 is 7.</think>\\boxed{7}", "\n\nWait, 3 + 4 is 8.</think>\\boxed{8}",
    ...                  "\n\nSo 3 + 4 = 7.</think>\\boxed{7}", "\n\nWait, 7.</think>\\boxed{7}"],
    ...     answer=["7"] * 4, answer_type=["numeric"] * 4, intervention=["wrong_step"] * 3 + ["none"],
    ... )
    [1.0, 0.0, 0.0, None]
    >>> DoubtReward(pay_for="expression")(completions=["Hmm, no.", "So."], intervention=["wrong_step"] * 2)
    [1.0, 0.0]
    """

    __name__ = "doubt_reward"
    extra_columns = ("family",)
    count_metrics = ("not_intervened", "not_selected")

    def __init__(
        self,
        *,
        pay_for: str = "recovery",
        correctness: CorrectnessReward | None = None,
        first_sentences: int = DEFAULT_FIRST_SENTENCES,
        only_intervened: bool = True,
        interventions: Sequence[str] | None = None,
        categories: Sequence[str] | None = None,
        intervention_column: str = "intervention",
        clean_values: Iterable[str] = CLEAN_INTERVENTIONS,
        think_close: str = "</think>",
        max_chars: int = MAX_SCAN_CHARS,
        name: str | None = None,
        log_columns: bool = True,
    ) -> None:
        super().__init__(name=name, log_columns=log_columns)
        if pay_for not in PAY_FOR:
            raise ValueError(f"pay_for must be one of {', '.join(PAY_FOR)}, got {pay_for!r}")
        check_count("first_sentences", first_sentences)
        check_count("max_chars", max_chars)
        for label, values in (("interventions", interventions), ("categories", categories)):
            if values is not None and (isinstance(values, str) or not all(isinstance(v, str) for v in values)):
                raise ValueError(f"{label} must be a list of names, got {values!r}")
        self.pay_for = pay_for
        self.correctness = correctness if correctness is not None or pay_for != "recovery" else CorrectnessReward()
        self.first_sentences = first_sentences
        self.only_intervened = bool(only_intervened)
        self.interventions = None if interventions is None else frozenset(interventions)
        self.categories = None if categories is None else frozenset(c.lower() for c in categories)
        self.intervention_column = intervention_column
        self.clean_values = frozenset(str(v).strip().lower() for v in clean_values)
        self.think_close = think_close
        self.max_chars = max_chars

    def close(self) -> None:
        """Stop the correctness verdicts' math-verify workers, if any."""
        if self.correctness is not None:
            self.correctness.close()

    def batch_rewards(self, prompts: Any, completions: Any, completion_ids: Any, kwargs: dict[str, Any]) -> list:
        """One reward or None per completion; with ``pay_for="recovery"`` the correctness verdicts are taken
        first (quietly: the correctness reward logs its own metrics where it is used)."""
        correct = None
        if self.pay_for == "recovery":
            quiet = {k: v for k, v in kwargs.items() if k not in TRAINER_KWARGS}
            correct = self.correctness(prompts=prompts, completions=completions, completion_ids=completion_ids, **quiet)
        return self.given_correctness(correct, prompts, completions, completion_ids, **kwargs)

    def given_correctness(
        self,
        correct: Sequence[float | None] | None,
        prompts: Sequence[Any] | None = None,
        completions: Sequence[Any] | None = None,
        completion_ids: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        """The rewards given the correctness rewards already computed for the same batch (`RecoveryReward`
        passes its own, so nothing is graded twice); ``correct`` None pays for the expression alone."""
        n = batch_size(prompts, completions)

        def score() -> Scored:
            scored = Scored([None] * n, n=n)
            for row in self._rows(completions, completion_ids, kwargs, n):
                verdict = None if correct is None else correct[row.index]
                scored.rewards[row.index] = self._score_row(row, scored, verdict, correct is not None)
            return scored

        return self._guarded(n, kwargs, score)

    def _selected(self, row, scored: Scored) -> bool:
        """Whether the reward speaks about this row (counted when it does not)."""
        if not (self.only_intervened or self.interventions is not None):
            return True
        intervention = row.get(self.intervention_column)
        if intervention is MISSING:
            self._missing_column(self.intervention_column, scored)
            return False
        if intervention is None or str(intervention).strip().lower() in self.clean_values:
            scored.counts["not_intervened"] += 1
            return False
        if self.interventions is not None and str(intervention) not in self.interventions:
            scored.counts["not_selected"] += 1
            return False
        if self.categories is not None:
            category = row.get("category")
            if category is MISSING:
                self._missing_column("category", scored)
                return False
            if category is None or str(category).strip().lower() not in self.categories:
                scored.counts["not_selected"] += 1
                return False
        return True

    def _score_row(self, row, scored: Scored, correct: float | None = None, gated: bool = False) -> float | None:
        if not self._selected(row, scored):
            return None
        if gated and correct is None:  # the gold cannot be used: nothing to say about recovery
            return None
        text = completion_text(row.completion, self.think_close)
        if text is None:
            scored.counts["no_completion"] += 1
            return None
        window = continuation_reasoning(text[: self.max_chars], self.think_close)
        hit = first_doubt(window, self.first_sentences, max_chars=self.max_chars)
        doubted = 0.0 if hit is None else 1.0
        scored.put("family", row.index, None if hit is None else hit.family)
        scored.means.setdefault("doubt_rate", []).append(doubted)
        reward = doubted * (1.0 if not gated else float(correct > 0))
        scored.means.setdefault("recovered_doubt_rate", []).append(reward if gated else doubted)
        return reward
