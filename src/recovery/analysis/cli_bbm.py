"""``recovery analyze bbm`` (BIG-Bench Mistake, paper Tables 1/11) and ``recovery analyze paraphrase``
(the paraphrase-quality judge, App. D.4).

The work is done by `recovery.analysis.bbm` and `recovery.analysis.paraphrase`; these commands parse
options, print the main tables and turn configuration mistakes into one-line errors.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

from recovery.configs import ConfigError, from_mapping
from recovery.report.tables import to_markdown

console = Console(soft_wrap=True, markup=False, highlight=False)  # one-line errors, user text verbatim


def _guarded(fn: Callable[[], object]) -> object:
    """Run ``fn``; a bad option, config, data source or run directory ends the command with its message."""

    try:
        return fn()
    except (ConfigError, ValueError, KeyError, FileNotFoundError) as err:
        # Text, not markup: messages may hold brackets (paths, lists) that markup would swallow.
        console.print(Text.assemble(("error: ", "bold red"), str(err)))
        raise typer.Exit(code=2) from None


def _print(table) -> None:

    console.print(to_markdown(table), markup=False, highlight=False)
    console.print()


def bbm(
    config: Path = typer.Argument(..., help="BBM config YAML (see eval/bbm/paper_models.yaml, eval/bbm/toy.yaml)."),
    out: Path | None = typer.Option(None, "--out", help="Output folder (overrides the config's `out`)."),
    run_dir: Path | None = typer.Option(None, "--run-dir", help="Also store the section in this run directory."),
    limit: int | None = typer.Option(None, help="Items per task (overrides data.limit)."),
    tasks: str | None = typer.Option(None, help="Comma-separated tasks (overrides data.tasks)."),
    progress: bool = typer.Option(True, help="Show progress bars."),
) -> None:
    """BIG-Bench Mistake: each model locates the first wrong step of each trace, zero-shot; accuracy per
    model × task with 95 % intervals. Resumable: re-running asks only what is not answered yet.

    Writes OUT/analysis/bbm/ (answers as Parquet, the section) and OUT/report/.
    Example: `recovery analyze bbm eval/bbm/toy.yaml --out runs/bbm-toy`
    """
    from recovery.analysis.bbm import load_bbm_config, run_bbm  # lazy: loads matplotlib

    def work():
        overrides: dict = {}
        if out is not None:
            overrides["out"] = str(out)
        data: dict = {}
        if limit is not None:
            data["limit"] = limit
        if tasks:
            data["tasks"] = [t.strip() for t in tasks.split(",") if t.strip()]
        if data:
            overrides["data"] = data
        cfg = load_bbm_config(config, overrides)
        return run_bbm(cfg, progress=progress, run_dir=run_dir)

    result = _guarded(work)
    _print(result.section.tables[0])
    if result.skips.total:
        console.print(f"rows left out of the data: {result.skips.summary()}")
    console.print(f"{result.written} new answers, {len(result.rows)} in all; report: {result.report_html}")
    if run_dir is not None:
        console.print(f"section stored in {run_dir}")


def paraphrase(
    run_dir: Path = typer.Argument(..., help="A run directory with paraphrase chains."),
    config: Path | None = typer.Option(None, "--config", help="YAML with `judge:` (a model config) and options."),
    judge_name: str | None = typer.Option(None, help="Judge model name (instead of --config)."),
    judge_path: str | None = typer.Option(None, help="Judge HF path / hub id ('tiny-reasoner': the toy model)."),
    judge_backend: str = typer.Option("hf", help="hf, vllm or openai."),
    judge_base_url: str | None = typer.Option(None, help="Server URL for the openai backend."),
    per_domain: int | None = typer.Option(None, help="Chains judged per domain (default 100)."),
    seed: int | None = typer.Option(None, help="Seed of the per-domain sample."),
    progress: bool = typer.Option(True, help="Show progress bars."),
) -> None:
    """App. D.4: an LLM judge says whether each sampled paraphrase keeps the original prefix's reasoning;
    equivalence rate per domain with 95 % intervals. Stores section `paraphrase` in RUN_DIR and rewrites
    its report. Resumable.

    Example: `recovery analyze paraphrase runs/paper-math --judge-path Qwen/Qwen2.5-32B-Instruct --judge-backend vllm`
    """
    from recovery.analysis.paraphrase import (
        load_paraphrase_config,
        run_paraphrase_check,
    )  # lazy: loads matplotlib

    def work():
        overrides: dict = {}
        if per_domain is not None:
            overrides["per_domain"] = per_domain
        if seed is not None:
            overrides["seed"] = seed
        if config is not None:
            if judge_name or judge_path:
                raise ValueError("give either --config or --judge-name/--judge-path, not both")
            cfg = load_paraphrase_config(config, overrides)
        else:
            if not (judge_name or judge_path):
                raise ValueError("name a judge: --config FILE, or --judge-name/--judge-path")
            from recovery.analysis.paraphrase import ParaphraseCheckConfig  # lazy: loads matplotlib

            judge = {
                "name": judge_name or judge_path,
                "path": judge_path,
                "backend": judge_backend,
                "base_url": judge_base_url,
            }
            cfg = from_mapping(ParaphraseCheckConfig, {"judge": judge, **overrides}, where="options")
        return run_paraphrase_check(run_dir, cfg, progress=progress)

    result = _guarded(work)
    _print(result.section.tables[0])
    if result.skips.total:
        console.print(f"chains that could not be checked: {result.skips.summary()}")
    console.print(f"{result.written} new judgments, {len(result.rows)} in the sample; report: {result.report_html}")


def register(analyze_app: typer.Typer) -> None:
    """Add ``bbm`` and ``paraphrase`` to ``recovery analyze``."""
    analyze_app.command("bbm")(bbm)
    analyze_app.command("paraphrase")(paraphrase)
