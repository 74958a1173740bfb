"""The mini-benchmark's fixed chains: toy items, rule-based intervention instances (no intervention LLM
inside a training loop), every intervention at every timestep."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from recovery.interventions import ChainSettings, Produced, TraceJob, WikipediaPool, get_spec, intervene_traces
from recovery.run_config import InterventionsConfig
from recovery.toy import heldout_problems, write_trace
from recovery.types import Intervened, Problem, Trace


def toy_items(n: int, *, seed: int = 0) -> list[tuple[Problem, Trace]]:
    """The first ``n`` toy held-out problems with the trace the toy task writer gives each (no slips, in the
    shipped tiny reasoner's self-checking style)."""

    return [(p, write_trace(p, seed=seed, slip_rate=0.0, checks=True).as_trace()) for p in heldout_problems(n)]


def rule_based_options(
    names: Sequence[str], wikipedia_pool: str | None, given: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, dict[str, Any]]:
    """The factory options of each named intervention (``given``: the run config's ``interventions.options``);
    LLM-backed ones are refused (no intervention LLM in a training loop), and one that reads a paragraph pool
    gets ``wikipedia_pool`` unless its options hold a ``pool``."""

    options: dict[str, dict[str, Any]] = {}
    for name in names:
        spec = get_spec(name)
        if spec.needs_generator:
            raise ValueError(
                f"intervention {name!r} needs an intervention LLM; inside training use rule-based or toy/* "
                "interventions, or source='run' with chains the benchmark already built"
            )
        options[name] = dict((given or {}).get(name, {}))
        if spec.needs_pool and "pool" not in options[name]:
            if not wikipedia_pool:
                raise ValueError(f"{name} needs wikipedia_pool (a paragraphs file)")
            options[name]["pool"] = WikipediaPool.from_path(wikipedia_pool)
    return options


def build_chains(
    items: Iterable[tuple[Problem, Trace]], cfg: InterventionsConfig, *, skips: Counter | None = None
) -> list[Intervened]:
    """Every intervention of ``cfg`` at each of its timesteps on every trace
    (`recovery.interventions.intervene_traces`), each built with its options, at its seed and minimum steps;
    traces too short or edits that fail are counted in ``skips`` under the intervention package's reasons."""

    skips = skips if skips is not None else Counter()
    options = rule_based_options(cfg.names, cfg.wikipedia_pool, cfg.options)
    settings = ChainSettings.from_names(
        cfg.names, options, timesteps=cfg.timesteps, seed=cfg.seed, min_steps=cfg.min_steps
    )
    chains: list[Intervened] = []
    for outcome in intervene_traces((TraceJob(problem, trace) for problem, trace in items), settings):
        if isinstance(outcome, Produced):
            chains.append(outcome.chain)
        else:
            skips[outcome.reason] += 1
    return chains
