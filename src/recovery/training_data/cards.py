"""Hugging Face dataset cards rendered from the Markdown templates shipped in ``recovery/data_cards/``.

One template per exported dataset kind (``recovery/data_cards/<kind>.md``): YAML front matter (license, size,
the Parquet layout for the Hub's viewer) and prose, with ``${name}`` placeholders (`string.Template`) that
`card_context` fills from the run: provenance (run directory, config id, package version, date), models,
interventions and timesteps, decoding, the benchmark's and the builder's filters, row counts and drop
counts with reasons, the columns, and a licence note. Rendering fails loudly on a placeholder without a
value, so a card never ships with ``${...}`` left in it.

Templates are package data, read through `importlib.resources`, so an installed wheel renders the same
cards as a source checkout; ``$RECOVERY_DATA_CARDS`` (or ``directory=``) names a folder of replacements,
and a kind it lacks uses the shipped template.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from recovery.ids import content_id
from recovery.training_data.drops import Drops
from recovery.training_data.source import RunData

_PLACEHOLDER = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?")

# What each exported column means (shown in the card's column table).
COLUMN_DOCS: dict[str, str] = {
    "prompt": "raw-text prompt: chat template + generation prompt (+ think opener) + the prefix to continue",
    "completion": "training target: the continuation after the prefix, verbatim (reasoning, closing tag, answer)",
    "origin": "own (the model's graded sample), teacher, or clean (the model's original trace)",
    "teacher": "name of the teacher that wrote the completion (teacher rows)",
    "kind": "recovery / clean (SFT), intervened / clean (GRPO)",
    "id": "content-addressed record id",
    "problem_id": "problem id (content-addressed: source, question, answer)",
    "trace_id": "original trace id",
    "chain_id": "intervened chain id (clean rows: id of the clean cut)",
    "model": "the model whose reasoning is continued",
    "intervention": "intervention registry name (`none` for clean rows)",
    "category": "benign / neutral / adversarial (`clean` for clean rows)",
    "timestep": "target timestep t of the cut (0.0 = from the start)",
    "target_t": "target timestep t of the cut",
    "actual_t": "timestep where the cut actually landed",
    "question": "problem text",
    "answer": "reference answer",
    "answer_type": "how the answer is compared (numeric, expression, multiple_choice, exact, ...)",
    "domain": "problem domain",
    "source": "problem dataset",
    "text": "full model response / continuation text",
    "reasoning": "reasoning between the think tags",
    "answer_text": "text after the closing think tag",
    "closed": "whether the reasoning was closed",
    "kept": "whether the benchmark's trace filter kept the trace",
    "kept_reason": "the filter's reason",
    "prefix": "intervened reasoning the model resumes from (no opening think tag)",
    "inserted_text": "the text the intervention added",
    "verdict": "grade of the continuation (correct, wrong, no_answer, ...)",
    "correct": "verdict == correct",
    "extracted": "final answer extracted from the continuation",
    "reference_length": "characters of original reasoning after the cut (cost of a clean continuation)",
    "reference_tokens": "the same in the model's tokens",
    "kept_prefix_chars": "prefix characters that are the model's own (prefix minus inserted text)",
    "original_reasoning_chars": "characters of the whole original reasoning",
    "original_prefix_chars": "characters of the un-intervened prefix (steps up to the cut)",
    "completion_chars": "length of the completion in characters",
    "overhead_whole_pct": "paper's CoT-length overhead: whole CoT minus inserted text vs original CoT (%)",
    "overhead_remaining_pct": "completion reasoning vs original reasoning after the cut (%)",
    "doubt": "doubt family found in the first sentences of the completion (empty: none)",
    "sample_index": "index of the sample among the N drawn for the chain",
}


def templates_dir() -> Path | None:
    """The folder of replacement card templates named by ``$RECOVERY_DATA_CARDS``, if any."""
    env = os.environ.get("RECOVERY_DATA_CARDS")
    return Path(env) if env else None


def load_template(kind: str, directory: str | Path | None = None) -> str:
    """The template for ``kind``: from ``directory`` (default `templates_dir`) when it holds one, else the
    one shipped with the package. A kind with no template at all is an error, never a generic card."""
    directory = Path(directory) if directory is not None else templates_dir()
    if directory is not None and (directory / f"{kind}.md").is_file():
        return (directory / f"{kind}.md").read_text(encoding="utf-8")
    shipped = resources.files("recovery") / "data_cards" / f"{kind}.md"
    if not shipped.is_file():
        raise ValueError(f"no dataset card template for {kind!r} (the package ships data_cards/<kind>.md)")
    return shipped.read_text(encoding="utf-8")


def render_card(kind: str, context: Mapping[str, Any], directory: str | Path | None = None) -> str:
    """The card for ``kind`` with every placeholder filled; `ValueError` names any missing value."""
    template = Template(load_template(kind, directory))
    try:
        text = template.substitute({k: str(v) for k, v in context.items()})
    except KeyError as err:
        raise ValueError(f"card template {kind}.md uses ${{{err.args[0]}}}, which has no value") from None
    except ValueError as err:  # a stray "$" in the template
        raise ValueError(f"card template {kind}.md: {err} (write a literal dollar sign as $$)") from None
    return text


def unrendered_placeholders(text: str) -> list[str]:
    """Template placeholders still present in ``text`` (for checks)."""
    return [m.group(0) for m in _PLACEHOLDER.finditer(text) if m.group(0).startswith("${")]


# ------------------------------------------------------------------------------------------- helpers


def md_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table (pipes in cells escaped)."""

    def cell(value: Any) -> str:
        text = "" if value is None else str(value)
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def size_category(n: int) -> str:
    """The Hub's ``size_categories`` bucket for ``n`` rows."""
    for limit, label in (
        (1_000, "n<1K"),
        (10_000, "1K<n<10K"),
        (100_000, "10K<n<100K"),
        (1_000_000, "100K<n<1M"),
        (10_000_000, "1M<n<10M"),
        (100_000_000, "10M<n<100M"),
    ):
        if n < limit:
            return label
    return "n>1T" if n >= 10**12 else "100M<n<1B" if n < 10**9 else "1B<n<10B" if n < 10**10 else "10B<n<100B"


