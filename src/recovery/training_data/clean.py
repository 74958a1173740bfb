"""Clean (un-intervened) prompts cut from a model's original traces.

Mixed into the training sets so that training on recoveries does not cost clean accuracy: the same
prompt layout as an intervened chain, but the prefix is the trace's own first steps (cut at a timestep,
exactly as the benchmark cuts; `recovery.segment.cut_at`) — or empty, so the example is the whole
original response from the start. The completion is the rest of the original response, byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from recovery.ids import content_id, item_rng, item_seed
from recovery.segment import DEFAULT_MIN_STEPS, TooFewSteps, cut_at, join_steps, split_steps
from recovery.training_data.drops import Drops
from recovery.types import Trace

FROM_START = 0.0  # the timestep that means "no prefix: the whole response"


@dataclass(frozen=True, slots=True)
class CleanCut:
    """A clean prefix of ``trace``: ``prefix`` = steps ``0..cut_index`` (empty when from the start);
    ``rest`` = the original reasoning after it; ``id`` is stable for (trace, t)."""

    trace: Trace
    target_t: float
    actual_t: float
    cut_index: int
    prefix: str

    @property
    def id(self) -> str:
        return content_id("clean-cut", self.trace.id, float(self.target_t))

    @property
    def reference_length(self) -> int:
        """Characters of original reasoning after the cut: what a clean continuation costs."""
        return len(self.trace.reasoning) - len(self.prefix)

    @property
    def completion(self) -> str:
        """The rest of the original response after the prefix (reasoning, closing tag, answer)."""
        rest = self.trace.reasoning[len(self.prefix) :]
        if self.trace.closed:
            rest += self.trace.think_close + self.trace.answer_text
        return rest


def clean_cut(trace: Trace, t: float, *, min_steps: int = DEFAULT_MIN_STEPS) -> CleanCut:
    """Cut ``trace`` at timestep ``t`` (``FROM_START`` → empty prefix). Raises `TooFewSteps` like the
    benchmark does for traces shorter than ``min_steps`` steps."""
    if t <= FROM_START:
        return CleanCut(trace, FROM_START, 0.0, -1, "")
    steps = split_steps(trace.reasoning)
    cut = cut_at(steps, t, min_steps=min_steps)
    return CleanCut(trace, t, cut.actual_t, cut.index, join_steps(steps[: cut.index + 1]))


def from_start_completion(cut: CleanCut, opener: str) -> str | None:
    """The completion for a from-the-start example whose prompt already ends with ``opener`` (the think
    opener the renderer added because the template lacks it): the model's own bytes after that opener,
    or None when they do not start with it (the example would teach other bytes than the model wrote)."""
    if not opener:
        return cut.completion
    written = cut.trace.think_open + cut.completion
    return written[len(opener) :] if written.startswith(opener) else None


def clean_count(n_main: int, fraction: float) -> int:
    """How many clean rows make them ``fraction`` of the final set, beside ``n_main`` other rows.

    >>> clean_count(10, 0.5), clean_count(9, 0.25), clean_count(10, 0.0)
    (10, 3, 0)
    """
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"clean fraction must lie in [0, 1), got {fraction}")
    return round(n_main * fraction / (1.0 - fraction)) if fraction > 0 else 0


def pick_clean_cuts(
    traces: Sequence[Trace],
    timesteps: Sequence[float],
    n: int,
    *,
    seed: int = 0,
    min_steps: int = DEFAULT_MIN_STEPS,
    drops: Drops | None = None,
    stage: str = "clean",
    accept: Callable[[CleanCut], bool] | None = None,
) -> list[CleanCut]:
    """``n`` clean cuts spread over ``traces``: every trace gets one (at a timestep drawn per trace from
    ``timesteps``) before any gets a second, traces in a seeded order. ``accept`` may refuse a cut (and
    counts its own reason); traces too short to cut and a final shortfall (``short_supply``) are counted
    in ``drops``."""
    if n <= 0 or not timesteps:
        return []
    order = sorted(traces, key=lambda t: item_seed(seed, "clean-order", t.id))
    plans = {}
    for trace in order:
        ts = list(timesteps)
        item_rng(seed, "clean-timesteps", trace.id).shuffle(ts)
        plans[trace.id] = ts
    out: list[CleanCut] = []
    for round_index in range(len(timesteps)):
        for trace in order:
            if len(out) >= n:
                return out
            t = plans[trace.id][round_index]
            try:
                cut = clean_cut(trace, t, min_steps=min_steps)
            except TooFewSteps:
                if drops is not None:
                    drops.add(stage, "too_few_steps")
                continue
            if accept is not None and not accept(cut):
                continue
            out.append(cut)
    if drops is not None and len(out) < n:
        drops.add(stage, "short_supply", n - len(out))
    return out
