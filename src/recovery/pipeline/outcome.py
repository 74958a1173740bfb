"""Whether a run measured anything, and if not, why — in one line a person can act on.

A run "succeeds" only if it measured something. Two ways it can measure nothing:

- a stage sent requests to a backend and every one failed (a server that answers HTTP 422 to everything):
  `RequestLog` keeps, per stage, how many requests this invocation sent and the verbatim reason of each
  failure, so the line reads ``traces: 4 of 4 requests failed: HTTP 422: prompt must be a string``;
- the filter kept no trace (`filter_outcome`): the line gives the drops by reason, and when a model's traces
  never close a think block, it names the model as probably not a reasoning model, or its traces as cut at
  ``traces.sampling.max_new_tokens``, with the setting that changes that.

`run_pipeline` raises `NothingMeasured` after writing what the run did (``summary.json``, the report), and
the CLI turns it into that line and exit status `EXIT_NOTHING_MEASURED`. A model that kept no trace while
another kept some is a warning, not a failure: the run measured the others.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from recovery.model_config import model_spec

if TYPE_CHECKING:
    from recovery.run_config import RunConfig
    from recovery.run_dir import Run

__all__ = ["EXIT_NOTHING_MEASURED", "NothingMeasured", "RequestLog", "filter_outcome", "note_outcome"]

# The CLI's exit status for a run that measured nothing (2 is a bad input, 130 an interruption).
EXIT_NOTHING_MEASURED = 1
NO_CLOSING_THINK_TAG = "no_closing_think_tag"


class NothingMeasured(RuntimeError):
    """A run finished its stages but measured nothing; ``summary`` is its `RunSummary` (already written to
    the run directory, whose finished work stays there for a resume)."""

    def __init__(self, message: str, summary: Any = None) -> None:
        super().__init__(message)
        self.summary = summary


@dataclass
class RequestLog:
    """Backend requests of one invocation per stage: how many were answered (``sent``) and, of those that
    failed, the verbatim reason of each (``failed``: stage → reason → count).

    >>> log = RequestLog()
    >>> for _ in range(4):
    ...     log.failed_one("traces", "HTTP 422: prompt must be a string")
    >>> log.all_failed("traces")
    'traces: 4 of 4 requests failed: HTTP 422: prompt must be a string'
    >>> log.sent_one("continuations"); log.failed_one("continuations", "timed out")
    >>> log.sent_one("continuations")
    >>> log.all_failed("continuations") is None, log.rows()[-1]
    (True, {'stage': 'continuations', 'reason': 'timed out', 'count': 1, 'of': 3})
    """

    sent: Counter = field(default_factory=Counter)
    failed: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))

    def sent_one(self, stage: str) -> None:
        """Count one request ``stage`` sent that was answered."""
        self.sent[stage] += 1

    def failed_one(self, stage: str, reason: str) -> None:
        """Count one request ``stage`` sent that failed, with the backend's reason verbatim."""
        self.sent[stage] += 1
        self.failed[stage][reason or "no reason given"] += 1

    def all_failed(self, stage: str) -> str | None:
        """The one line for a stage that sent requests of which every one failed, else None."""
        failed = self.failed.get(stage)
        n_failed = sum(failed.values()) if failed else 0
        if not n_failed or n_failed < self.sent[stage]:
            return None
        reason, count = failed.most_common(1)[0]
        others = f" (and {n_failed - count} other failures)" if count < n_failed else ""
        return f"{stage}: {n_failed} of {self.sent[stage]} requests failed: {reason}{others}"

    def rows(self) -> list[dict[str, Any]]:
        """Every distinct failure reason per stage, most frequent first: ``stage``, ``reason``, ``count`` and
        ``of`` (the requests that stage sent)."""
        return [
            {"stage": stage, "reason": reason, "count": count, "of": self.sent[stage]}
            for stage, reasons in self.failed.items()
            for reason, count in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        ]


