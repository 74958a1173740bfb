"""One Hub dataset repository for every kind an export wrote: a ``configs:`` entry per kind, so
``load_dataset(repo, "sft")`` loads the SFT rows, and one card with the provenance the kinds share.

The repository is the export folder itself (``out_dir``): the card `write_repo_card` writes there
(``README.md``, from the shipped template ``data_cards/repo.md``) names ``<kind>/data/train-*.parquet`` for each
kind; each kind's folder keeps its own card. A push (`push_repo`) uploads exactly ``README.md`` and the
kinds' folders (``export.json`` and the ``save_to_disk`` copies stay local), and deletes remote files the
folder no longer holds. The local folder loads the same way: ``load_dataset(out_dir, "sft")``.

The card says which tokenizer the prompt datasets (``sft``, ``grpo``) were rendered for — the prompts are
that tokenizer's chat template and token ids, not portable to another model — with a digest of its chat
template and whether the BOS string was left out for trainers that add it (TRL).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from recovery.store import atomic_write_text
from recovery.training_data.cards import (
    interventions_md,
    license_for,
    md_table,
    models_md,
    provenance_md,
    render_card,
    size_category,
)
from recovery.training_data.hub import PushResult, push_folder
from recovery.training_data.source import RunData

__all__ = ["REPO_CARD", "repo_patterns", "push_repo", "tokenizers_md", "write_repo_card"]

REPO_CARD = "README.md"


def repo_patterns(kinds: Sequence[str]) -> list[str]:
    """What a push uploads: the card and each kind's folder."""
    return [REPO_CARD, *(f"{kind}/**" for kind in kinds)]


def configs_yaml(kinds: Sequence[str]) -> str:
    lines = []
    for kind in kinds:
        lines += [
            f"- config_name: {kind}",
            "  data_files:",
            "  - split: train",
            f"    path: {kind}/data/train-*.parquet",
        ]
    return "\n".join(lines)


def tokenizers_md(renderers: Any) -> str:
    """The tokenizer(s) the prompts were rendered with: name or path, class, chat-template digest, BOS handling."""
    if renderers is None or isinstance(renderers, str):
        why = f" ({renderers})" if isinstance(renderers, str) else ""
        return f"No prompt dataset was rendered{why}."
    items = renderers.items() if isinstance(renderers, Mapping) else [("(all models)", renderers)]
    rows = []
    for model, renderer in items:
        tokenizer = renderer.tokenizer
        template = getattr(tokenizer, "chat_template", None) or ""
        digest = hashlib.sha256(template.encode()).hexdigest()[:12] if template else "—"
        name = str(getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__)
        if Path(name).is_absolute():  # a local folder: its name only, no path of the machine that built it
            name = f"{Path(name).name} (local folder)"
        if getattr(tokenizer, "bos_token", None) is None:
            bos = "none (the tokenizer has no BOS token)"
        else:
            bos = "left out of the text (the trainer's tokenizer adds it)" if renderer.strip_bos else "in the text"
        rows.append((model, f"`{name}`", type(tokenizer).__name__, digest, getattr(renderer.spec, "name", "—"), bos))
    return md_table(["model", "tokenizer", "class", "chat template sha256", "model spec", "BOS"], rows)


def write_repo_card(
    out_dir: str | Path,
    data: RunData,
    datasets: Mapping[str, Any],
    *,
    renderers: Any = None,
    descriptions: Mapping[str, str] | None = None,
    repo_id: str | None = None,
    license: str | None = None,
    created: str | None = None,
    templates: str | Path | None = None,
) -> Path:
    """Write ``out_dir/README.md`` for the kinds in ``datasets`` (kind → `ExportedDataset`) that were written."""
    import datetime as _dt

    kinds = [kind for kind, entry in datasets.items() if entry.dir]
    created = created or _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M")
    license_id, license_note = license_for(data, license)
    name = repo_id or "<user>/<dataset>"
    table = md_table(
        ["config", "rows", "what a row is"],
        [(f"`{k}`", datasets[k].rows, (descriptions or {}).get(k, "")) for k in kinds],
    )
    usage = "\n".join(
        [
            "```python",
            "from datasets import load_dataset",
            *(f'{k} = load_dataset("{name}", "{k}", split="train")' for k in kinds),
            "```",
        ]
    )
    context = {
        "pretty_name": json.dumps(f"recovery: datasets of run {data.path.name}"),
        "license": license_id,
        "license_note": license_note,
        "size_category": size_category(max((datasets[k].rows for k in kinds), default=0)),
        "configs": configs_yaml(kinds),
        "title": f"recovery: datasets of run {data.path.name}",
        "datasets": table,
        "provenance": provenance_md(data, created),
        "models": models_md(data),
        "tokenizers": tokenizers_md(renderers),
        "interventions": interventions_md(data),
        "usage": usage,
    }
    path = Path(out_dir) / REPO_CARD
    atomic_write_text(path, render_card("repo", context, templates))
    return path


def push_repo(
    out_dir: str | Path,
    repo_id: str,
    kinds: Sequence[str],
    *,
    private: bool = True,
    token: str | None = None,
    endpoint: str | None = None,
) -> PushResult:
    """Push the card and the ``kinds``' folders of ``out_dir`` as one dataset repo (see `push_folder`)."""
    return push_folder(
        out_dir,
        repo_id,
        private=private,
        token=token,
        endpoint=endpoint,
        allow_patterns=repo_patterns(kinds),
        commit_message=f"Upload recovery datasets ({', '.join(kinds)})",
    )
