"""Linear probes on residual-stream activations: does a model's hidden state tell an intervened prefix
from its own, untouched reasoning? (paper App. C, Fig. 12)

Protocol (paper App. C): a dataset of prefixes that end at a random step boundary of a non-intervened
trace (label 0, group ``"none"``) and of intervened prefixes (label 1), 600 + 600 per intervention; a
blank line (``"\\n\\n"``) is appended after the final step so the activations are read "just before the
start of a new thought". Each prefix is pre-filled after the model's chat prompt (template + think opener,
`recovery.models.build_prompt_ids`); the **pre-attention residual stream of the final token** is recorded
at every decoder layer with forward pre-hooks (the input of layer ``l`` is the residual ``h^(l)``; layer 0
sees the token embeddings). One logistic-regression probe per (layer, intervention) is trained on a
seeded, stratified 80/20 split (paper: 960 train, 240 test) and its test accuracy reported.

Choices the paper leaves open, made here and stated in the report section:

- clean prefixes are drawn trace by trace (round robin over the shuffled traces, a random unused cut
  each), so long traces do not dominate; a cut keeps at least ``interventions.min_steps`` steps and never
  the whole reasoning (the intervened prefixes stop before the end too), unless the trace has no other;
- when an intervention has fewer chains than asked, the probe uses as many clean prefixes as intervened
  ones, so chance stays 0.5 (the table shows the test set's majority share as ``chance``);
- features are standardised before the (L2, C=1) logistic regression: residual streams of real models
  have a few dimensions with huge norms that would otherwise dominate the optimisation;
- prompts longer than ``max_prompt_tokens`` (default: the model's context) are truncated **from the
  left**, keeping the end of the prefix that the final token sees; the number truncated is reported.

Raw results go to ``RUN_DIR/analysis/probes/<model>/`` (``examples.parquet``, ``accuracies.parquet``,
``activation_summary.parquet``, ``probes.json``, optionally ``activations.npy``); the report section
"Activation probes" is rebuilt from every model probed so far (`probes_section`).
"""

from __future__ import annotations

import io
import json
import math
import re
import warnings
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from recovery.analysis.sections_store import analysis_dir, save_section
from recovery.ids import content_id, item_rng
from recovery.report.data import Figure, Section, Table, category_of
from recovery.store import RunDir, atomic_write_bytes, atomic_write_text

if TYPE_CHECKING:  # torch and transformers are imported only when activations are recorded
    import torch

    from recovery.pipeline.config import ModelConfig, RunConfig

__all__ = [
    "ANALYSIS_NAME",
    "CLEAN",
    "ProbeConfig",
    "ProbeExample",
    "ProbeResult",
    "ProbeScore",
    "build_probe_dataset",
    "find_decoder_layers",
    "probe_accuracies",
    "probe_figure",
    "probe_prompts",
    "probes_section",
    "record_residuals",
    "run_probes",
    "split_indices",
    "train_probe",
]

ANALYSIS_NAME = "probes"
SECTION_TITLE = "Activation probes"
#: The group name of the non-intervened prefixes (label 0).
CLEAN = "none"
#: Appended after the final step, as in the paper ("we also append \n\n immediately after R_k").
THOUGHT_BREAK = "\n\n"


@dataclass
class ProbeConfig:
    """What `run_probes` does. Defaults follow the paper (App. C): 600 + 600 per intervention, 80/20."""

    model: str | None = None  # the run's model to probe; default: the only model with chains
    interventions: list[str] | None = None  # default: every intervention in the chains table
    n_clean: int = 600
    n_per_intervention: int = 600
    test_fraction: float = 0.2
    seed: int = 0
    batch_size: int = 8
    max_prompt_tokens: int | None = None  # default: the model's context length
    C: float = 1.0  # inverse L2 strength of the logistic regression (sklearn's default)
    max_iter: int = 2000
    save_activations: bool = False  # also write activations.npy (float16, layers × examples × width)
    progress: bool = True

    def __post_init__(self) -> None:
        if self.n_clean < 1 or self.n_per_intervention < 1:
            raise ValueError("n_clean and n_per_intervention must be ≥ 1")
        if not 0 < self.test_fraction < 1:
            raise ValueError(f"test_fraction must lie in (0, 1), got {self.test_fraction}")
        if self.batch_size < 1:
            raise ValueError("batch_size must be ≥ 1")
        if self.max_prompt_tokens is not None and self.max_prompt_tokens < 2:
            raise ValueError("max_prompt_tokens must be ≥ 2")


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