def note_outcome(ctx: Any, stage: str) -> None:
    """After ``stage`` ran: set ``ctx.outcome`` (a `StageContext`) when it measured nothing — every request
    it sent failed, or (the filter) it kept no trace — and add the filter's per-model warnings."""
    if ctx.outcome is None:
        ctx.outcome = ctx.log.requests.all_failed(stage)
    if stage == "filter" and ctx.outcome is None:
        ctx.outcome, warnings = filter_outcome(ctx.run, ctx.config)
        ctx.warnings.extend(warnings)


def filter_outcome(run: Run, config: RunConfig) -> tuple[str | None, list[str]]:
    """What the filter's verdicts (the ``kept`` table) say: the line for a filter that kept no trace at all
    (None when it kept some, or had no trace to filter: that cause lies upstream), and a warning per model
    that kept none while another model kept some."""
    per_model: dict[str, Counter] = defaultdict(Counter)
    unclosed: set[str] = set()
    for row in run.kept_rows(["id", "model", "kept", "reason"]):
        per_model[row["model"]]["kept" if row["kept"] else row["reason"]] += 1
        if row["reason"] == NO_CLOSING_THINK_TAG:
            unclosed.add(row["id"])
    if not per_model:
        return None, []
    empty = [model for model, reasons in per_model.items() if not reasons["kept"]]
    if not empty:
        return None, []
    length_cut = _length_cut(run, unclosed) if any(per_model[m][NO_CLOSING_THINK_TAG] for m in empty) else Counter()
    lines = []
    for model in sorted(empty):
        reasons = per_model[model]
        total = sum(reasons.values())
        drops = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
        line = f"kept 0 of {total} traces of model {model!r}: {drops}"
        hint = _unclosed_hint(config, model, reasons, length_cut[model])
        lines.append(f"{line} — {hint}" if hint else line)
    if len(empty) < len(per_model):
        return None, [f"filter: {line}" for line in lines]
    total = sum(sum(r.values()) for r in per_model.values())
    if len(lines) == 1:
        return f"filter: {lines[0]}", []
    return f"filter: kept 0 of {total} traces ({'; '.join(lines)})", []


def _length_cut(run: Run, unclosed: set[str]) -> Counter:
    """Per model, how many of its ``unclosed`` traces (ids) stopped at the token limit (``finish_reason``
    length) rather than ending on their own."""
    cut: Counter = Counter()
    for row in run.trace_rows(["id", "model", "finish_reason"]):
        if row["finish_reason"] == "length" and row["id"] in unclosed:
            cut[row["model"]] += 1
    return cut


def _unclosed_hint(config: RunConfig, model: str, reasons: Counter, length_cut: int) -> str:
    """Why a model's traces never close a think block, and the setting that changes that; "" when that is
    not what emptied it. A model with a chat model's conventions is named as probably not a reasoning model
    (whatever its length limit: a chat reply never closes a think block); a reasoning model's traces cut at
    the token limit name the limit; otherwise its think tags are probably not the ones it writes."""

    unclosed = reasons[NO_CLOSING_THINK_TAG]
    if not unclosed or unclosed < sum(reasons.values()) / 2:
        return ""
    index = next((i for i, m in enumerate(config.models) if m.name == model), 0)
    try:
        spec = model_spec(config.models[index])
    except ValueError:  # a spec that contradicts the config's reasoning: the run was refused before any work
        spec = None
    setting = f"models[{index}].reasoning: true or models[{index}].spec (its family)"
    if spec is not None and not spec.reasoning:
        return (
            f"{model!r} probably is not a reasoning model (its traces never close a think block, and its "
            f"conventions {spec.family!r} are a chat model's): evaluate a reasoning model, or if it is one, set "
            f"{setting}"
        )
    if length_cut * 2 >= unclosed:
        limit = config.traces.sampling.max_new_tokens
        return (
            f"{length_cut} of its traces stopped at traces.sampling.max_new_tokens ({limit}) before closing the "
            "think block: raise it"
        )
    close = spec.think_close if spec is not None else "</think>"
    return (
        f"{model!r} probably is not a reasoning model (its traces never close a think block with {close!r}): "
        f"evaluate a reasoning model, or if it closes its reasoning with another tag, set models[{index}].spec "
        "to its family"
    )
