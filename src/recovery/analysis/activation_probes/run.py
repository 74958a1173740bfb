"""`run_probes`: dataset → activations → probes, then the raw results and the section written to the run."""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from recovery.analysis.activation_probes.activations import load_probe_model, record_residuals
from recovery.analysis.activation_probes.config import ANALYSIS_NAME, ProbeConfig
from recovery.analysis.activation_probes.dataset import CLEAN, build_probe_dataset, probe_prompts
from recovery.analysis.activation_probes.report import probes_section
from recovery.analysis.activation_probes.training import activation_summary, probe_accuracies
from recovery.analysis.parquet_io import write_parquet_rows
from recovery.report.sections_store import analysis_dir, save_section
from recovery.run_dir import open_run
from recovery.store import atomic_write_bytes, atomic_write_text


@dataclass
class ProbeResult:
    """What `run_probes` produced: per-(layer, intervention) rows, counts, and where it wrote them."""

    model: str
    rows: list[dict[str, Any]]
    counts: dict[str, int]
    skips: dict[str, int]
    out_dir: Path
    meta: dict[str, Any] = field(default_factory=dict)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "model"


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
    config = config or ProbeConfig()
    run = open_run(run_dir)
    run_config = run.config
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
    prompts = probe_prompts(examples, tokenizer, spec, run_config, run.problems())
    context = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    limit = config.max_prompt_tokens or context
    truncated = 0
    if limit:
        for i, ids in enumerate(prompts):
            if len(ids) > limit:
                prompts[i] = ids[-limit:]  # keep the end: the final token is what is probed
                truncated += 1
    pad_id = next((v for v in (tokenizer.pad_token_id, tokenizer.eos_token_id) if v is not None), 0)
    activations = record_residuals(
        model, prompts, batch_size=config.batch_size, pad_id=pad_id, progress=config.progress
    )
    rows = probe_accuracies(activations, examples, config, skips)

    out = analysis_dir(run_dir, ANALYSIS_NAME) / _slug(model_name)
    group_counts = Counter(ex.group for ex in examples)
    write_parquet_rows(
        out / "examples.parquet",
        [
            {
                "id": ex.id,
                "group": ex.group,
                "label": ex.label,
                "trace_id": ex.trace_id,
                "problem_id": ex.problem_id,
                "chain_id": ex.chain_id,
                "cut_index": ex.cut_index,
                "prompt_tokens": len(p),
            }
            for ex, p in zip(examples, prompts, strict=True)
        ],
    )
    write_parquet_rows(out / "accuracies.parquet", rows)
    write_parquet_rows(out / "activation_summary.parquet", activation_summary(activations, examples))
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