@dataclass(frozen=True, slots=True)
class ProbeScore:
    """Accuracy of one probe on its held-out split (and on its training split, to show over-fitting)."""

    accuracy: float
    train_accuracy: float
    n_train: int
    n_test: int
    chance: float  # share of the majority class in the test split
    converged: bool


@dataclass
class ProbeResult:
    """What `run_probes` produced: per-(layer, intervention) rows, counts, and where it wrote them."""

    model: str
    rows: list[dict[str, Any]]
    counts: dict[str, int]
    skips: dict[str, int]
    out_dir: Path
    meta: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------ the dataset


def _with_break(prefix: str) -> str:
    # A prefix that already ends with a blank line (an append-Wait ablation never does) gets no second one.
    return prefix if prefix.endswith(THOUGHT_BREAK) else prefix + THOUGHT_BREAK


def build_probe_dataset(run_dir: str | Path, config: ProbeConfig, *, min_steps: int = 1) -> tuple[list[ProbeExample], Counter]:
    """The probe dataset of one model of ``run_dir``: clean prefixes first, then each intervention's.

    Clean prefixes come from the model's kept traces (all its traces when the run has no filter table),
    cut at a random step boundary that keeps ≥ ``min_steps`` steps; intervened prefixes are the stored
    chains. Everything is drawn with `recovery.ids.item_rng` from ``config.seed``, so the same run and seed
    give the same dataset. Returns the examples and a counter of skipped items by reason.
    """
    from recovery.pipeline.stages import load_traces_table
    from recovery.segment import join_steps, split_steps

    run = RunDir(run_dir)
    chains = run.table("chains")
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

    kept_table = run.table("kept")
    kept = None
    if kept_table.exists():
        kept = {r["id"] for r in kept_table.iter_rows(["id", "kept", "model"]) if r["kept"] and r["model"] == model}
    traces = [t for t in load_traces_table(run, kept).values() if t.model == model]
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
            examples.append(ProbeExample(
                content_id("probe-example", CLEAN, trace.id, k), CLEAN, 0, model, trace.id, trace.problem_id, "", k, prefix,
            ))  # fmt: skip
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
            examples.append(ProbeExample(
                content_id("probe-example", name, r["id"]), name, 1, model, r["trace_id"], r["problem_id"], r["id"],
                int(r["cut_index"]), _with_break(r["prefix"]),
            ))  # fmt: skip
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
    examples: Sequence[ProbeExample], tokenizer: Any, spec: Any, run_config: "RunConfig", problems: dict[str, Any]
) -> list[list[int]]:
    """Token ids per example: the problem's chat prompt + think opener + prefix (`build_prompt_ids`)."""
    from recovery.interventions.base import Message
    from recovery.models import build_prompt_ids
    from recovery.pipeline.stages import user_prompt

    prompts = []
    for ex in examples:
        problem = problems.get(ex.problem_id)
        if problem is None:
            raise KeyError(f"probe example {ex.id}: problem {ex.problem_id!r} is not in the problems table")
        messages = (Message("user", user_prompt(run_config, problem)),)
        prompts.append(build_prompt_ids(tokenizer, spec, messages, ex.prefix))
    return prompts


# ---------------------------------------------------------------------------------------- activations


def find_decoder_layers(model: Any):
    """The decoder layers (an ``nn.ModuleList``) of a causal LM, found generically.

    Known layouts first (Llama/Qwen/Mistral/Phi ``model.layers``, GPT-2 ``transformer.h``, GPT-NeoX
    ``gpt_neox.layers``, OPT ``model.decoder.layers``); otherwise the only ``ModuleList`` whose length is the
    config's ``num_hidden_layers``. Raises `ValueError` when none (or several) qualify.
    """
    from torch import nn

    for path in ("model.layers", "transformer.h", "gpt_neox.layers", "model.decoder.layers", "model.language_model.layers"):
        obj = model
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if isinstance(obj, nn.ModuleList) and len(obj) > 0:
            return obj
    config = getattr(model, "config", None)
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    n_layers = getattr(text_config, "num_hidden_layers", None)
    found = [m for _, m in model.named_modules() if isinstance(m, nn.ModuleList) and n_layers and len(m) == n_layers]
    if len(found) != 1:
        raise ValueError(
            f"cannot find the decoder layers of {type(model).__name__}: {len(found)} ModuleList(s) of length "
            f"num_hidden_layers={n_layers}"
        )
    return found[0]


