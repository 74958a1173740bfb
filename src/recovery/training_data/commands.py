"""``recovery export RUN --out DIR``: a run's datasets with their cards, in the Hub's layout (one repo, a config
per kind), or the GRPO prompts in verl's or OpenRLHF's layout (``--format``); pushed only when asked.

Wire into the Typer app with `register_export_command(app)`. Importing this module is cheap: the export
machinery (datasets, transformers) is imported when the command runs. A user error (a bad option, a failed
push) is a `recovery.configs.ConfigError`: one line and exit 2 from the command line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from recovery.backends.registry import model_location
from recovery.configs import ConfigError
from recovery.models import TINY_REASONER, get_spec, is_tiny_reasoner
from recovery.run_dir import open_run
from recovery.run_dir.state import require_finished
from recovery.toy import checkpoint_dir, has_checkpoint
from recovery.training_data import (
    ExportConfig,
    GRPOPromptConfig,
    PromptRenderer,
    ToyTeacher,
    export_run,
    load_run,
    renderers_for_run,
)
from recovery.training_data.rl_export import export_rl

__all__ = ["FORMATS", "register_export_command"]

FORMATS: tuple[str, ...] = ("hf", "verl", "openrlhf")


def _tokenizer_for(run_config: Any) -> Any:
    """The tiny reasoner's tokenizer when the run's model is the tiny reasoner (shipped), else None."""

    if any(is_tiny_reasoner(model_location(model)) for model in run_config.models):
        if has_checkpoint():  # its tokenizer only: the prompts need no weights
            from transformers import AutoTokenizer

            return AutoTokenizer.from_pretrained(str(checkpoint_dir()))
    return None


def register_export_command(app: Any) -> None:
    """Add ``export`` to the Typer ``app``."""
    import typer
    from rich.console import Console

    console = Console(stderr=True, soft_wrap=True, markup=False, highlight=False)

    def export(
        run_dir: Path = typer.Argument(..., help="A run directory written by `recovery run`."),
        out: Path = typer.Option(..., help="Output folder (Parquet + save_to_disk + dataset cards)."),
        kinds: str | None = typer.Option(None, help="Comma-separated subset of traces,chains,continuations,sft,grpo."),
        format: str = typer.Option(
            "hf", "--format", help="hf (every kind, Hub layout), verl or openrlhf (the GRPO prompts in that layout)."
        ),
        teacher: str | None = typer.Option(None, help="'toy' to add teacher-written recovery traces (toy world)."),
        push: bool = typer.Option(False, help="Also push to the Hugging Face Hub (hf format)."),
        repo_id: str | None = typer.Option(
            None, help="Hub dataset repo: one repo, a config per kind; with '{kind}' in it, one repo per kind."
        ),
        max_prompt_tokens: int | None = typer.Option(
            None, help="SFT and GRPO rows whose prompt is longer (in the model's tokens) are dropped and counted."
        ),
        max_tokens: int | None = typer.Option(
            None,
            help="SFT rows longer than this, prompt + completion + EOS, are dropped and counted (the trainer's "
            "max_length).",
        ),
        partial: bool = typer.Option(
            False, "--partial", help="Export a run that is not finished (or is being written), marked partial."
        ),
    ) -> None:
        """Export a run's datasets (original traces, intervened chains, graded continuations, SFT recovery
        traces, GRPO prompts) with dataset cards; offline it writes locally and prints how to push later.
        `--format verl|openrlhf` writes the GRPO prompts for those trainers instead (see
        docs/training-frameworks.md).

        Example: `recovery export runs/demo --out exports/demo --teacher toy --push --repo-id me/recovery-demo`
        """

        if format not in FORMATS:
            raise ConfigError(f"--format: {format!r} is not one of {', '.join(FORMATS)}")
        if push and not repo_id:
            raise ConfigError("--push needs --repo-id (the Hub dataset repo; '{kind}' in it: one repo per kind)")
        if format != "hf" and (push or kinds or teacher):
            raise ConfigError(f"--format {format} writes the GRPO prompts only: no --kinds, --teacher or --push")
        run_config = open_run(run_dir).config  # one line naming the folder when it is not a run directory
        state = require_finished(run_dir, "recovery export", partial=partial)  # before any work
        if not state.complete:
            console.print(state.partial_note())
        if format != "hf":
            _export_rl(run_dir, out, format, _tokenizer_for(run_config), max_prompt_tokens, console)
            return

        config = ExportConfig(repo_id=repo_id) if not kinds else ExportConfig(kinds=kinds.split(","), repo_id=repo_id)
        tokenizer = _tokenizer_for(run_config)
        config.sft.max_prompt_tokens, config.sft.max_tokens = max_prompt_tokens, max_tokens
        config.grpo.max_prompt_tokens = max_prompt_tokens
        teacher_impl = None
        if teacher == "toy":
            teacher_impl = ToyTeacher()
        elif teacher is not None:
            raise ConfigError(
                f"unknown teacher {teacher!r} (only 'toy' is built in; use the Python API for model teachers)"
            )
        result = export_run(run_dir, out, config, tokenizer=tokenizer, teacher=teacher_impl, push=push, partial=partial)
        console.print(f"exported to {out}")
        for line in result.push_commands():
            console.print(f"to push later: {line}")
        failed = [
            f"{kind} ({entry.push.error})"
            for kind, entry in result.datasets.items()
            if entry.push is not None and not entry.push.pushed
        ]
        if push and failed:
            raise ConfigError(f"push failed for {', '.join(failed)}; the export is kept in {out}")

    app.command()(export)


def _export_rl(run_dir: Path, out: Path, fmt: str, tokenizer: Any, max_prompt_tokens: int | None, console) -> None:

    data = load_run(run_dir)
    if tokenizer is not None:
        renderers: Any = PromptRenderer.for_run(tokenizer, get_spec(TINY_REASONER), data.config)
    else:
        renderers = renderers_for_run(data)
        if isinstance(renderers, str):
            raise ConfigError(f"--format {fmt}: {renderers}")
    result = export_rl(data, out, fmt, renderers, GRPOPromptConfig(max_prompt_tokens=max_prompt_tokens))
    console.print(f"exported {result.rows} {fmt} rows to {result.data_file}")
    for reason, count in result.drops.items():
        console.print(f"left out: {count} ({reason})")
