"""Correctness of the final answer of a continuation, graded by `recovery.grading`."""

from __future__ import annotations

import math
import os
import threading
from functools import lru_cache
from typing import Any, Self

from recovery.grading import DEFAULT_TIMEOUT_S, Grader, plan_answer
from recovery.grading.verdict import NEVER_CLOSED, check_unclosed, grade_continuations
from recovery.rewards.base import (
    MISSING,
    RewardFunction,
    Row,
    Scored,
    check_count,
    completion_text,
    printable,
)
from recovery.segment import tags_closed_by
from recovery.types import AnswerType, Grade, Problem, Verdict

__all__ = ["CorrectnessReward", "unusable_gold"]

#: Verdict → reward, the one table by which every verdict (`recovery.grading.verdict`, the same the benchmark
#: stores) becomes a number. A continuation whose reasoning never closed is NO_ANSWER: 0.0. UNPARSABLE_GOLD is
#: None (the row cannot be scored). ERROR scores 0.0 rather than None: with TRL's nansum a None term adds
#: nothing, so an answer that makes the checker fail would otherwise escape the penalty a wrong answer gets —
#: the policy must not profit from unverifiable output.
VERDICT_REWARD: dict[Verdict, float | None] = {
    Verdict.CORRECT: 1.0,
    Verdict.WRONG: 0.0,
    Verdict.NO_ANSWER: 0.0,
    Verdict.TIMEOUT: 0.0,
    Verdict.ERROR: 0.0,
    Verdict.UNPARSABLE_GOLD: None,
}
#: How `recovery.grading.Grader` details begin when it could not run math-verify at all.
_POOL_FAILURES = ("math-verify workers failed to start", "grading pool failed")


@lru_cache(maxsize=4096)
def _gold_problem(gold: str, answer_type: str) -> str | None:
    """Why ``gold`` cannot be a reference answer of ``answer_type`` (settled without math-verify), or None."""
    if not gold.strip():
        return "empty gold answer"
    try:
        planned = plan_answer(gold, gold, answer_type)
    except (TypeError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    if isinstance(planned, Grade) and planned.verdict is Verdict.UNPARSABLE_GOLD:
        return planned.detail
    return None


def unusable_gold(gold: Any, answer_type: Any) -> str | None:
    """Why ``gold`` cannot be graded as an ``answer_type`` answer (the rows `CorrectnessReward` scores None), or
    None when it can; settled without math-verify. Exporters drop such rows before a trainer sees them.

    >>> unusable_gold("7", "numeric"), unusable_gold("no idea", "multiple_choice") is not None
    (None, True)
    """
    text = _text_column(gold)
    if text is None:
        return "no gold answer"
    try:
        kind = AnswerType(str(answer_type).strip().lower())
    except ValueError as exc:
        return f"ValueError: {exc}"
    return _gold_problem(text, kind.value)


def _tolerance(value: Any) -> float | None:
    """A tolerance column value: None/NaN/missing → None; raises ValueError for anything else unusable."""
    if value is MISSING or value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"tolerance must be a number, got {type(value).__name__}")
    if math.isnan(value):
        return None
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"tolerance must be finite and ≥ 0, got {value!r}")
    return float(value)


def _text_column(value: Any) -> str | None:
    if value is MISSING or value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    return value if isinstance(value, str) else str(value)