def record_residuals(
    model: Any,
    prompts: Sequence[Sequence[int]],
    *,
    batch_size: int = 8,
    pad_id: int = 0,
    progress: bool = False,
) -> np.ndarray:
    """The pre-layer residual stream of each prompt's final token at every decoder layer.

    Returns float32 ``[n_layers, n_prompts, hidden]``: entry ``[l, i]`` is the input of decoder layer ``l``
    (what its attention block reads, before its input norm) at the last token of prompt ``i``. Recorded
    with forward pre-hooks, in batches sorted by length (less padding), left-padded with explicit position
    ids so padding changes neither positions nor attention; no gradients. Prompts are used as given (see
    `run_probes` for truncation).
    """
    import torch
    from tqdm.auto import tqdm

    if not prompts:
        raise ValueError("record_residuals needs at least one prompt")
    empty = [i for i, p in enumerate(prompts) if len(p) == 0]
    if empty:
        raise ValueError(f"prompt(s) {empty[:5]} are empty")
    layers = find_decoder_layers(model)
    # The body without the LM head: the head's logits (vocabulary × tokens) are never needed here.
    body = getattr(model, "base_model", model)
    device = next(model.parameters()).device
    captured: list[torch.Tensor | None] = [None] * len(layers)

    def hook_for(index: int):
        def hook(module, args, kwargs):
            hidden = args[0] if args else kwargs["hidden_states"]
            captured[index] = hidden[:, -1, :].detach().to(torch.float32).cpu()

        return hook

    handles = [layer.register_forward_pre_hook(hook_for(i), with_kwargs=True) for i, layer in enumerate(layers)]
    order = sorted(range(len(prompts)), key=lambda i: (len(prompts[i]), i))
    out: np.ndarray | None = None
    try:
        with torch.inference_mode():
            bar = tqdm(total=len(order), desc="activations", unit="prefix", disable=not progress, dynamic_ncols=True)
            for start in range(0, len(order), batch_size):
                rows = order[start : start + batch_size]
                width = max(len(prompts[i]) for i in rows)
                ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
                mask = torch.zeros((len(rows), width), dtype=torch.long)
                for r, i in enumerate(rows):  # left padding: every prompt's last token sits at column -1
                    ids[r, width - len(prompts[i]) :] = torch.tensor(list(prompts[i]), dtype=torch.long)
                    mask[r, width - len(prompts[i]) :] = 1
                positions = (mask.cumsum(-1) - 1).clamp(min=0)
                captured[:] = [None] * len(layers)
                body(input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=positions.to(device),
                     use_cache=False)  # fmt: skip
                if any(c is None for c in captured):
                    raise RuntimeError("a decoder layer was not called; cannot record its residual stream")
                if out is None:
                    out = np.empty((len(layers), len(prompts), captured[0].shape[-1]), dtype=np.float32)
                for layer_index, values in enumerate(captured):
                    out[layer_index, rows] = values.numpy()
                bar.update(len(rows))
            bar.close()
    finally:
        for handle in handles:
            handle.remove()
    assert out is not None
    return out


# --------------------------------------------------------------------------------------------- probes


def split_indices(labels: Sequence[int], test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A seeded, stratified train/test split of ``range(len(labels))`` (the same for every layer)."""
    from sklearn.model_selection import train_test_split

    index = np.arange(len(labels))
    train, test = train_test_split(index, test_size=test_fraction, random_state=seed, stratify=np.asarray(labels))
    return np.sort(train), np.sort(test)


def train_probe(
    X: np.ndarray, y: Sequence[int], train: np.ndarray, test: np.ndarray, *, C: float = 1.0, max_iter: int = 2000
) -> ProbeScore:
    """Fit a standardised logistic-regression probe on ``X[train]`` and score it on ``X[test]``.

    Deterministic (lbfgs has no randomness), so the same data and split give the same accuracy.
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    y = np.asarray(y)
    if len(set(y[train].tolist())) < 2:
        raise ValueError("the training split holds one class only; a probe needs both")
    probe = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=max_iter))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        probe.fit(X[train], y[train])
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    counts = np.bincount(y[test], minlength=2)
    return ProbeScore(
        accuracy=float(probe.score(X[test], y[test])),
        train_accuracy=float(probe.score(X[train], y[train])),
        n_train=len(train),
        n_test=len(test),
        chance=float(counts.max() / counts.sum()),
        converged=converged,
    )


