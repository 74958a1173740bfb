"""The counts behind the doubt section (`DoubtResult`), and how they are stored in ``summary.json``.

Kept apart from the computation (`recovery.analysis.doubt_curve`) so that the section can be rebuilt from
the stored file alone. Besides the counts, a result names what produced them: the detector, the sentence
splitter (`recovery.doubt.SENTENCE_SPLITTERS`) and the grading protocol of the run (which decides what
"recovered" means; `recovery.run_config.GradingConfig.protocol`).
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from recovery.protocol import DEFAULT_STYLE
from recovery.report.sections_store import analysis_dir

__all__ = ["ANALYSIS_NAME", "PAPER_BASELINE", "SUMMARY_FILE", "Cell", "DoubtResult"]

ANALYSIS_NAME = "doubt"
SUMMARY_FILE = "summary.json"
PAPER_BASELINE = 0.153  # §4.2: doubt in 20 random consecutive sentences of unperturbed CoTs


Cell = tuple[str, str, str, bool, int]  # (model, intervention, category, recovered, sentence index)


@dataclass
class DoubtResult:
    """Counts behind every number of the doubt section.

    ``cells[(model, intervention, category, recovered, index)] = [sentences, doubtful]`` (index 1-based);
    ``windows[(model, intervention, category, recovered)]`` = continuations; ``baseline[(model, position)]``
    = [sentences, doubtful] (position 1-based inside the random window); ``baseline_traces`` /
    ``baseline_short`` per model; ``skips[(stage, reason)]``; ``examples`` = a judge reply per skip reason.
    """

    detector: str
    sentences: int
    seed: int
    baseline_source: str = "all traces"
    splitter: str = "default"  # a name in `recovery.doubt.SENTENCE_SPLITTERS`
    grading: str | None = None  # the run's grading protocol (`GradingConfig.protocol`), None when unknown
    protocol: str = "default"  # whose doubt units and judge reading (`recovery.analysis.doubt_units`)
    cells: dict[Cell, list[int]] = field(default_factory=dict)
    windows: Counter = field(default_factory=Counter)
    baseline: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    baseline_traces: Counter = field(default_factory=Counter)
    baseline_short: Counter = field(default_factory=Counter)
    skips: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)

    # ---- queries
    def models(self) -> list[str]:
        return sorted({c[0] for c in self.cells} | {m for m, _ in self.baseline})

    def interventions(self) -> list[str]:
        return sorted({c[1] for c in self.cells})

    def category(self, intervention: str) -> str:
        return next((c[2] for c in self.cells if c[1] == intervention), "other")

    def curve(
        self, *, model: str | None = None, intervention: str | None = None, recovered: bool | None = None
    ) -> list[tuple[int, int]]:
        """``(sentences, doubtful)`` at indices 1..``sentences`` over the matching cells (None = all)."""
        out = [[0, 0] for _ in range(self.sentences)]
        for (m, iv, _, rec, i), (n, k) in self.cells.items():
            if (
                (model is None or m == model)
                and (intervention is None or iv == intervention)
                and (recovered is None or rec == recovered)
            ):
                out[i - 1][0] += n
                out[i - 1][1] += k
        return [(n, k) for n, k in out]

    def n_windows(
        self, *, model: str | None = None, intervention: str | None = None, recovered: bool | None = None
    ) -> int:
        return sum(
            v
            for (m, iv, _, rec), v in self.windows.items()
            if (model is None or m == model)
            and (intervention is None or iv == intervention)
            and (recovered is None or rec == recovered)
        )

    def baseline_counts(self, model: str | None = None) -> tuple[int, int]:
        """``(sentences, doubtful)`` of the baseline windows (of one model, or pooled)."""
        pairs = [v for (m, _), v in self.baseline.items() if model is None or m == model]
        return sum(p[0] for p in pairs), sum(p[1] for p in pairs)

    def baseline_rate(self, model: str | None = None) -> float:
        n, k = self.baseline_counts(model)
        return k / n if n else float("nan")

    # ---- persistence
    def to_json(self) -> dict[str, Any]:
        return {
            "detector": self.detector,
            "sentences": self.sentences,
            "seed": self.seed,
            "baseline_source": self.baseline_source,
            "splitter": self.splitter,
            "grading": self.grading,
            "cells": [[*k, *v] for k, v in sorted(self.cells.items())],
            "windows": [[*k, v] for k, v in sorted(self.windows.items())],
            "baseline": [[*k, *v] for k, v in sorted(self.baseline.items())],
            "baseline_traces": dict(sorted(self.baseline_traces.items())),
            "baseline_short": dict(sorted(self.baseline_short.items())),
            "skips": [[*k, v] for k, v in sorted(self.skips.items())],
            "examples": dict(sorted(self.examples.items())),
            "baseline_rate": None if self.baseline_counts()[0] == 0 else self.baseline_rate(),
            # Named only when not the project's, so a default analysis writes the file it always wrote.
            **({"protocol": self.protocol} if self.protocol != DEFAULT_STYLE else {}),
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> DoubtResult:
        return cls(
            detector=obj["detector"],
            sentences=int(obj["sentences"]),
            seed=int(obj["seed"]),
            baseline_source=obj.get("baseline_source", "all traces"),
            splitter=obj.get("splitter", "default"),
            grading=obj.get("grading"),
            protocol=obj.get("protocol", "default"),
            cells={(m, iv, c, bool(r), int(i)): [int(n), int(k)] for m, iv, c, r, i, n, k in obj["cells"]},
            windows=Counter({(m, iv, c, bool(r)): int(v) for m, iv, c, r, v in obj["windows"]}),
            baseline={(m, int(p)): [int(n), int(k)] for m, p, n, k in obj["baseline"]},
            baseline_traces=Counter(obj["baseline_traces"]),
            baseline_short=Counter(obj["baseline_short"]),
            skips=Counter({(s, r): int(v) for s, r, v in obj["skips"]}),
            examples=dict(obj.get("examples", {})),
        )

    @classmethod
    def load(cls, run_dir: str | os.PathLike) -> DoubtResult | None:
        """The stored result of ``run_dir`` (None when the analysis has not run there)."""
        path = analysis_dir(run_dir, ANALYSIS_NAME) / SUMMARY_FILE
        return cls.from_json(json.loads(path.read_text(encoding="utf-8"))) if path.is_file() else None


def rate(pairs: Sequence[tuple[int, int]]) -> float:
    """Pooled rate of ``(sentences, doubtful)`` pairs; NaN when there is no sentence."""
    n = sum(p[0] for p in pairs)
    return sum(p[1] for p in pairs) / n if n else math.nan