class CorrectnessReward(RewardFunction):
    r"""1.0 when the continuation's final answer is correct, 0.0 when it is wrong, missing or timed out,
    None when the gold answer cannot be parsed.

    Dataset columns: ``answer`` (the gold answer; renamed with ``answer_column``), ``answer_type`` (a
    `recovery.types.AnswerType` value; ``answer_type=`` gives a default when the column is absent),
    ``domain``; optional ``source`` (SciBench / JEEBench tolerances, see `recovery.grading`),
    ``rel_tol`` / ``abs_tol`` (per-row numeric tolerances; None or NaN = unset) and ``question`` (used by
    Dyck answers only).

    A completion continues an intervened reasoning prefix, so it is expected to close the reasoning with the
    policy's own closing tag ``think_close`` (``</think>``; EXAONE's ``</thought>``; the GRPO stage passes its
    model's) and then give the answer; another family's tag in it is text. Its verdict is the benchmark's
    (`recovery.grading.verdict`): a completion that never closes its reasoning has no final answer and
    scores 0.0 under ``unclosed="no_answer"`` (the default, as the run config's ``grading.unclosed``);
    ``unclosed="grade"`` grades such text whole, as the authors' protocol does.
    Grading is `recovery.grading`: numbers, option letters, labels and identical expressions are settled
    in this process; other expressions go to math-verify in a `recovery.grading.Grader` pool of
    ``workers`` processes, each item with a budget of ``timeout_s`` seconds of CPU time (tried once more
    with 4× that before it scores 0.0 as a timeout), so a busy machine does not change the rewards. The
    pool is started on first need in each process, dropped when the reward is pickled and started again
    after unpickling; it works the same in the main process, a thread, a forked or spawned process and a
    daemonic ``multiprocessing.Pool`` worker. Where math-verify cannot run at all (its worker processes
    do not start), the items that need it score 0.0 as ``grader_unavailable``, with a warning — never as
    silently wrong answers — and the next batch tries again. Model text is never evaluated as code.

    Beware of tokenizers that make ``</think>`` a *special* token: TRL decodes completions with
    ``skip_special_tokens=True``, the tag disappears and every completion scores 0.0 — watch the
    ``correctness_reward/unclosed`` metric.

    Logged through TRL's ``log_metric`` as fractions of the batch: ``unclosed``, ``unparsable_gold``,
    ``no_answer``, ``timeout``, ``grader_error``, ``grader_unavailable`` (scored 0.0), ``no_completion``,
    ``missing_column`` and ``errors`` (rows that failed unexpectedly, scored None); ``accuracy/<domain>``
    as a mean. Through ``log_extra``: the ``verdict`` and ``extracted`` answer of every completion.

    >>> reward = CorrectnessReward()
    >>> reward(
    ...     completions=["So it is 12.</think>The answer is \\boxed{12}.", "Hmm.</think>\\boxed{13}", "Still going"],
    ...     answer=["12", "12", "12"], answer_type=["numeric"] * 3, domain=["math"] * 3,
    ... )
    [1.0, 0.0, 0.0]
    >>> reward(completions=[[{"role": "assistant", "content": "</think>(C)"}]], answer=["C) Paris"],
    ...        answer_type=["multiple_choice"], domain=["logic"])
    [1.0]
    >>> reward(completions=["</think>\\boxed{7}"], answer=["no idea"], answer_type=["multiple_choice"], domain=["x"])
    [None]
    """

    __name__ = "correctness_reward"
    extra_columns = ("verdict", "extracted")
    count_metrics = ("unclosed", "unparsable_gold", "no_answer", "timeout", "grader_error", "grader_unavailable")

    def __init__(
        self,
        *,
        answer_column: str = "answer",
        answer_type: AnswerType | str | None = None,
        unclosed: str = "no_answer",
        use_math_verify: bool = True,
        timeout_s: float = 1.0,
        workers: int = 2,
        startup_timeout_s: float = 30.0,
        name: str | None = None,
        log_columns: bool = True,
        think_close: str = "</think>",
    ) -> None:
        super().__init__(name=name, log_columns=log_columns)
        if not isinstance(think_close, str) or not think_close.strip():
            raise ValueError(f"think_close must be a non-blank tag, got {think_close!r}")
        if not (isinstance(timeout_s, (int, float)) and 0 < timeout_s <= 10 * DEFAULT_TIMEOUT_S):
            raise ValueError(f"timeout_s must be in (0, {10 * DEFAULT_TIMEOUT_S:g}], got {timeout_s!r}")
        check_count("workers", workers)
        self.answer_column = answer_column
        self.answer_type = None if answer_type is None else AnswerType(answer_type)
        self.unclosed = check_unclosed(unclosed)
        self.think_close = think_close
        self.think_tags = tags_closed_by(think_close)  # only the policy's own tags end its reasoning
        self.use_math_verify = bool(use_math_verify)
        self.timeout_s = float(timeout_s)
        self.workers = workers
        self.startup_timeout_s = float(startup_timeout_s)
        self._grader: Grader | None = None
        self._grader_pid: int | None = None
        self._lock = threading.Lock()

    # -- the math-verify pool: one per process, created on first need -----------------------------------
    def _get_grader(self) -> Grader:
        if self._grader is None or self._grader_pid != os.getpid():
            # After a fork the parent's workers are not ours to talk to: start fresh.
            self._grader = Grader(
                workers=self.workers,
                timeout_s=self.timeout_s,
                use_math_verify=self.use_math_verify,
                startup_timeout_s=self.startup_timeout_s,
            )
            self._grader_pid = os.getpid()
        return self._grader

    def close(self) -> None:
        """Stop the math-verify workers (they restart on need)."""
        with self._lock:
            if self._grader is not None and self._grader_pid == os.getpid():
                self._grader.close()
            self._grader = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.update(_grader=None, _grader_pid=None, _lock=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._lock = threading.Lock()

    # -- scoring -------------------------------------------------------------------------------------------
    def _problem(self, row: Row, scored: Scored, cache: dict) -> Problem | None:
        """The row's gold answer as a `Problem`, or None (counted) when it cannot be used."""
        gold = row.get(self.answer_column)
        if gold is MISSING:
            self._missing_column(self.answer_column, scored)
            return None
        answer_type = row.get("answer_type")
        if answer_type is MISSING or answer_type is None:
            if self.answer_type is None:
                if answer_type is MISSING:
                    self._missing_column("answer_type", scored)
                else:  # the column is there; this row's value is not
                    scored.counts["no_answer_type"] += 1
                    self._warn_once(
                        "answer_type:None",
                        f"{self.__name__}: a row's 'answer_type' is None and no default answer_type= was "
                        "given; such rows score None (logged once)",
                    )
                return None
            answer_type = self.answer_type
        key = tuple(
            row.get(c) if row.get(c) is not MISSING else None
            for c in (self.answer_column, "answer_type", "domain", "source", "rel_tol", "abs_tol", "question")
        ) + (str(answer_type),)
        if key in cache:
            problem, reason = cache[key]
        else:
            problem, reason = None, None
            gold_text = _text_column(gold)
            try:
                answer_type = AnswerType(str(answer_type).strip().lower())
                metadata = {}
                for tol in ("rel_tol", "abs_tol"):
                    value = _tolerance(row.get(tol))
                    if value is not None:
                        metadata[tol] = value
                if gold_text is None:
                    reason = "no gold answer"
                else:
                    reason = _gold_problem(gold_text, answer_type.value)
                if reason is None:
                    problem = Problem(
                        domain=_text_column(row.get("domain")) or "",
                        question=_text_column(row.get("question")) or "",
                        answer=gold_text,
                        answer_type=answer_type,
                        source=_text_column(row.get("source")) or "",
                        metadata=metadata,
                    )
            except (TypeError, ValueError) as exc:
                reason = f"{type(exc).__name__}: {exc}"
            cache[key] = (problem, reason)
        if problem is None:
            scored.counts["unparsable_gold"] += 1
            self._warn_once(
                f"gold:{reason}"[:200],
                f"{self.__name__}: gold answer {printable(gold, 80)!r} "
                f"cannot be used ({reason}); such rows score None (logged once per reason)",
            )
        return problem

    def _score(self, rows: list[Row]) -> Scored:
        n = len(rows)
        scored = Scored([None] * n)
        verdicts: list[str | None] = [None] * n
        extracted: list[str | None] = [None] * n
        pending: list[tuple[int, str, Problem]] = []
        domains: list[str] = [""] * n
        cache: dict = {}
        for row in rows:
            try:
                problem = self._problem(row, scored, cache)
                if problem is None:
                    verdicts[row.index] = Verdict.UNPARSABLE_GOLD.value
                    continue
                domains[row.index] = problem.domain
                text = completion_text(row.completion, self.think_close)
                if text is None:
                    scored.counts["no_completion"] += 1
                    verdicts[row.index] = "no_completion"
                    continue
                pending.append((row.index, text, problem))
            except Exception as exc:  # noqa: BLE001 - one odd row scores None, the rest go on
                scored.counts["errors"] += 1
                self._warn_once(f"row:{type(exc).__name__}", f"{self.__name__}: a row failed: {exc!r:.200}")
        if pending:
            grades = self._grade([(text, problem) for _, text, problem in pending])
            for (index, _, _problem), grade in zip(pending, grades):
                if grade is NEVER_CLOSED:
                    scored.counts["unclosed"] += 1
                reward = VERDICT_REWARD[grade.verdict]
                scored.rewards[index] = reward
                verdicts[index] = grade.verdict.value
                extracted[index] = printable(grade.extracted)
                if grade.verdict not in (Verdict.CORRECT, Verdict.WRONG) and grade is not NEVER_CLOSED:
                    key = grade.verdict.value
                    if grade.verdict is Verdict.ERROR:
                        key = "grader_unavailable" if grade.detail.startswith(_POOL_FAILURES) else "grader_error"
                    scored.counts[key] += 1
        by_domain: dict[str, list[float]] = {}
        for domain, reward in zip(domains, scored.rewards):
            if domain and reward is not None:
                by_domain.setdefault(domain, []).append(reward)
        if len(by_domain) <= 20:  # a bounded set of metric names
            for domain, values in by_domain.items():
                scored.means[f"accuracy/{printable(domain, 40)}"] = values
        scored.extra = {"verdict": verdicts, "extracted": extracted}
        return scored

    def _grade(self, items: list[tuple[str, Problem]]) -> list[Grade]:
        """The verdict of each (completion text, problem) (`recovery.grading.verdict.grade_continuations`)."""
        with self._lock:
            grader = self._get_grader()
            grades = grade_continuations(items, grader, unclosed=self.unclosed, tags=self.think_tags)
        failed = next((g for g in grades if g.verdict is Verdict.ERROR and g.detail.startswith(_POOL_FAILURES)), None)
        if failed is not None:
            self._warn_once(
                f"pool:{failed.detail}"[:200],
                f"{self.__name__}: math-verify cannot run here "
                f"({failed.detail}); answers that need it score 0.0 as grader_unavailable "
                "(logged once per reason; every batch tries again)",
            )
        return grades