def probe_accuracies(
    activations: np.ndarray, examples: Sequence[ProbeExample], config: ProbeConfig, skips: Counter | None = None
) -> list[dict[str, Any]]:
    """One row per (intervention, layer): the probe of that intervention's prefixes against clean ones.

    Each probe uses as many clean prefixes as intervened ones (the first ones drawn), so the classes are
    balanced; an intervention with too few examples for a stratified split is skipped and counted.
    """
    skips = skips if skips is not None else Counter()
    clean = [i for i, ex in enumerate(examples) if ex.group == CLEAN]
    groups: dict[str, list[int]] = {}
    for i, ex in enumerate(examples):
        if ex.group != CLEAN:
            groups.setdefault(ex.group, []).append(i)
    rows: list[dict[str, Any]] = []
    for name, members in groups.items():
        n = min(len(clean), len(members))
        index = np.asarray(clean[:n] + members[:n])
        labels = [0] * n + [1] * n
        try:
            train, test = split_indices(labels, config.test_fraction, config.seed)
        except ValueError:  # sklearn: a stratified split needs ≥ 1 example of each class on each side
            skips[f"{name}/too_few_examples_for_a_split"] += 1
            continue
        category = category_of(name)
        for layer in range(activations.shape[0]):
            score = train_probe(activations[layer, index], labels, train, test, C=config.C, max_iter=config.max_iter)
            rows.append({"model": examples[members[0]].model, "intervention": name, "category": category,
                         "layer": layer, **asdict(score)})  # fmt: skip
    return rows


def activation_summary(activations: np.ndarray, examples: Sequence[ProbeExample]) -> list[dict[str, Any]]:
    """Per (layer, group): how many prefixes, and the mean / std of their residual norms, plus the distance
    between the group's mean activation and the clean one (what a probe can at least exploit)."""
    groups = sorted({ex.group for ex in examples}, key=lambda g: (g != CLEAN, g))
    members = {g: np.asarray([i for i, ex in enumerate(examples) if ex.group == g]) for g in groups}
    rows = []
    for layer in range(activations.shape[0]):
        clean_mean = activations[layer, members[CLEAN]].mean(0) if CLEAN in members else None
        for g in groups:
            values = activations[layer, members[g]]
            norms = np.linalg.norm(values, axis=1)
            distance = float(np.linalg.norm(values.mean(0) - clean_mean)) if clean_mean is not None else math.nan
            rows.append({"layer": layer, "group": g, "n": len(values), "mean_norm": float(norms.mean()),
                         "std_norm": float(norms.std()), "mean_distance_to_clean": distance})  # fmt: skip
    return rows


# ------------------------------------------------------------------------------------------ running it


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "model"


def _write_parquet(path: Path, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf, compression="zstd")
    atomic_write_bytes(path, buf.getvalue())


def load_probe_model(model_config: "ModelConfig", *, path: str | None = None, device: str | None = None):
    """``(model, tokenizer, spec)`` for a run's model: the shipped tiny reasoner or an HF checkpoint.

    Activations need the weights in this process, so API-served models need a local ``path``.
    """
    from recovery.models import get_spec, spec_for
    from recovery.pipeline.backend import TINY_REASONER

    path = path or model_config.path
    device = device or model_config.device
    if path in (None, TINY_REASONER):
        from recovery.toy import load_tiny_reasoner

        model, tokenizer = load_tiny_reasoner(device=device or "cpu")
        return model, tokenizer, get_spec(model_config.spec or TINY_REASONER)
    if model_config.backend == "openai" and path == model_config.name and not Path(path).exists():
        raise ValueError(f"model {model_config.name!r} is served over an API; pass a local checkpoint path")
    from recovery.backends.hf import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer(path, dtype=model_config.dtype, device=device)
    spec = get_spec(model_config.spec) if model_config.spec else spec_for(path, tokenizer)
    return model, tokenizer, spec


