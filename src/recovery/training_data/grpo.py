"""GRPO prompt datasets: intervened prefixes the policy continues as its own reasoning.

One row per intervened chain of a run (optionally plus clean, un-intervened prefixes). ``prompt`` is raw
text already templated with the policy's chat template and ending with the intervened reasoning (see
`recovery.training_data.render` for why a string and not a conversation), so GRPOTrainer's completions
are continuations of exactly that reasoning. A prompt is kept only when GRPOTrainer's tokenization of it is the
benchmark's prompt ids and it fits ``max_prompt_tokens`` (`recovery.training_data.tokens`); rows left out are
counted. The other columns reach the reward functions as keyword arguments (TRL passes every dataset column):

==========================  ======================================================================
``prompt_tokens``            the prompt's length in the policy's tokens (its ids are the benchmark's)
``answer``, ``answer_type``  reference answer and how it is compared (`recovery.types.AnswerType`)
``domain``, ``source``       problem domain and dataset (``toy/arith``, ``bbh/...``)
``intervention``             registry name (``none`` for clean rows); ``category`` its category (``clean``)
``timestep``                 the target timestep t of the cut; ``actual_t`` where the cut landed
``reference_length``         characters of the original reasoning after the cut — what a clean
                             continuation would cost (the length reward's reference)
``reference_tokens``         the same in the policy tokenizer's tokens
``kept_prefix_chars``        prefix characters that are the model's own (prefix minus inserted text)
``original_reasoning_chars`` the whole original reasoning (for the paper's whole-CoT overhead)
``problem_id``, ``chain_id``, ``trace_id``, ``model``, ``kind`` (``intervened`` / ``clean``)
==========================  ======================================================================
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recovery.ids import content_id
from recovery.segment import DEFAULT_MIN_STEPS
from recovery.training_data.clean import CleanCut, clean_count, pick_clean_cuts
from recovery.training_data.decontam import EvalSet
from recovery.training_data.drops import Drops
from recovery.training_data.render import PromptRenderer
from recovery.training_data.source import RunData, load_run
from recovery.training_data.tokens import STAGE as TOKENS_STAGE
from recovery.training_data.tokens import TokenBudget, grpo_prompt_tokens
from recovery.types import Intervened, Problem

Renderers = PromptRenderer | Mapping[str, PromptRenderer]
GRPO_COLUMNS: tuple[str, ...] = (
    "prompt",
    "prompt_tokens",
    "answer",
    "answer_type",
    "domain",
    "source",
    "intervention",
    "category",
    "timestep",
    "actual_t",
    "reference_length",
    "reference_tokens",
    "kept_prefix_chars",
    "original_reasoning_chars",
    "problem_id",
    "chain_id",
    "trace_id",
    "model",
    "kind",
)


@dataclass
class GRPOPromptConfig:
    """Which chains become prompts. ``clean_fraction`` of the final rows are clean prefixes, cut at
    ``clean_timesteps`` (0.0 = from the start) from the traces the benchmark kept. A prompt longer than
    ``max_prompt_tokens`` of the policy's tokens is dropped (None: no bound)."""

    interventions: list[str] | None = None  # None: all
    categories: list[str] | None = None
    models: list[str] | None = None
    clean_fraction: float = 0.0
    clean_timesteps: list[float] = field(default_factory=lambda: [0.1, 0.3, 0.5, 0.7, 0.9])
    min_steps: int = DEFAULT_MIN_STEPS
    seed: int = 0
    dedup: bool = True
    max_prompt_tokens: int | None = None
    # Only chains whose share of correct continuations in the run lies in [low, high] (None: every chain).
    success_between: tuple[float, float] | None = None
    # Only intervened chains cut at these timesteps (None: every one); clean prefixes keep clean_timesteps.
    timesteps: list[float] | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.clean_fraction < 1.0:
            raise ValueError(f"clean_fraction must lie in [0, 1), got {self.clean_fraction}")
        if self.success_between is not None:
            low, high = self.success_between
            if not 0.0 <= low <= high <= 1.0:
                raise ValueError(f"success_between must be [low, high] within [0, 1], got {self.success_between}")
        self.budget  # noqa: B018 - validates the budget

    @property
    def budget(self) -> TokenBudget:
        return TokenBudget(max_prompt_tokens=self.max_prompt_tokens)


@dataclass
class BuiltRows:
    """Rows of a training dataset with the counts of everything left out."""

    rows: list[dict[str, Any]]
    drops: Drops = field(default_factory=Drops)

    def to_dataset(self, columns: tuple[str, ...] | None = None):
        """The rows as a `datasets.Dataset` (columns in a stable order, even when empty)."""
        from datasets import Dataset

        if not self.rows:
            return Dataset.from_dict({c: [] for c in columns or ()})
        return Dataset.from_list(self.rows)


