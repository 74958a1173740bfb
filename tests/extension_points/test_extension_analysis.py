"""A new analysis, added as docs/architecture.md says (a function that reads a run directory and returns a
report `Section`, a ``register(analyze_app)`` that adds its command), through ``recovery analyze``: its section
stored in the run directory and shown in the run's report."""

from __future__ import annotations

import shutil
from pathlib import Path

import typer

from recovery.analysis.commands import analyze_app
from recovery.report.data import Section, Table
from recovery.report.run_report import store_section
from recovery.run_dir import open_run
from toy_runs import ToyRunSpec

RUN = ToyRunSpec(("toy/wrong_continuation", "toy/random_characters"), (0.3, 0.7), n_problems=4, aggregate=True)


def least_robust(run_dir):
    """Where each model recovers least often: its (intervention, timestep) of lowest majority robustness."""
    worst = {}
    for row in open_run(run_dir).aggregates():
        if row["model"] not in worst or row["majority_mean"] < worst[row["model"]]["majority_mean"]:
            worst[row["model"]] = row
    rows = [[model, r["intervention"], r["target_t"], r["majority_mean"]] for model, r in sorted(worst.items())]
    table = Table("Least robust", ["model", "intervention", "t", "majority robustness"], rows)
    return Section("Least robust intervention", "Where each model recovers least often.", tables=[table])


def register(analyze_app: typer.Typer) -> None:
    @analyze_app.command("least-robust")
    def least_robust_command(run_dir: Path) -> None:
        """Store the least robust (intervention, timestep) of each model in RUN_DIR's report."""
        print(f"report: {store_section(run_dir, 'least_robust', least_robust(run_dir))}")


def test_a_new_analysis_runs_through_recovery_analyze(tmp_path, toy_run_for, recovery_cli):
    run_dir = tmp_path / "run"
    shutil.copytree(toy_run_for(RUN).path, run_dir)  # the analysis writes into the run directory
    commands = list(analyze_app.registered_commands)
    try:
        register(analyze_app)

        recovery_cli("analyze", "least-robust", str(run_dir))
    finally:
        analyze_app.registered_commands[:] = commands
    assert (run_dir / "analysis" / "least_robust" / "section.json").is_file()
    report = (run_dir / "report" / "report.md").read_text(encoding="utf-8")
    assert "Least robust intervention" in report and "toy/" in report.split("Least robust intervention")[1]
