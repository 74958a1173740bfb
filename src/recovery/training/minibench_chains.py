"""The mini-benchmark's fixed chains: toy items, rule-based intervention instances (no intervention LLM
inside a training loop), every intervention at every timestep."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from recovery.segment import DEFAULT_MIN_STEPS
from recovery.types import Intervened, Problem, Trace


def toy_items(n: int, *, seed: int = 0) -> list[tuple[Problem, Trace]]:
    """The first ``n`` toy held-out problems with the trace the toy task writer gives each (no slips)."""
    from recovery.toy import heldout_problems, write_trace

    return [(p, write_trace(p, seed=seed, slip_rate=0.0).as_trace()) for p in heldout_problems(n)]


def rule_based_instances(names: Sequence[str], wikipedia_pool: str | None) -> dict[str, Any]:
    """Intervention instances by name; LLM-backed ones are refused (no intervention LLM in a training loop)."""
    from recovery.interventions import WikipediaPool, create, get_spec

    if any(name.startswith("toy/") for name in names):
        import recovery.toy  # noqa: F401 — registers the toy interventions
    out = {}
    for name in names:
        spec = get_spec(name)
        if spec.needs_generator:
            raise ValueError(
                f"intervention {name!r} needs an intervention LLM; inside training use rule-based or toy/* "
                "interventions, or source='run' with chains the benchmark already built"
            )
        options: dict[str, Any] = {}
        if name == "wikipedia_text":
            if not wikipedia_pool:
                raise ValueError("wikipedia_text needs wikipedia_pool (a paragraphs file)")
            options["pool"] = WikipediaPool.from_path(wikipedia_pool)
        out[name] = create(name, **options)
    return out


def build_chains(
    items: Iterable[tuple[Problem, Trace]],
    interventions: Sequence[str],
    timesteps: Sequence[float],
    *,
    seed: int = 0,
    min_steps: int = DEFAULT_MIN_STEPS,
    wikipedia_pool: str | None = None,
    skips: Counter | None = None,
) -> list[Intervened]:
    """Every intervention at every timestep on every trace (`recovery.interventions.intervene`); traces too
    short or edits that fail are counted in ``skips`` under the intervention package's reasons."""
    from recovery.interventions import InterventionFailed, intervene
    from recovery.segment import TooFewSteps, split_steps

    skips = skips if skips is not None else Counter()
    instances = rule_based_instances(interventions, wikipedia_pool)
    chains: list[Intervened] = []
    for problem, trace in items:
        steps = split_steps(trace.reasoning)
        for instance in instances.values():
            for t in timesteps:
                try:
                    chains.append(intervene(problem, trace, instance, t, seed=seed, min_steps=min_steps, steps=steps))
                except TooFewSteps:
                    skips["too_few_steps"] += 1
                except InterventionFailed as err:
                    skips[err.reason] += 1
    return chains
