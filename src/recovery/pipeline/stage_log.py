"""`StageLog`: what one invocation of the pipeline skipped and asked of the backends.

Stages and their helpers write here and nowhere else: a skip is counted for the run's summary and, unless it
is counted only, kept as a row of the run's ``skips`` table, so the report counts it after a resume too; a
backend request is counted as answered or failed (`recovery.pipeline.outcome.RequestLog`). A helper that
only counts takes this object rather than the whole `recovery.pipeline.context.StageContext`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from recovery.grading.judge import JUDGE_CALL_FAILED
from recovery.pipeline.outcome import RequestLog
from recovery.run_dir import GENERATION_ERROR, records
from recovery.store import Table
from recovery.types import Grade, Verdict

__all__ = ["StageLog"]


@dataclass
class StageLog:
    """The skips (``counts``: (stage, reason) → count) and backend requests (``requests``) of one invocation;
    the skip rows not yet committed to ``skips``, the run's skips table, wait for `flush`."""

    skips: Table
    counts: Counter = field(default_factory=Counter)
    requests: RequestLog = field(default_factory=RequestLog)
    _rows: list[dict[str, Any]] = field(default_factory=list)

    def skip(self, stage: str, item: str, reason: str, detail: str = "") -> None:
        """Count a skipped item and keep its row for the ``skips`` table (``item`` identifies it, ``detail``
        says why); `flush` writes the rows."""
        self.counts[(stage, reason)] += 1
        self._rows.append(records.skip_row(stage, item, reason, detail))

    def count(self, stage: str, reason: str, n: int = 1) -> None:
        """Count ``n`` skips whose rows live elsewhere (a stage's own table) or nowhere (a retried failure)."""
        self.counts[(stage, reason)] += n

    def failed_request(self, stage: str, item: str, error: str | None, *, store: bool = True) -> None:
        """Count a request the backend failed: a ``generation_error`` skip with the backend's reason verbatim
        as its detail (``store=False``: counted only, for a failure the next run retries without a stored
        row), and the reason in `requests`, so the CLI shows it."""
        reason = error or "no samples"
        self.requests.failed_one(stage, reason)
        if store:
            self.skip(stage, item, GENERATION_ERROR, reason)
        else:
            self.count(stage, GENERATION_ERROR)

    def judge_calls(self, stage: str, grades: Iterable[Grade | None]) -> None:
        """Count each LLM-judge call of ``stage`` in `requests`: failed (with the generator's reason verbatim)
        when it got no reply, else answered; None is an item the judge was not asked about."""
        for grade in grades:
            if grade is None:
                continue
            if grade.verdict is Verdict.ERROR and grade.detail.startswith(JUDGE_CALL_FAILED):
                self.requests.failed_one(stage, grade.detail[len(JUDGE_CALL_FAILED) :])
            else:
                self.requests.sent_one(stage)

    def flush(self) -> None:
        """Commit the kept skip rows to the ``skips`` table (one atomic shard)."""
        rows, self._rows = self._rows, []
        if rows:
            with self.skips.writer(records.SKIPS, writer_id="stages") as writer:
                writer.add_many(rows)