def renderer_for(renderers: Renderers, model: str) -> PromptRenderer | None:
    if isinstance(renderers, PromptRenderer):
        return renderers
    return renderers.get(model)


def _base_row(problem: Problem) -> dict[str, Any]:
    return {
        "answer": problem.answer,
        "answer_type": str(problem.answer_type),
        "domain": problem.domain,
        "source": problem.source,
        "problem_id": problem.id,
    }


def chain_row(chain: Intervened, problem: Problem, renderer: PromptRenderer, reasoning: str | None) -> dict[str, Any]:
    """The GRPO row for one intervened chain (``reasoning``: the original trace's, for token counts)."""
    remaining = chain.original_reasoning_chars - chain.original_prefix_chars
    tokens = renderer.count_tokens(reasoning[chain.original_prefix_chars :]) if reasoning is not None else None
    return {
        "prompt": renderer.render(problem, chain.prefix),
        **_base_row(problem),
        "intervention": chain.intervention,
        "category": str(chain.category),
        "timestep": float(chain.target_t),
        "actual_t": float(chain.actual_t),
        "reference_length": remaining,
        "reference_tokens": tokens,
        "kept_prefix_chars": len(chain.prefix) - len(chain.inserted_text),
        "original_reasoning_chars": chain.original_reasoning_chars,
        "chain_id": chain.id,
        "trace_id": chain.trace_id,
        "model": chain.model,
        "kind": "intervened",
    }


def clean_row(cut: CleanCut, problem: Problem, renderer: PromptRenderer) -> dict[str, Any]:
    """The GRPO row for a clean (un-intervened) prefix."""
    trace = cut.trace
    return {
        "prompt": renderer.render(problem, cut.prefix),
        **_base_row(problem),
        "intervention": "none",
        "category": "clean",
        "timestep": float(cut.target_t),
        "actual_t": float(cut.actual_t),
        "reference_length": cut.reference_length,
        "reference_tokens": renderer.count_tokens(trace.reasoning[len(cut.prefix) :]),
        "kept_prefix_chars": len(cut.prefix),
        "original_reasoning_chars": len(trace.reasoning),
        "chain_id": cut.id,
        "trace_id": trace.id,
        "model": trace.model,
        "kind": "clean",
    }


def usable_chains(
    run: RunData, renderers: Renderers, config: Any, eval_set: EvalSet | None, drops: Drops
) -> list[Intervened]:
    """The run's chains a builder turns into rows, in run order.

    Restricted to ``config``'s ``interventions`` / ``categories`` / ``models`` (choices, not drops); a chain
    whose problem the run lacks, whose problem ``eval_set`` holds (decontamination) or whose model has no
    renderer is left out and counted in ``drops``.
    """
    selected: list[Intervened] = []
    for chain in run.chains:
        if config.interventions is not None and chain.intervention not in config.interventions:
            continue
        if config.categories is not None and str(chain.category) not in config.categories:
            continue
        if config.models is not None and chain.model not in config.models:
            continue
        if chain.problem_id not in run.problems:
            drops.add("chains", "missing_problem")
            continue
        selected.append(chain)
    out: list[Intervened] = []
    for chain in selected:
        if eval_set is not None and (reason := eval_set.reason(run.problems[chain.problem_id])):
            drops.add("decontam", reason)
        elif renderer_for(renderers, chain.model) is None:
            drops.add("chains", "no_renderer_for_model")
        else:
            out.append(chain)
    return out


def dedup_rows(rows: list[dict[str, Any]], keys: tuple[str, ...], drops: Drops, reason: str = "duplicate") -> list:
    """Keep the first row of each distinct ``keys`` content (hashed); count the rest."""
    seen: set[str] = set()
    out = []
    for row in rows:
        digest = content_id("dedup", *(row[k] for k in keys))
        if digest in seen:
            drops.add("dedup", reason)
            continue
        seen.add(digest)
        out.append(row)
    return out