def run_probes(
    run_dir: str | Path,
    config: ProbeConfig | None = None,
    *,
    loaded: tuple[Any, Any, Any] | None = None,
    model_path: str | None = None,
    device: str | None = None,
) -> ProbeResult:
    """Build the dataset, record activations, train every probe, write the results and the section.

    ``loaded`` = ``(model, tokenizer, spec)`` reuses a model already in memory (tests, notebooks); else it
    is loaded from the run's model config (``model_path`` / ``device`` override it).
    """
    from recovery.pipeline.run import load_run_config_from_dir
    from recovery.pipeline.stages import load_problems_table

    config = config or ProbeConfig()
    run_config = load_run_config_from_dir(run_dir)
    examples, skips = build_probe_dataset(run_dir, config, min_steps=run_config.interventions.min_steps)
    if not any(ex.group == CLEAN for ex in examples):
        raise ValueError(f"{run_dir}: no clean prefixes could be drawn (no kept traces with enough steps)")
    model_name = examples[0].model
    if loaded is None:
        model_config = next((m for m in run_config.models if m.name == model_name), None)
        if model_config is None:
            raise ValueError(f"{run_dir}: model {model_name!r} of the chains is not in the run config")
        loaded = load_probe_model(model_config, path=model_path, device=device)
    model, tokenizer, spec = loaded
    prompts = probe_prompts(examples, tokenizer, spec, run_config, load_problems_table(RunDir(run_dir)))
    context = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    limit = config.max_prompt_tokens or context
    truncated = 0
    if limit:
        for i, ids in enumerate(prompts):
            if len(ids) > limit:
                prompts[i] = ids[-limit:]  # keep the end: the final token is what is probed
                truncated += 1
    pad_id = next((v for v in (tokenizer.pad_token_id, tokenizer.eos_token_id) if v is not None), 0)
    activations = record_residuals(model, prompts, batch_size=config.batch_size, pad_id=pad_id, progress=config.progress)
    rows = probe_accuracies(activations, examples, config, skips)

    out = analysis_dir(run_dir, ANALYSIS_NAME) / _slug(model_name)
    group_counts = Counter(ex.group for ex in examples)
    _write_parquet(out / "examples.parquet", [
        {"id": ex.id, "group": ex.group, "label": ex.label, "trace_id": ex.trace_id, "problem_id": ex.problem_id,
         "chain_id": ex.chain_id, "cut_index": ex.cut_index, "prompt_tokens": len(p)}
        for ex, p in zip(examples, prompts, strict=True)
    ])  # fmt: skip
    _write_parquet(out / "accuracies.parquet", rows)
    _write_parquet(out / "activation_summary.parquet", activation_summary(activations, examples))
    if config.save_activations:
        buf = io.BytesIO()
        np.save(buf, activations.astype(np.float16))
        atomic_write_bytes(out / "activations.npy", buf.getvalue())
    meta = {
        "model": model_name,
        "n_layers": int(activations.shape[0]),
        "hidden_size": int(activations.shape[2]),
        "examples": dict(sorted(group_counts.items())),
        "truncated_prompts": truncated,
        "max_prompt_tokens": limit,
        "skips": dict(sorted(skips.items())),
        "config": {k: v for k, v in asdict(config).items() if k != "progress"},
    }
    atomic_write_text(out / "probes.json", json.dumps(meta, indent=1, sort_keys=True))
    save_section(run_dir, ANALYSIS_NAME, probes_section(run_dir))
    return ProbeResult(model_name, rows, dict(group_counts), dict(skips), out, meta)


# ------------------------------------------------------------------------------------------- reporting


def _stored_results(run_dir: str | Path) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    import pyarrow.parquet as pq

    root = analysis_dir(run_dir, ANALYSIS_NAME)
    results = []
    for meta_path in sorted(root.glob("*/probes.json")):
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        acc_path = meta_path.parent / "accuracies.parquet"
        rows = pq.read_table(acc_path).to_pylist() if acc_path.is_file() else []
        results.append((meta, rows))
    return results


def probe_figure(results: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> Figure:
    """Fig. 12: test accuracy against layer, one line per intervention, one panel per model."""
    from matplotlib.ticker import MaxNLocator

    from recovery.report import figures as rfig

    interventions = sorted({r["intervention"] for _, rows in results for r in rows})
    palette = rfig.model_colors(interventions)  # a stable qualitative colour per intervention
    with rfig._style():  # the report's fonts and sizes
        n = max(len(results), 1)
        cols = min(n, 3)
        fig = rfig.new_figure(figsize=(4.2 * cols, 3.0 * math.ceil(n / cols)))
        for k, (model, rows) in enumerate(results):
            ax = fig.add_subplot(math.ceil(n / cols), cols, k + 1)
            for name in interventions:
                pts = sorted((r["layer"], r["accuracy"]) for r in rows if r["intervention"] == name)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, lw=1.3,
                            color=palette[name], label=name)  # fmt: skip
            ax.axhline(0.5, color="#999999", lw=0.8, ls="--")
            low = min([0.4, *(r["accuracy"] - 0.05 for r in rows)])
            ax.set_ylim(max(low, 0.0), 1.02)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_xlabel("layer (input residual stream)")
            ax.set_ylabel("probe test accuracy")
            ax.set_title(model)
            ax.grid(alpha=0.3)
        handles, labels = fig.axes[0].get_legend_handles_labels() if fig.axes else ([], [])
        if handles:
            fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 4), frameon=False)
        fig.tight_layout(rect=(0, 0.06 + 0.03 * math.ceil(len(interventions) / 4), 1, 1))
        return Figure("probes_accuracy_by_layer", rfig.to_png(fig),
                      "Linear-probe test accuracy by layer: intervened vs clean prefixes (paper Fig. 12).")  # fmt: skip


