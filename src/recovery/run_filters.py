"""The ``traces.filters`` section of the run configuration: which original traces and problems enter the
benchmark (paper §3.2). `recovery.pipeline.filter_stage` runs the steps in the order of the run's ``selection``
protocol part; the reference-solved filter runs in the problems stage, before any trace is generated."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FilterConfig", "ReferenceSolvedConfig"]


@dataclass
class ReferenceSolvedConfig:
    """Keep only the problems a reference model solved in a GeneralThoughts-style source (paper §3.2: the Math
    problems DeepSeek-R1 671B solved, by its GeneralThoughts traces; `recovery.data.general_thoughts`)."""

    path: str | None = None  # a local JSONL/JSON/Parquet dump in the source's schema; unset: the Hub copy
    model: str = "DeepSeek-R1"  # the source's model_name (or its last "/" part), case-insensitive
    hub_id: str = "GeneralReasoning/GeneralThought-430K"
    split: str = "train"
    revision: str | None = None


@dataclass
class FilterConfig:
    """Which original traces enter the benchmark (paper §3.2). The steps run in the order of the run's
    ``selection`` protocol part (`recovery.data.reference_selection` for ``reference``)."""

    require_correct: bool = True
    require_closed: bool = True
    drop_longest_fraction: float = 0.02
    intersect_models: bool = True
    # At most this many problems per reference answer, after the intersection (the paper's Math: 20).
    max_per_answer: int | None = None
    # A seeded draw of this many problems among those every model kept (the paper's Math: 600), and its seed.
    draw: int | None = None
    draw_seed: int = 0
    reference_solved: ReferenceSolvedConfig | None = None  # problems the reference model solved, before traces

    def __post_init__(self) -> None:
        if not 0 <= self.drop_longest_fraction < 1:
            raise ValueError("filters.drop_longest_fraction must lie in [0, 1)")
        for key in ("max_per_answer", "draw"):
            if getattr(self, key) is not None and getattr(self, key) < 1:
                raise ValueError(f"filters.{key} must be ≥ 1 (or unset), got {getattr(self, key)}")
