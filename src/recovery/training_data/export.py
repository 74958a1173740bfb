"""Export every dataset a run produces: local Parquet, `save_to_disk`, dataset cards, optional Hub push.

Layout of ``out_dir``::

    out_dir/
      README.md                         the card of the whole repo: a ``configs:`` entry per kind (`hub_repo`)
      export.json                       what was written: rows, paths, drops, push outcomes and commands
      <kind>/README.md                  dataset card (from recovery/data_cards/<kind>.md)
      <kind>/data/train-*.parquet       the rows (the Hub's Parquet layout; this folder is what is pushed)
      disk/<kind>/                      `datasets.Dataset.save_to_disk` copy (+ README.md)

Kinds: ``traces`` (original traces with their problems and the benchmark filter's verdicts), ``chains``
(intervened prefixes), ``continuations`` (sampled continuations with grades), ``sft`` (recovery traces,
`recovery.training_data.sft`) and ``grpo`` (prompts, `recovery.training_data.grpo`). The last two need the
model's tokenizer to render prompts; without one they are skipped with the reason recorded.

Pushing happens only when asked (``push=True``): by default every kind goes to one repo (``repo_id``), a
config per kind (``load_dataset(repo_id, "sft")``; `recovery.training_data.hub_repo`); a ``repo_id`` holding
``{kind}`` pushes each ``<kind>/`` folder to a repo of its own instead. Offline or on any Hub failure the local
export is untouched and `ExportResult.push_commands` gives the exact commands to push later.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recovery.configs import ConfigError
from recovery.library_bars import datasets_bars_off
from recovery.models import get_spec, is_tiny_reasoner, spec_for
from recovery.run_dir.state import require_finished
from recovery.store import atomic_write_text
from recovery.training_data.cards import card_context, render_card
from recovery.training_data.decontam import EvalSet
from recovery.training_data.drops import Drops
from recovery.training_data.grpo import GRPO_COLUMNS, GRPOPromptConfig, grpo_rows
from recovery.training_data.hub import PushResult, push_command, push_folder
from recovery.training_data.hub_repo import push_repo, repo_patterns, write_repo_card
from recovery.training_data.render import PromptRenderer, renderers_for_run
from recovery.training_data.sft import SFT_COLUMNS, SFTConfig, sft_rows
from recovery.training_data.source import RunData, load_run
from recovery.training_data.tables import breakdown, chain_rows, continuation_rows, trace_rows

logger = logging.getLogger(__name__)

KINDS: tuple[str, ...] = ("traces", "chains", "continuations", "sft", "grpo")
MANIFEST = "export.json"
DATA_FILE = "data/train-{index:05d}-of-{count:05d}.parquet"

TITLES = {
    "traces": "original reasoning traces",
    "chains": "intervened reasoning chains",
    "continuations": "graded continuations after interventions",
    "sft": "SFT recovery traces",
    "grpo": "GRPO recovery prompts",
}
DESCRIPTIONS = {
    "traces": "Each row is a model's original response to a problem (reasoning between think tags, then the "
    "final answer), with the problem and the benchmark filter's verdict.",
    "chains": "Each row is an intervened reasoning prefix: a model's own reasoning cut at timestep t with one "
    "intervention applied (the paper's protocol), ready to be continued by the model.",
    "continuations": "Each row is one of the N continuations a model sampled after an intervened prefix, with "
    "its grade against the reference answer.",
    "sft": "Prompt/completion pairs for supervised fine-tuning: the prompt ends with an intervened prefix, the "
    "completion is a correct, filtered recovery (or, for clean rows, the rest of an original trace).",
    "grpo": "Prompts for GRPO: each ends with an intervened prefix the policy continues as its own reasoning; "
    "the other columns feed the reward functions.",
}


@dataclass
class ExportConfig:
    """What `export_run` writes. ``repo_id``: one Hub repo for every kind (a config each), or, when it contains
    ``{kind}``, one repo per kind."""

    kinds: list[str] = field(default_factory=lambda: list(KINDS))
    sft: SFTConfig = field(default_factory=SFTConfig)
    grpo: GRPOPromptConfig = field(default_factory=GRPOPromptConfig)
    license: str | None = None
    save_to_disk: bool = True
    shard_rows: int = 200_000
    repo_id: str | None = None
    private: bool = True

    def __post_init__(self) -> None:
        unknown = set(self.kinds) - set(KINDS)
        if unknown:
            raise ConfigError(f"--kinds / kinds: unknown export kinds {sorted(unknown)}; known: {', '.join(KINDS)}")
        if self.shard_rows < 1:
            raise ValueError("shard_rows must be ≥ 1")

    @property
    def one_repo(self) -> bool:
        """Whether every kind goes to the one repo ``repo_id`` (no ``{kind}`` in it)."""
        return bool(self.repo_id) and "{kind}" not in self.repo_id

    def repo_for(self, kind: str) -> str | None:
        if not self.repo_id:
            return None
        return self.repo_id.format(kind=kind) if "{kind}" in self.repo_id else self.repo_id


@dataclass
class ExportedDataset:
    """One exported dataset (``skipped`` says why it was not written, when it was not)."""

    kind: str
    rows: int = 0
    dir: str | None = None
    parquet_files: list[str] = field(default_factory=list)
    disk_dir: str | None = None
    card: str | None = None
    repo_id: str | None = None
    push: PushResult | None = None
    skipped: str | None = None
    counts: dict[str, Any] = field(default_factory=dict)
    drops: dict[str, int] = field(default_factory=dict)
    command: str | None = None  # the shell command that pushes this dataset (with the others, in one repo)

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k not in ("push", "command")}
        out["push"] = self.push.as_dict() if self.push else None
        out["push_command"] = self.command if self.dir and self.repo_id else None
        return out


@dataclass
class ExportResult:
    out_dir: str
    datasets: dict[str, ExportedDataset] = field(default_factory=dict)
    protocol: str = "default"  # whose protocol the run followed (`recovery.training_data.source.RunData.protocol`)
    partial: str = ""  # "partial: N of M ..." when the run was not finished (``partial=True``), else empty

    def push_commands(self) -> list[str]:
        """Shell commands that push every written dataset not yet on the Hub (needs ``repo_id``)."""
        commands = [
            d.push.command if d.push else d.command
            for d in self.datasets.values()
            if d.dir and d.repo_id and not (d.push and d.push.pushed)
        ]
        return [c for c in dict.fromkeys(commands) if c]  # one repo: one command for every kind

    def as_dict(self) -> dict[str, Any]:
        return {
            "out_dir": self.out_dir,
            "protocol": self.protocol,
            "datasets": {k: v.as_dict() for k, v in self.datasets.items()},
            "push_commands": self.push_commands(),
        }


# ---------------------------------------------------------------------------------------------- writing


def _replace_dir(target: Path, build) -> None:
    """Build a directory next to ``target`` and swap it in, so a failed export never leaves a half-written
    folder and a re-export never mixes old and new shards."""
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        build(tmp)
        old = None
        if target.exists():
            old = target.with_name(f".{target.name}.{uuid.uuid4().hex}.old")
            target.rename(old)
        tmp.rename(target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _features(dataset) -> dict[str, str]:
    return {name: getattr(f, "dtype", type(f).__name__) for name, f in dataset.features.items()}


def write_dataset(
    kind: str, dataset, out_dir: Path, card: str, *, save_to_disk: bool = True, shard_rows: int = 200_000
) -> tuple[Path, list[str], Path | None]:
    """Write ``dataset`` as ``out_dir/<kind>/data/*.parquet`` + README.md, and ``out_dir/disk/<kind>``."""
    with datasets_bars_off():  # no per-shard bars while exporting
        return _write_dataset(kind, dataset, out_dir, card, save_to_disk, shard_rows)


def _write_dataset(kind, dataset, out_dir: Path, card: str, save_to_disk: bool, shard_rows: int):
    hub_dir = out_dir / kind
    n_shards = max(1, math.ceil(len(dataset) / shard_rows))
    files = [DATA_FILE.format(index=i, count=n_shards) for i in range(n_shards)]

    def build_hub(tmp: Path) -> None:
        (tmp / "data").mkdir(parents=True)
        for i, name in enumerate(files):
            dataset.shard(n_shards, i, contiguous=True).to_parquet(str(tmp / name))
        (tmp / "README.md").write_text(card, encoding="utf-8")

    _replace_dir(hub_dir, build_hub)
    disk_dir = None
    if save_to_disk:
        disk_dir = out_dir / "disk" / kind
        disk_dir.parent.mkdir(parents=True, exist_ok=True)

        def build_disk(tmp: Path) -> None:
            dataset.save_to_disk(str(tmp))
            (tmp / "README.md").write_text(card, encoding="utf-8")

        _replace_dir(disk_dir, build_disk)
    return hub_dir, [str(hub_dir / f) for f in files], disk_dir


def _with_note(card: str, note: str) -> str:
    """``card`` with ``note`` (a partial export's) as its first paragraph, after the YAML front matter."""
    if not note:
        return card
    head, sep, body = card.partition("\n---\n") if card.startswith("---\n") else ("", "", card)
    return f"{head}{sep}\n> **{note}**\n\n{body}"


def export_run(
    run_dir: str | Path | RunData,
    out_dir: str | Path,
    config: ExportConfig | None = None,
    *,
    renderers: PromptRenderer | Mapping[str, PromptRenderer] | None = None,
    tokenizer: Any = None,
    spec: Any = None,
    teacher: Any = None,
    eval_set: EvalSet | None = None,
    grader: Any = None,
    push: bool = False,
    token: str | None = None,
    endpoint: str | None = None,
    templates: str | Path | None = None,
    partial: bool = False,
) -> ExportResult:
    """Write every dataset of ``run_dir`` under ``out_dir`` (layout: module doc) and, with ``push=True``
    and ``config.repo_id`` set, push each one. Returns what was written, pushed and skipped; the same is
    written to ``out_dir/export.json``.

    Prompt rendering (sft, grpo) uses ``renderers``, else ``tokenizer`` (+ ``spec``, default: guessed from
    the run's first model), else the tokenizers named in the run's config (`renderers_for_run`).
    ``teacher`` adds teacher-written recoveries to the SFT dataset (`SFTConfig.sources_with`). A run that is not
    finished, or is being written, is refused (`recovery.run_dir.state.require_finished`) unless ``partial``:
    then the result and every dataset card say "partial: N of M".
    """
    config = config or ExportConfig()
    if push and not config.repo_id:
        raise ConfigError("push=True needs ExportConfig.repo_id")
    if "sft" in config.kinds:
        config.sft.sources_with(teacher)  # before any work: a teacher given is used, a missing one is an error
    data = load_run(run_dir)
    state = require_finished(data.path, "export", partial=partial)
    note = "" if state.complete else state.partial_note()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    result = ExportResult(out_dir=str(out), protocol=data.protocol, partial=note)

    resolved: Any = renderers
    if resolved is None and tokenizer is not None:
        model_name = data.models[0] if data.models else "model"
        if spec is None:
            spec = get_spec(model_name) if is_tiny_reasoner(model_name) else spec_for(model_name, tokenizer)
        resolved = PromptRenderer.for_run(tokenizer, spec, data.config)
    needs_prompts = any(k in config.kinds for k in ("sft", "grpo"))
    if resolved is None and needs_prompts:
        resolved = renderers_for_run(data)

    for kind in config.kinds:
        entry = ExportedDataset(kind=kind, repo_id=config.repo_for(kind))
        result.datasets[kind] = entry
        drops: Drops | None = None
        builder_config: Any = None
        builder_title = "builder setting"
        if kind in ("sft", "grpo") and isinstance(resolved, str):
            entry.skipped = resolved
            logger.warning("skipping %s export: %s", kind, resolved)
            continue
        from datasets import Dataset

        if kind == "traces":
            rows = trace_rows(data)
        elif kind == "chains":
            rows = chain_rows(data)
        elif kind == "continuations":
            rows = continuation_rows(data)
        elif kind == "sft":
            rows, drops, entry.counts = sft_rows(
                data, resolved, config.sft, teacher=teacher, eval_set=eval_set, grader=grader
            )
            builder_config, builder_title = config.sft, "SFT builder setting"
        else:
            built = grpo_rows(data, resolved, config.grpo, eval_set=eval_set)
            rows, drops = built.rows, built.drops
            builder_config, builder_title = config.grpo, "GRPO builder setting"
        columns = {"sft": SFT_COLUMNS, "grpo": GRPO_COLUMNS}.get(kind, ())
        dataset = Dataset.from_list(rows) if rows else Dataset.from_dict({c: [] for c in columns})
        entry.rows = len(dataset)
        counts = {"rows": len(dataset), **{k: v for k, v in entry.counts.items() if k != "rows"}}
        if kind == "grpo":
            counts.update(breakdown(rows, ("kind", "intervention")))
        elif kind == "continuations":
            counts.update(breakdown(rows, ("verdict", "intervention")))
        elif kind in ("traces", "chains"):
            counts.update(breakdown(rows, ("model", "kept_reason" if kind == "traces" else "intervention")))
        entry.counts = counts
        entry.drops = drops.as_dict() if drops else {}
        command = None
        if entry.repo_id:
            command = (
                push_command(out, entry.repo_id, private=config.private, allow_patterns=repo_patterns(config.kinds))
                if config.one_repo
                else push_command(out / kind, entry.repo_id, private=config.private)
            )
        entry.command = command
        context = card_context(
            kind,
            data,
            title=f"recovery: {TITLES[kind]} ({data.path.name})",
            description=DESCRIPTIONS[kind],
            columns=_features(dataset),
            counts=counts,
            drops=drops if kind in ("sft", "grpo") else None,
            builder_config=builder_config,
            builder_title=builder_title,
            license=config.license,
            repo_id=entry.repo_id,
            push_command=command,
            config_name=kind if config.one_repo else None,
        )
        card = _with_note(render_card(kind, context, templates), note)
        hub_dir, files, disk_dir = write_dataset(
            kind, dataset, out, card, save_to_disk=config.save_to_disk, shard_rows=config.shard_rows
        )
        entry.dir, entry.parquet_files, entry.card = str(hub_dir), files, str(hub_dir / "README.md")
        entry.disk_dir = str(disk_dir) if disk_dir else None
        if push and entry.repo_id and not config.one_repo:
            entry.push = push_folder(hub_dir, entry.repo_id, private=config.private, token=token, endpoint=endpoint)
    written = {kind: entry for kind, entry in result.datasets.items() if entry.dir}
    write_repo_card(
        out,
        data,
        written,
        renderers=resolved,
        descriptions=DESCRIPTIONS,
        repo_id=config.repo_id if config.one_repo else None,
        license=config.license,
        templates=templates,
    )
    if push and config.one_repo and written:
        pushed = push_repo(out, config.repo_id, list(written), private=config.private, token=token, endpoint=endpoint)
        for entry in written.values():
            entry.push = pushed
    atomic_write_text(out / MANIFEST, json.dumps(result.as_dict(), indent=2, sort_keys=True, default=str))
    return result


def push_export(
    out_dir: str | Path,
    repo_id: str,
    *,
    kinds: list[str] | None = None,
    private: bool = True,
    token: str | None = None,
    endpoint: str | None = None,
) -> dict[str, PushResult]:
    """Push an existing export (e.g. one written offline earlier). ``repo_id`` as in `ExportConfig`: one repo
    (the export's ``README.md`` and the kinds' folders), or one per kind with ``{kind}``."""
    out = Path(out_dir)
    cfg = ExportConfig(repo_id=repo_id, private=private)
    kinds = kinds or [k for k in KINDS if (out / k / "README.md").is_file()]
    if cfg.one_repo:
        pushed = push_repo(out, repo_id, kinds, private=private, token=token, endpoint=endpoint)
        return dict.fromkeys(kinds, pushed)
    results = {}
    for kind in kinds:
        results[kind] = push_folder(out / kind, cfg.repo_for(kind), private=private, token=token, endpoint=endpoint)
    return results