def probes_section(run_dir: str | Path) -> Section:
    """The "Activation probes" section from every model probed in ``run_dir`` so far."""
    results = _stored_results(run_dir)
    if not results:
        return Section(SECTION_TITLE, "_No probe results stored._")
    summary_rows = []
    detail_tables = []
    notes = []
    for meta, rows in results:
        model = meta["model"]
        layers = sorted({r["layer"] for r in rows})
        for name in sorted({r["intervention"] for r in rows}):
            mine = sorted((r for r in rows if r["intervention"] == name), key=lambda r: r["layer"])
            best = max(mine, key=lambda r: (r["accuracy"], -r["layer"]))
            summary_rows.append((
                model, name, mine[0]["category"], mine[0]["accuracy"], mine[min(1, len(mine) - 1)]["accuracy"],
                best["accuracy"], best["layer"], mine[-1]["accuracy"], f"{mine[0]['n_train']}/{mine[0]['n_test']}",
                mine[0]["chance"],
            ))  # fmt: skip
        names = sorted({r["intervention"] for r in rows})
        by = {(r["intervention"], r["layer"]): r["accuracy"] for r in rows}
        detail_tables.append(Table(
            f"Probe accuracy by layer — {model}", ["layer", *names],
            [(layer, *(by.get((n, layer), math.nan) for n in names)) for layer in layers],
            align=["r"] * (1 + len(names)), collapsed=True,
        ))  # fmt: skip
        ex = ", ".join(f"{g}: {c}" for g, c in meta["examples"].items())
        notes.append(
            f"- **{model}**: {meta['n_layers']} layers × width {meta['hidden_size']}; prefixes per group: {ex}; "
            f"prompts truncated from the left to {meta['max_prompt_tokens']} tokens: {meta['truncated_prompts']}"
            + (f"; skipped: {', '.join(f'{k} ({v})' for k, v in meta['skips'].items())}" if meta["skips"] else "")
        )
    cfg = results[0][0]["config"]
    markdown = (
        "Can a linear classifier on the model's own hidden state tell an intervened reasoning prefix from an "
        "untouched one (paper App. C, Fig. 12)? Each prefix ends at a step boundary followed by a blank line and "
        "is pre-filled after the model's chat prompt; the **pre-attention residual stream of the final token** is "
        "recorded at every decoder layer (layer 0 = token embeddings; as every prompt usually ends in the same "
        "blank-line token, layer 0 sits at chance by construction). Per (layer, intervention), a standardised "
        f"logistic-regression probe is trained on a seeded, stratified {1 - cfg['test_fraction']:.0%}/"
        f"{cfg['test_fraction']:.0%} split of equally many clean and intervened prefixes (paper: 600 + 600, "
        f"960/240; here asked {cfg['n_clean']} clean, {cfg['n_per_intervention']} per intervention, seed "
        f"{cfg['seed']}). Clean prefixes are cut at a random step of the model's kept traces, one trace at a "
        "time. Accuracy 0.5 is chance.\n\n" + "\n".join(notes)
    )
    summary = Table(
        "Probe accuracy (test split)",
        ["model", "intervention", "category", "layer 0", "layer 1", "best", "best layer", "last layer", "train/test", "chance"],
        summary_rows, align=["l", "l", "l", "r", "r", "r", "r", "r", "r", "r"],
        caption="layer 0 reads the token embeddings; layer 1 the residual after the first attention + MLP block.",
    )  # fmt: skip
    figure = probe_figure([(meta["model"], rows) for meta, rows in results])
    return Section(SECTION_TITLE, markdown, (figure,), (summary, *detail_tables))
