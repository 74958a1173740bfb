"""What one mini-benchmark evaluation measured, and its scalars for a trainer's logs."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from recovery.metrics import LEVELS


@dataclass
class MiniBenchResult:
    """One evaluation: rows per intervention and per (intervention, timestep), overall means, clean accuracy.

    Row keys: ``intervention`` (and ``timestep``), ``n_chains``, ``majority``, ``at_least_once``, ``all``,
    ``length_overhead_pct`` (the paper's whole-CoT change, inserted text removed), ``remaining_overhead_pct``
    (continuation vs the original remainder), ``doubt_rate`` (continuations with doubt in their first
    sentences). Empty groups are absent; missing numbers are NaN.
    """

    per_intervention: list[dict[str, Any]]
    per_timestep: list[dict[str, Any]]
    overall: dict[str, Any]
    clean_accuracy: float | None
    n_chains: int
    n_continuations: int
    skips: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def scalars(self, prefix: str = "robustness") -> dict[str, float]:
        """Flat, finite scalars for ``Trainer.log`` (every ``report_to`` integration takes them).

        ``{prefix}/{intervention}/{majority|at_least_once|all|length_overhead_pct|doubt_rate}``,
        ``{prefix}/{intervention}/majority_t{t}`` per timestep, the same under ``{prefix}/mean/``,
        ``{prefix}/clean_accuracy``, ``{prefix}/n_chains``, ``{prefix}/skipped``, ``{prefix}/seconds``, and
        ``{prefix}/mean/majority_t{t}``: majority robustness at each timestep over every intervention, the
        chains pooled (an intervention weighs by its number of chains). Intervention names have ``/``
        replaced by ``_`` (``toy/wrong_continuation`` → ``toy_wrong_continuation``).
        """
        out: dict[str, float] = {}
        metrics = (*LEVELS, "length_overhead_pct", "doubt_rate")
        for row in [*self.per_intervention, {**self.overall, "intervention": "mean"}]:
            name = metric_name(row["intervention"])
            for key in metrics:
                _put(out, f"{prefix}/{name}/{key}", row.get(key))
        for row in self.per_timestep:
            _put(out, f"{prefix}/{metric_name(row['intervention'])}/majority_t{row['timestep']:g}", row.get("majority"))
        _put(out, f"{prefix}/clean_accuracy", self.clean_accuracy)
        out[f"{prefix}/n_chains"] = float(self.n_chains)
        out[f"{prefix}/skipped"] = float(sum(self.skips.values()))
        out[f"{prefix}/seconds"] = round(float(self.seconds), 3)
        pooled: dict[float, list[float]] = defaultdict(lambda: [0.0, 0.0])  # timestep → [Σ majority·n, Σ n]
        for row in self.per_timestep:
            value, n = row.get("majority"), float(row.get("n_chains") or 0)
            if value is None or not math.isfinite(float(value)) or n <= 0:
                continue
            pooled[float(row["timestep"])][0] += float(value) * n
            pooled[float(row["timestep"])][1] += n
        for t, (total, n) in sorted(pooled.items()):
            out[f"{prefix}/mean/majority_t{t:g}"] = total / n
        return out


def metric_name(intervention: str) -> str:
    """An intervention name as one metric-path component."""
    return intervention.replace("/", "_")


def _put(out: dict[str, float], key: str, value: Any) -> None:
    if value is None:
        return
    value = float(value)
    if math.isfinite(value):
        out[key] = value