def grpo_rows(
    run: str | Path | RunData,
    renderers: Renderers,
    config: GRPOPromptConfig | None = None,
    *,
    eval_set: EvalSet | None = None,
) -> BuiltRows:
    """The GRPO prompt rows of a run, with drop counts (see `build_grpo_dataset`)."""
    config = config or GRPOPromptConfig()
    data = load_run(run)
    drops = Drops()
    rows: list[dict[str, Any]] = []
    for chain in usable_chains(data, renderers, config, eval_set, drops):
        if config.timesteps is not None and not any(math.isclose(chain.target_t, t) for t in config.timesteps):
            continue  # a choice, like interventions: not counted as a drop
        if config.success_between is not None and (reason := _outside_success(data, chain, config.success_between)):
            drops.add("outcome", reason)
            continue
        trace = data.traces.get(chain.trace_id)
        renderer = renderer_for(renderers, chain.model)
        problem = data.problems[chain.problem_id]
        row = chain_row(chain, problem, renderer, trace.reasoning if trace else None)
        tokens = grpo_prompt_tokens(renderer, problem, chain.prefix, row["prompt"], config.budget)
        if isinstance(tokens, str):
            drops.add(TOKENS_STAGE, tokens)
            continue
        rows.append({"prompt": row["prompt"], "prompt_tokens": tokens, **row})
    if config.dedup:
        rows = dedup_rows(rows, ("prompt",), drops, "duplicate_prompt")
    n_clean = clean_count(len(rows), config.clean_fraction)
    if n_clean:
        rows += _clean_rows(data, renderers, config, eval_set, drops, n_clean, {r["prompt"] for r in rows})
    return BuiltRows(rows, drops)


def _outside_success(data: RunData, chain: Intervened, between: tuple[float, float]) -> str | None:
    """Why ``chain`` is left out by its group's outcome in the run (its share of correct continuations
    outside ``between``, or no graded continuation), or None when it is kept. GRPO learns only from groups
    whose completions disagree; the run's own continuations of the chain say how often it succeeds."""
    verdicts = [c.verdict for c in data.continuations.get(chain.id, ()) if c.verdict is not None]
    if not verdicts:
        return "no_graded_continuations"
    share = sum(v == "correct" for v in verdicts) / len(verdicts)
    low, high = between
    if share < low:
        return "success_below_range"
    if share > high:
        return "success_above_range"
    return None


def clean_cuts(
    data: RunData,
    renderers: Renderers,
    config: Any,
    eval_set: EvalSet | None,
    drops: Drops,
    n: int,
    accept: Callable[[CleanCut], bool],
) -> list[CleanCut]:
    """Up to ``n`` clean cuts of the run's kept traces of ``config.models`` that have a renderer, at
    ``config.clean_timesteps`` (seeded by ``config.seed``, `pick_clean_cuts`); a cut whose problem
    ``eval_set`` holds is dropped (``decontam``) before the builder's ``accept`` sees it."""
    traces = [t for t in data.clean_traces(config.models) if renderer_for(renderers, t.model) is not None]

    def decontaminated(cut: CleanCut) -> bool:
        problem = data.problems[cut.trace.problem_id]
        if eval_set is not None and (reason := eval_set.reason(problem)):
            drops.add("decontam", reason)
            return False
        return accept(cut)

    return pick_clean_cuts(
        traces,
        config.clean_timesteps,
        n,
        seed=config.seed,
        min_steps=config.min_steps,
        drops=drops,
        stage="clean",
        accept=decontaminated,
    )


def _clean_rows(data, renderers, config, eval_set, drops, n, taken: set[str]) -> list[dict[str, Any]]:
    lengths: dict[str, int] = {}

    def accept(cut: CleanCut) -> bool:
        renderer = renderer_for(renderers, cut.trace.model)
        problem = data.problems[cut.trace.problem_id]
        prompt = renderer.render(problem, cut.prefix)
        if config.dedup and prompt in taken:
            drops.add("dedup", "duplicate_prompt")
            return False
        tokens = grpo_prompt_tokens(renderer, problem, cut.prefix, prompt, config.budget)
        if isinstance(tokens, str):
            drops.add(TOKENS_STAGE, tokens)
            return False
        taken.add(prompt)
        lengths[cut.id] = tokens
        return True

    cuts = clean_cuts(data, renderers, config, eval_set, drops, n, accept)
    rows = []
    for cut in cuts:
        row = clean_row(cut, data.problems[cut.trace.problem_id], renderer_for(renderers, cut.trace.model))
        rows.append({"prompt": row["prompt"], "prompt_tokens": lengths[cut.id], **row})
    return rows


def build_grpo_dataset(
    run: str | Path | RunData,
    renderers: Renderers,
    config: GRPOPromptConfig | None = None,
    *,
    eval_set: EvalSet | None = None,
):
    """A `datasets.Dataset` of GRPO prompts from a run directory's chains (columns: module doc).

    ``renderers`` is one `PromptRenderer` (the policy's template) or one per model name.
    Use `grpo_rows` to also get the drop counts.
    """
    return grpo_rows(run, renderers, config, eval_set=eval_set).to_dataset(GRPO_COLUMNS)
