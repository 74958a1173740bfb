"""``recovery analyze wait | swap | repeats | repeats-sweep``: the paper's ablations (Tables 7–10).

The work is done by `recovery.analysis.ablation_runs`; these commands parse arguments, print the tables
and turn configuration mistakes into one-line errors.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

from recovery.configs import ConfigError
from recovery.pipeline.validate import load_run_config
from recovery.report.tables import to_markdown

console = Console(soft_wrap=True, markup=False, highlight=False)  # one-line errors; text verbatim, never markup


def _guarded(fn: Callable[[], object]) -> object:
    """Run ``fn``; a bad argument, config or run directory ends the command with its message."""

    try:
        return fn()
    except (ConfigError, ValueError, FileNotFoundError) as err:
        console.print(Text.assemble(("error:", "red"), f" {err}"))
        raise typer.Exit(code=1) from None


def _print_tables(section) -> None:

    for table in section.tables:
        if not getattr(table, "collapsed", False):
            console.print(to_markdown(table) if not isinstance(table, str) else table, markup=False, highlight=False)
            console.print()


def wait(
    base_run: Path = typer.Argument(..., help="Run directory without Wait."),
    wait_run: Path = typer.Argument(..., help="Same config with interventions.append_wait: true."),
) -> None:
    """Tables 7–8: change in majority robustness from appending "Wait" after each intervention.

    Stores section `ablation_wait` in both runs and rewrites their reports.
    Example: `recovery analyze wait runs/paper-logic runs/ablations/logic-wait`
    """
    from recovery.analysis import ablation_runs as ar  # lazy: loads matplotlib

    comp = _guarded(lambda: ar.analyze_wait(base_run, wait_run))
    _print_tables(load_section_or_fail(wait_run, ar.WAIT))
    console.print(
        f"{len(comp.deltas)} matched groups, {len(comp.unmatched)} unmatched; "
        f"section stored in {wait_run} and {base_run}"
    )


def swap(
    runs: list[Path] = typer.Argument(..., help="Runs made with swap_to (one per continuing model)."),
    t: float = typer.Option(0.3, "--t", help="Timestep of the matrix (the paper fixes t=0.3)."),
) -> None:
    """Table 9: majority robustness with chains of one model continued by another (original × swapped).

    Stores section `ablation_swap` in every run and rewrites their reports.
    Example: `recovery analyze swap runs/ablations/logic-swap-to-1.5b runs/ablations/logic-swap-to-qwq`
    """
    from recovery.analysis import ablation_runs as ar  # lazy: loads matplotlib

    result = _guarded(lambda: ar.analyze_swap(runs, t))
    _print_tables(load_section_or_fail(runs[0], ar.SWAP))
    console.print(f"{len(result.cells)} groups at t={t}; section stored in {len(runs)} run(s)")


def repeats(
    runs: list[Path] = typer.Argument(..., help="One run per k, or a folder of them (k1 … k5)."),
    t: float = typer.Option(0.3, "--t", help="Timestep (the paper fixes t=0.3)."),
) -> None:
    """Table 10: accuracy under k consecutive interventions (k = each run's interventions.repeats).

    Stores section `ablation_repeats` in every run and rewrites their reports.
    Example: `recovery analyze repeats runs/ablations/logic-repeats`
    """
    from recovery.analysis import ablation_runs as ar  # lazy: loads matplotlib

    result = _guarded(lambda: ar.analyze_repeats(runs, t))
    _print_tables(load_section_or_fail(ar.expand_runs(runs)[0], ar.REPEATS))
    console.print(f"{len(result.cells)} groups; section stored in every run")


def repeats_sweep(
    config: Path = typer.Argument(..., help="Run config (e.g. eval/ablations/logic_repeats.yaml)."),
    ks: str = typer.Option("1,2,3,4,5", help="Comma-separated numbers of consecutive interventions."),
    run_dir: str | None = typer.Option(None, help="Override the config's run_dir (runs go to RUN_DIR/k<k>)."),
    t: float = typer.Option(0.3, "--t", help="Timestep of the table."),
    progress: bool = typer.Option(True, help="Show progress bars."),
) -> None:
    """Run CONFIG once per k into RUN_DIR/k1, RUN_DIR/k2, … (sharing the original traces), then build Table 10.

    Example: `recovery analyze repeats-sweep eval/ablations/toy_repeats.yaml --ks 1,2,3`
    """
    from recovery.analysis import ablation_runs as ar  # lazy: loads matplotlib

    def work():
        values = [int(k) for k in ks.split(",") if k.strip()]
        cfg = load_run_config(config, {"run_dir": run_dir} if run_dir else None)
        return cfg, ar.run_repeats_sweep(cfg, values, target_t=t, progress=progress)

    cfg, result = _guarded(work)
    first = ar.expand_runs([cfg.run_dir])[0]
    _print_tables(load_section_or_fail(first, ar.REPEATS))
    console.print(f"{len(result.cells)} groups; runs under {cfg.run_dir}")


def load_section_or_fail(run_dir: Path, name: str):
    from recovery.report.sections_store import load_section  # lazy: loads matplotlib

    section = load_section(run_dir, name)
    if section is None:
        console.print(Text.assemble(("error:", "red"), f" no stored section {name} in {run_dir}"))
        raise typer.Exit(code=1)
    return section


def register(analyze_app: typer.Typer) -> None:
    """Add the ablation sub-commands to ``recovery analyze``."""
    analyze_app.command("wait")(wait)
    analyze_app.command("swap")(swap)
    analyze_app.command("repeats")(repeats)
    analyze_app.command("repeats-sweep")(repeats_sweep)
