"""The probe dataset: clean prefixes cut from a model's kept traces, intervened prefixes from its chains,
and each prefix's prompt token ids (the run's continuation prompt of that prefix, under its protocol)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recovery.analysis.activation_probes.config import ProbeConfig
from recovery.ids import content_id, item_rng
from recovery.plan import ContinuationRequests, plan_for
from recovery.prompt_building import request_prompt_ids
from recovery.run_dir import open_run
from recovery.segment import join_steps, split_steps

if TYPE_CHECKING:
    from recovery.run_config import RunConfig

#: The group name of the non-intervened prefixes (label 0).
CLEAN = "none"
#: Appended after the final step, as in the paper ("we also append \n\n immediately after R_k").
THOUGHT_BREAK = "\n\n"


@dataclass(frozen=True, slots=True)
class ProbeExample:
    """One prefix of the probe dataset. ``group`` is the intervention (or `CLEAN`); ``label`` 1 = intervened.

    ``prefix`` is the reasoning the model is pre-filled with, already ending with `THOUGHT_BREAK`.
    """

    id: str
    group: str
    label: int
    model: str
    trace_id: str
    problem_id: str
    chain_id: str  # "" for clean prefixes
    cut_index: int
    prefix: str


def _with_break(prefix: str) -> str:
    # A prefix that already ends with a blank line (an append-Wait ablation never does) gets no second one.
    return prefix if prefix.endswith(THOUGHT_BREAK) else prefix + THOUGHT_BREAK


def build_probe_dataset(
    run_dir: str | Path, config: ProbeConfig, *, min_steps: int = 1
) -> tuple[list[ProbeExample], Counter]:
    """The probe dataset of one model of ``run_dir``: clean prefixes first, then each intervention's.

    Clean prefixes come from the model's kept traces (all its traces when the run has no filter table),
    cut at a random step boundary that keeps ≥ ``min_steps`` steps; intervened prefixes are the stored
    chains. Everything is drawn with `recovery.ids.item_rng` from ``config.seed``, so the same run and seed
    give the same dataset. Returns the examples and a counter of skipped items by reason.
    """

    run = open_run(run_dir)
    chains = run.tables.chains
    if not chains.exists():
        raise FileNotFoundError(f"{run_dir}: no chains table; run the pipeline's chains stage first")
    cols = ["id", "trace_id", "problem_id", "model", "intervention", "cut_index", "prefix"]
    rows = chains.read(cols).to_pylist()
    model = _pick_model(run_dir, config.model, {r["model"] for r in rows})
    rows = [r for r in rows if r["model"] == model]
    present = sorted({r["intervention"] for r in rows})
    wanted = list(config.interventions) if config.interventions else present
    missing = [name for name in wanted if name not in present]
    if missing:
        raise ValueError(f"{run_dir}: no chains of model {model!r} for intervention(s) {missing}; present: {present}")
    skips: Counter = Counter()

    kept = None
    if run.tables.kept.exists():
        kept = {r["id"] for r in run.kept_rows(["id", "kept", "model"]) if r["kept"] and r["model"] == model}
    traces = [t for t in run.traces(kept).values() if t.model == model]
    traces.sort(key=lambda t: t.id)
    rng = item_rng(config.seed, "probes", "clean", model)
    cuts: dict[str, list[int]] = {}
    steps_of = {}
    for trace in traces:
        steps_of[trace.id] = split_steps(trace.reasoning)
        n_steps = len(steps_of[trace.id])
        if n_steps < min_steps:
            skips["clean/too_few_steps"] += 1
            continue
        # Never the whole reasoning when a shorter prefix exists: intervened prefixes stop before the end.
        options = list(range(min_steps - 1, max(min_steps, n_steps - 1)))
        rng.shuffle(options)
        cuts[trace.id] = options
    order = [t for t in traces if t.id in cuts]
    rng.shuffle(order)
    examples: list[ProbeExample] = []
    while len(examples) < config.n_clean and any(cuts[t.id] for t in order):
        for trace in order:
            if len(examples) >= config.n_clean:
                break
            if not cuts[trace.id]:
                continue
            k = cuts[trace.id].pop()
            prefix = _with_break(join_steps(steps_of[trace.id][: k + 1]))
            examples.append(
                ProbeExample(
                    content_id("probe-example", CLEAN, trace.id, k),
                    CLEAN,
                    0,
                    model,
                    trace.id,
                    trace.problem_id,
                    "",
                    k,
                    prefix,
                )
            )
    if len(examples) < config.n_clean:
        skips["clean/fewer_cuts_than_asked"] += config.n_clean - len(examples)

    for name in wanted:
        group = sorted((r for r in rows if r["intervention"] == name), key=lambda r: r["id"])
        picked = item_rng(config.seed, "probes", name, model).sample(group, min(config.n_per_intervention, len(group)))
        if len(picked) < config.n_per_intervention:
            skips[f"{name}/fewer_chains_than_asked"] += config.n_per_intervention - len(picked)
        for r in picked:
            if not isinstance(r["prefix"], str) or not r["prefix"].strip():
                skips[f"{name}/empty_prefix"] += 1
                continue
            examples.append(
                ProbeExample(
                    content_id("probe-example", name, r["id"]),
                    name,
                    1,
                    model,
                    r["trace_id"],
                    r["problem_id"],
                    r["id"],
                    int(r["cut_index"]),
                    _with_break(r["prefix"]),
                )
            )
    return examples, skips


def _pick_model(run_dir: Any, wanted: str | None, present: set[str]) -> str:
    if wanted is not None:
        if wanted not in present:
            raise ValueError(f"{run_dir}: no chains of model {wanted!r}; models with chains: {sorted(present)}")
        return wanted
    if len(present) != 1:
        raise ValueError(f"{run_dir}: chains of {len(present)} models {sorted(present)}; choose one (--model)")
    return next(iter(present))


def probe_prompts(
    examples: Sequence[ProbeExample], tokenizer: Any, spec: Any, run_config: RunConfig, problems: dict[str, Any]
) -> list[list[int]]:
    """Token ids per example: the prompt the run would continue the prefix from (its continuation request,
    `ContinuationRequests`, as `request_prompt_ids` feeds it to the model: the chat + think opener + prefix, or
    under ``protocol: reference`` the authors' prompt)."""

    requests = ContinuationRequests(plan_for(run_config))
    prompts = []
    for ex in examples:
        problem = problems.get(ex.problem_id)
        if problem is None:
            raise KeyError(f"probe example {ex.id}: problem {ex.problem_id!r} is not in the problems table")
        request = requests.request(ex.id, problem, ex.prefix)
        prompts.append(request_prompt_ids(tokenizer, spec, request))
    return prompts
