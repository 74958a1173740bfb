"""What one mini-benchmark evaluation measured, and its scalars for a trainer's logs; what one process
generated of an evaluation split between processes, and the merge of those shares."""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from recovery.metrics import LEVELS

T = TypeVar("T")
log = logging.getLogger(__name__)


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
    #: What the model wrote: one record per continuation (``chain``, ``intervention``, ``t``, ``continuation``,
    #: ``verdict``, ``doubt``: the doubt family of its first sentences or None); clean requests as ``clean``.
    samples: list[dict[str, Any]] = field(default_factory=list)

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


@dataclass
class RankShare:
    """What one process generated of a split evaluation (sent to the main process by ``gather_object``).

    ``texts``: the sample texts of each request it generated; ``failed``: its requests that came back
    without samples; ``error``: why its whole share failed (one line), None when it did not; ``seconds``:
    how long its share took.
    """

    rank: int
    texts: dict[str, list[str]]
    failed: int = 0
    error: str | None = None
    seconds: float = 0.0


def dealt(items: Sequence[T], n_processes: int) -> list[T]:
    """``items`` reordered so that a contiguous split into ``n_processes`` parts (accelerate's
    ``split_between_processes``) gives process r the items r, r + n, r + 2n, …: every process gets the same
    mix of interventions, timesteps and clean requests, hence about the same amount of decoding."""
    if n_processes < 1:
        raise ValueError(f"n_processes must be ≥ 1, got {n_processes}")
    return [item for r in range(n_processes) for item in items[r::n_processes]]


def merge_shares(shares: Sequence[RankShare]) -> tuple[dict[str, list[str]], int]:
    """The texts of every process's share in one dict, and the failed requests summed; raises naming the
    first process whose share failed, or a request two processes both generated."""
    texts: dict[str, list[str]] = {}
    failed = 0
    for share in sorted(shares, key=lambda s: s.rank):
        if share.error is not None:
            raise RuntimeError(f"process {share.rank} failed to generate its share: {share.error}")
        twice = texts.keys() & share.texts.keys()
        if twice:
            raise RuntimeError(f"requests generated by two processes: {sorted(twice)[:3]}")
        texts.update(share.texts)
        failed += share.failed
    return texts, failed


def generate_share(bench: Any, make_generator: Callable[[], Any], requests: Sequence[Any], rank: int):
    """``(RankShare, generator)``: ``bench`` (a `MiniBench`) generates ``requests`` with the generator
    ``make_generator`` builds (None when building it failed). A failure is kept in the share, never
    raised: the other processes are about to wait for this one at the gather."""
    start, generator = time.perf_counter(), None
    try:
        generator = make_generator()
        texts, failed = bench.generate(generator, requests)
    except Exception as exc:
        log.exception("RobustnessCallback: process %d failed to generate its share; training continues", rank)
        error = (f"{type(exc).__name__}: {exc}".splitlines() or ["?"])[0]
        return RankShare(rank, {}, error=error, seconds=time.perf_counter() - start), generator
    return RankShare(rank, texts, failed=failed, seconds=time.perf_counter() - start), generator


def waited(shares: Sequence[RankShare], ddp_timeout: float) -> float:
    """How long the fastest process waited at the gather for the slowest (seconds); a warning when that is
    over half of ``ddp_timeout``, the limit of any collective."""
    seconds = [s.seconds for s in shares]
    wait = max(seconds) - min(seconds) if seconds else 0.0
    if wait > ddp_timeout / 2:
        log.warning(
            "RobustnessCallback: a process waited %.0f s for the slowest share (ddp_timeout %.0f s): shrink the "
            "mini-benchmark (n_problems, n_samples, max_new_tokens) or raise ddp_timeout",
            wait,
            ddp_timeout,
        )
    return wait
