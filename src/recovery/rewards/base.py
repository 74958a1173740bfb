"""What every reward shares: TRL's calling convention, completion text, column access, and never raising.

TRL (from 1.0, the declared floor; ``trl/trainer/grpo_trainer.py::GRPOTrainer._calculate_rewards``) calls a
reward function as::

    reward_func(prompts=prompts, completions=completions, completion_ids=completion_ids_list, **reward_kwargs)

where ``reward_kwargs`` holds every dataset column except ``prompt``/``completion``/``completion_ids`` (one
list entry per completion, repeated across a prompt's generations), ``trainer_state`` (the
`transformers.TrainerState`), ``log_extra(column, values)`` (a column of the completions table, one value
per completion), ``log_metric(name, value)`` (a scalar, averaged over the logging step and across
processes) and, with environments, ``environments``. It converts ``None`` to NaN: TRL's weighted sum is
``nansum`` (a None term adds nothing), a row where *every* reward function says None is unscorable (its
advantage is 0), and per-function means skip NaN. Completions are strings, or — for conversational
datasets — a list with one assistant message, whose reasoning may sit in a separate ``reasoning_content``
(or ``thinking``) field when the tokenizer has a response schema.

`RewardFunction` turns that into ``_score(rows)`` over `Row` objects and guarantees: one float or None per
completion, never an exception (a failure scores None and is counted under ``<name>/errors``), finite
values only, and metrics / extra columns forwarded to ``log_metric`` / ``log_extra`` when TRL passes them.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MISSING",
    "RewardFunction",
    "Row",
    "Scored",
    "check_count",
    "check_weight",
    "completion_text",
    "printable",
]

logger = logging.getLogger(__name__)

#: Keyword arguments TRL adds beside the dataset columns; never treated as columns.
TRAINER_KWARGS = frozenset({"trainer_state", "log_extra", "log_metric", "environments"})
#: Message fields that hold the reasoning when a response parser split it from the answer.
_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")
#: Values logged to the completions table are cut to this many characters.
_EXTRA_CHARS = 200


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"

    def __reduce__(self) -> str:
        return "MISSING"


#: A column that was not passed at all (as opposed to a row whose value is None).
MISSING: Any = _Missing()


def _content_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, (bytes, bytearray)):
        return bytes(content).decode("utf-8", errors="replace")
    if isinstance(content, Sequence):  # content blocks: [{"type": "text", "text": "..."}]
        parts = [b.get("text") for b in content if isinstance(b, Mapping) and isinstance(b.get("text"), str)]
        return "".join(parts) if parts else None
    return None


def completion_text(completion: Any, think_close: str = "</think>") -> str | None:
    """The text of one completion as TRL passes it; None when there is no text at all.

    Strings come back as they are (bytes are decoded as UTF-8 with replacement). A conversational
    completion (a list of messages, or one message) gives its assistant contents joined; when a response
    parser moved the reasoning into ``reasoning_content``/``thinking``, the reasoning is put back in front
    of the answer with ``think_close`` between them, as the model wrote it.

    >>> completion_text([{"role": "assistant", "content": "The answer is 5."}])
    'The answer is 5.'
    >>> completion_text([{"role": "assistant", "reasoning_content": "2+3", "content": "5"}])
    '2+3</think>5'
    >>> completion_text([{"role": "assistant", "reasoning_content": None, "content": "5"}])
    '</think>5'
    """
    if completion is None:
        return None
    if isinstance(completion, str):
        return completion
    if isinstance(completion, (bytes, bytearray)):
        return bytes(completion).decode("utf-8", errors="replace")
    if isinstance(completion, Mapping):
        completion = [completion]
    if not isinstance(completion, Sequence):
        return None
    pieces: list[str] = []
    for message in completion:
        if not isinstance(message, Mapping) or message.get("role", "assistant") != "assistant":
            continue
        content = _content_text(message.get("content")) or ""
        field_name = next((f for f in _REASONING_FIELDS if f in message), None)
        if field_name is None:
            pieces.append(content)
        else:  # the parser found a closed think block (possibly empty) and split it off
            reasoning = message[field_name]
            pieces.append((reasoning if isinstance(reasoning, str) else "") + think_close + content)
    return "".join(pieces) if pieces else None


def printable(value: Any, limit: int = _EXTRA_CHARS) -> str | None:
    """A short, valid-UTF-8 rendering of ``value`` for logs and tables (lone surrogates replaced)."""
    if value is None:
        return None
    text = value if isinstance(value, str) else str(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.encode("utf-8", errors="replace").decode("utf-8")


def check_count(label: str, value: Any) -> None:
    """Raise ValueError unless ``value`` is an int ≥ 1 (a reward setting that counts something)."""
    if not (isinstance(value, int) and value >= 1):
        raise ValueError(f"{label} must be an int ≥ 1, got {value!r}")


def check_weight(label: str, value: Any) -> None:
    """Raise ValueError unless ``value`` is a finite number ≥ 0 (a weight or an overhead; bools refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{label} must be a finite number ≥ 0, got {value!r}")


@dataclass(slots=True)
class Row:
    """One completion with its dataset columns (``MISSING`` for a column that was not passed)."""

    index: int
    completion: Any
    completion_ids: Any
    columns: Mapping[str, Any]

    def get(self, name: str) -> Any:
        return self.columns.get(name, MISSING)


@dataclass(slots=True)
class Scored:
    """What `RewardFunction._score` returns: rewards, counts for metrics, and extra table columns."""

    rewards: list[float | None]
    counts: Counter = field(default_factory=Counter)  # key → number of rows; logged as a fraction of the batch
    means: dict[str, list[float]] = field(default_factory=dict)  # key → values; logged as their mean
    extra: dict[str, list[Any]] = field(default_factory=dict)  # column → one value per row
    n: int = 0  # rows in the batch (for `put`)

    def put(self, column: str, index: int, value: Any) -> None:
        """Set row ``index`` of the extra ``column`` (created full of None on first use)."""
        self.extra.setdefault(column, [None] * self.n)[index] = value


def batch_size(prompts: Any, completions: Any) -> int:
    """The number of completions TRL passed (0 when it cannot be told)."""
    for batch in (completions, prompts):
        if batch is not None:
            try:
                return len(batch)
            except Exception:  # noqa: BLE001 - no length: nothing to score
                return 0
    return 0


def _column_value(values: Any, index: int) -> Any:
    if isinstance(values, (list, tuple)):
        return values[index] if index < len(values) else MISSING
    if hasattr(values, "__getitem__") and hasattr(values, "__len__") and not isinstance(values, (str, bytes, Mapping)):
        try:  # numpy arrays, pandas series, datasets columns
            return values[index] if index < len(values) else MISSING
        except Exception:  # noqa: BLE001 - an odd container is a missing value, not a crash
            return MISSING
    return values  # a scalar: the same value for every row (convenient for direct calls)


class RewardFunction:
    """Base class of the rewards: TRL's signature, picklable, never raises.

    Subclasses set ``__name__`` (TRL's ``get_callable_name`` reads it: metrics appear as
    ``rewards/<__name__>/mean``) and implement `_score`. ``name=`` overrides ``__name__`` per instance so
    two differently configured rewards log apart. ``log_columns=False`` stops the extra completion-table
    columns (metrics are always logged when TRL passes ``log_metric``).
    """

    __name__ = "reward"
    #: The completion-table columns this reward logs (as ``<__name__>/<column>``), every call, so that
    #: TRL's table keeps equal-length columns.
    extra_columns: tuple[str, ...] = ()
    #: Counts logged every call (0.0 when nothing happened), so their per-step average is a true rate.
    count_metrics: tuple[str, ...] = ()

    def __init__(self, *, name: str | None = None, log_columns: bool = True) -> None:
        if name is not None:
            if not isinstance(name, str) or not name:
                raise ValueError(f"name must be a non-empty string, got {name!r}")
            self.__name__ = name
        self.log_columns = bool(log_columns)
        self._warned: set[str] = set()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.__name__!r})"

    # -- the TRL entry point -------------------------------------------------------------------------------
    def __call__(
        self,
        prompts: Sequence[Any] | None = None,
        completions: Sequence[Any] | None = None,
        completion_ids: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        """One reward (float) or None ("cannot score") per completion, in order; never raises."""
        return self.batch_rewards(prompts, completions, completion_ids, kwargs)

    def batch_rewards(self, prompts: Any, completions: Any, completion_ids: Any, kwargs: dict[str, Any]) -> list:
        """`__call__`'s work, with the trainer's other keyword arguments as one mapping (a reward that scores a
        batch in its own way overrides this, not the TRL entry point)."""
        n = batch_size(prompts, completions)
        return self._guarded(n, kwargs, lambda: self._score(self._rows(completions, completion_ids, kwargs, n)))

    def _guarded(self, n: int, kwargs: Mapping[str, Any], compute: Callable[[], Scored]) -> list[float | None]:
        """Run ``compute``, check its rewards, log; any failure gives ``n`` Nones (counted, warned once)."""
        try:
            scored = compute()
            rewards = self._check(scored.rewards, n, scored.counts)
        except Exception as exc:  # noqa: BLE001 - a reward must never stop the training loop
            self._warn_once(
                "batch",
                f"{self.__name__}: scoring the batch failed ({type(exc).__name__}: {exc}); "
                "every completion in it gets None",
            )
            scored = Scored([None] * n, Counter(errors=n), n=n)
            rewards = scored.rewards
        self._emit(scored, n, kwargs.get("log_metric"), kwargs.get("log_extra"))
        return rewards

    # -- for subclasses ----------------------------------------------------------------------------------
    def _score(self, rows: list[Row]) -> Scored:
        """Score every row; the default calls `_score_row` on each, a failing row scores None."""
        scored = Scored([], n=len(rows))
        for row in rows:
            try:
                scored.rewards.append(self._score_row(row, scored))
            except Exception as exc:  # noqa: BLE001 - one bad row must not cost the others their reward
                scored.counts["errors"] += 1
                self._warn_once(
                    f"row:{type(exc).__name__}",
                    f"{self.__name__}: a row failed "
                    f"({type(exc).__name__}: {str(exc)[:200]}); it gets None (logged once per kind)",
                )
                scored.rewards.append(None)
        return scored

    def _score_row(self, row: Row, scored: Scored) -> float | None:  # pragma: no cover - abstract
        """The hook a per-row reward overrides (a batch-level reward overrides `_score` instead)."""
        raise NotImplementedError(
            f"{type(self).__name__} overrides neither _score_row (per row) nor _score (per batch)"
        )

    def _warn_once(self, key: str, message: str) -> None:
        warned = self.__dict__.setdefault("_warned", set())
        if key not in warned:
            warned.add(key)
            logger.warning(message)

    def _missing_column(self, name: str, scored: Scored) -> None:
        scored.counts["missing_column"] += 1
        self._warn_once(
            f"column:{name}",
            f"{self.__name__}: no {name!r} column in the batch; rows score None. "
            f"Add the column to the dataset (TRL passes dataset columns as keyword arguments).",
        )

    # -- internals -----------------------------------------------------------------------------------------
    @staticmethod
    def _rows(completions: Any, completion_ids: Any, kwargs: Mapping[str, Any], n: int) -> list[Row]:
        columns = {k: v for k, v in kwargs.items() if k not in TRAINER_KWARGS}
        rows = []
        for i in range(n):
            completion = completions[i] if completions is not None else None
            ids = _column_value(completion_ids, i) if completion_ids is not None else MISSING
            rows.append(Row(i, completion, ids, {k: _column_value(v, i) for k, v in columns.items()}))
        return rows

    def _check(self, rewards: list[Any], n: int, counts: Counter) -> list[float | None]:
        if len(rewards) != n:
            raise ValueError(f"{len(rewards)} rewards for {n} completions")
        out: list[float | None] = []
        for r in rewards:
            if r is None:
                out.append(None)
                continue
            value = float(r)
            if math.isfinite(value):
                out.append(value)
            else:
                counts["errors"] += 1
                out.append(None)
        return out

    def _emit(self, scored: Scored, n: int, log_metric: Any, log_extra: Any) -> None:
        if callable(log_metric) and n > 0:
            try:
                counts = {key: 0 for key in (*self.count_metrics, "errors")}
                counts.update(scored.counts)
                for key, count in sorted(counts.items()):
                    log_metric(f"{self.__name__}/{key}", count / n)
                for key, values in sorted(scored.means.items()):
                    if values:
                        log_metric(f"{self.__name__}/{key}", float(sum(values) / len(values)))
            except Exception as exc:  # noqa: BLE001 - logging must not break training
                self._warn_once("log_metric", f"{self.__name__}: log_metric failed: {type(exc).__name__}: {exc}")
        if callable(log_extra) and self.log_columns and n > 0:
            try:
                for column in self.extra_columns:
                    values = scored.extra.get(column)
                    if values is None or len(values) != n:
                        values = [None] * n
                    log_extra(f"{self.__name__}/{column}", list(values))
            except Exception as exc:  # noqa: BLE001
                self._warn_once("log_extra", f"{self.__name__}: log_extra failed: {type(exc).__name__}: {exc}")

    # -- pickling: only configuration travels ------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_warned"] = set()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