def _fmt(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {v}" for k, v in value.items()) or "—"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "—"
    return "—" if value is None or value == "" else str(value)


def _package_version() -> str:
    try:
        from importlib.metadata import version

        return version("recovery")
    except Exception:  # noqa: BLE001 - a source checkout without metadata
        return "unknown"


# ------------------------------------------------------------------------------------------ sections


def provenance_md(data: RunData, created: str) -> str:
    cfg = data.manifest
    dataset = data.config_section("dataset")
    rows = [
        ("run directory", data.path.name),
        ("run title", cfg.get("title")),
        ("run config id", content_id("run-config", cfg) if cfg else None),
        ("protocol", data.protocol),
        ("problem set", dataset.get("name")),
        ("problem sources", sorted({p.source for p in data.problems.values()})),
        ("domains", sorted({p.domain for p in data.problems.values()})),
        ("problems / traces / chains", f"{len(data.problems)} / {len(data.traces)} / {len(data.chains)}"),
        ("continuations", sum(len(v) for v in data.continuations.values())),
        ("built with", f"recovery {_package_version()}"),
        ("created (UTC)", created),
    ]
    return md_table(["", ""], [(k, _fmt(v)) for k, v in rows])


def models_md(data: RunData) -> str:
    models = [m for m in data.manifest.get("models", []) if isinstance(m, Mapping)]
    if not models:
        return "\n".join(f"- `{name}`" for name in data.models) or "—"
    return md_table(
        ["name", "path", "backend", "spec"],
        [(m.get("name"), m.get("path") or "(default)", m.get("backend"), m.get("spec") or "(auto)") for m in models],
    )


def interventions_md(data: RunData) -> str:
    per: dict[str, list[Any]] = {}
    for chain in data.chains:
        entry = per.setdefault(chain.intervention, [str(chain.category), 0])
        entry[1] += 1
    section = data.config_section("interventions")
    rows = [(name, cat, n) for name, (cat, n) in sorted(per.items())]
    table = md_table(["intervention", "category", "chains"], rows) if rows else "No intervened chains."
    extras = [
        ("timesteps", section.get("timesteps")),
        ("seed", section.get("seed")),
        ("min_steps", section.get("min_steps")),
        ("append_wait", section.get("append_wait")),
        ("repeats", section.get("repeats")),
        (
            "intervention LLM",
            (section.get("llm") or {}).get("name") if isinstance(section.get("llm"), Mapping) else None,
        ),
    ]
    return table + "\n\n" + md_table(["setting", "value"], [(k, _fmt(v)) for k, v in extras])


def decoding_md(data: RunData) -> str:
    traces = data.config_section("traces").get("sampling") or {}
    cont = data.config_section("continuation")
    keys = ("n", "temperature", "top_p", "top_k", "max_new_tokens", "seed")
    return md_table(
        ["", *keys],
        [
            ("original traces", *(_fmt(traces.get(k)) for k in keys)),
            ("continuations", *(_fmt(cont.get(k)) for k in keys)),
        ],
    )


def benchmark_filters_md(data: RunData) -> str:
    filters = data.config_section("traces").get("filters") or {}
    kept = sum(1 for ok, _ in data.kept.values() if ok)
    reasons: dict[str, int] = {}
    for ok, reason in data.kept.values():
        if not ok:
            reasons[reason] = reasons.get(reason, 0) + 1
    lines = [md_table(["benchmark trace filter", "value"], [(k, _fmt(v)) for k, v in filters.items()] or [("—", "—")])]
    lines.append(
        f"\nTraces kept by the benchmark filter: {kept} of {len(data.kept)}"
        + (f" (dropped: {_fmt(reasons)})" if reasons else "")
        + "."
    )
    return "\n".join(lines)


def config_md(title: str, config: Any) -> str:
    """A dataclass (or mapping) of builder settings as a table; nested dataclasses are flattened."""
    from dataclasses import asdict, is_dataclass

    values = asdict(config) if is_dataclass(config) else dict(config or {})
    flat: list[tuple[str, Any]] = []
    for key, value in values.items():
        if isinstance(value, Mapping):
            flat += [(f"{key}.{k}", v) for k, v in value.items()]
        else:
            flat.append((key, value))
    return md_table([title, "value"], [(k, _fmt(v)) for k, v in flat])


def counts_md(counts: Mapping[str, Any], drops: Drops | None) -> str:
    text = md_table(["count", "value"], [(k, _fmt(v)) for k, v in counts.items()])
    if drops is not None:
        rows = drops.rows()
        text += "\n\nLeft out, with reasons:\n\n" + (
            md_table(["stage", "reason", "rows"], [(r["stage"], r["reason"], r["count"]) for r in rows])
            if rows
            else "nothing was left out."
        )
    return text


def columns_md(columns: Mapping[str, str]) -> str:
    """``columns``: name → Arrow/datasets type string."""
    return md_table(["column", "type", "meaning"], [(f"`{n}`", t, COLUMN_DOCS.get(n, "")) for n, t in columns.items()])


def license_for(data: RunData, chosen: str | None) -> tuple[str, str]:
    """The card's ``license`` id and a licence note. A run made only of toy-world problems and toy
    interventions is the package's own generated data (Apache-2.0); anything else inherits the terms of
    its sources, which the note lists, so the id is ``other`` unless the caller chooses one."""
    sources = sorted({p.source for p in data.problems.values()})
    interventions = sorted({c.intervention for c in data.chains})
    models = data.models
    toy_only = (
        bool(sources) and all(s.startswith("toy") for s in sources) and all(i.startswith("toy/") for i in interventions)
    )
    license_id = chosen or ("apache-2.0" if toy_only else "other")
    notes = []
    if toy_only:
        notes.append(
            "Every problem, trace and intervention text was generated by the `recovery` package's toy "
            "world (Apache-2.0); model outputs come from the models listed above."
        )
    else:
        notes.append(
            f"Problems come from: {_fmt(sources)}. Each source dataset keeps its own licence; check "
            "it before redistributing (the data loaders of `recovery` cite their sources)."
        )
    if any(i == "wikipedia_text" for i in interventions):
        notes.append("Inserted Wikipedia paragraphs (`wikipedia_text`) are licensed CC BY-SA 4.0.")
    notes.append(
        f"Model-generated text is subject to the terms of the generating models ({_fmt(models)}) "
        "and of any teacher model named in the data."
    )
    notes.append(f"Declared licence of this card: `{license_id}`.")
    return license_id, " ".join(notes)


def usage_md(kind: str, repo_id: str | None, push_command: str | None, config_name: str | None = None) -> str:
    name = repo_id or "<user>/<dataset>"
    config = f', "{config_name}"' if config_name else ""
    lines = [
        "```python",
        "from datasets import load_dataset, load_from_disk",
        f'ds = load_dataset("{name}"{config}, split="train")          # from the Hub',
        f'ds = load_dataset("parquet", data_files="{kind}/data/*.parquet", split="train")  # local Parquet',
        f'ds = load_from_disk("disk/{kind}")                    # local save_to_disk copy',
        "```",
    ]
    if push_command:
        lines += ["", "Push (or re-push) this folder to the Hub with:", "", "```bash", push_command, "```"]
    return "\n".join(lines)


def card_context(
    kind: str,
    data: RunData,
    *,
    title: str,
    description: str,
    columns: Mapping[str, str],
    counts: Mapping[str, Any],
    drops: Drops | None = None,
    builder_config: Any = None,
    builder_title: str = "builder setting",
    license: str | None = None,
    repo_id: str | None = None,
    push_command: str | None = None,
    created: str | None = None,
    config_name: str | None = None,
) -> dict[str, str]:
    """Every placeholder a card template may use (see ``recovery/data_cards/*.md``)."""
    created = created or _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M")
    license_id, license_note = license_for(data, license)
    filters = benchmark_filters_md(data)
    if builder_config is not None:
        filters += "\n\n" + config_md(builder_title, builder_config)
    rows = int(counts.get("rows", 0))
    return {
        "kind": kind,
        "pretty_name": json.dumps(title),  # quoted: safe as a YAML scalar
        "title": title,
        "description": description,
        "license": license_id,
        "license_note": license_note,
        "size_category": size_category(rows),
        "rows": str(rows),
        "provenance": provenance_md(data, created),
        "models": models_md(data),
        "interventions": interventions_md(data),
        "decoding": decoding_md(data),
        "filters": filters,
        "counts": counts_md(counts, drops),
        "columns": columns_md(columns),
        "usage": usage_md(kind, repo_id, push_command, config_name),
        "repo_id": repo_id or "<user>/<dataset>",
        "created": created,
    }
