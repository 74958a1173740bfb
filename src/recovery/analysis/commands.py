"""``recovery analyze <name> …``: one sub-command per analysis.

Each analysis module named in `COMMAND_MODULES` exposes ``register(analyze_app)``, which adds its
sub-command(s) to the ``analyze`` Typer group. Commands that work on a run directory store their report
section there (`recovery.report.sections_store`) and re-render the run's report.
"""

from __future__ import annotations

import importlib

import typer

from recovery.run_dir.state import partial_allowed

# Modules holding analysis sub-commands, in the order `recovery analyze --help` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "recovery.analysis.cli_ablations",
    "recovery.analysis.cli_doubt",
    "recovery.analysis.cli_bbm",
    "recovery.analysis.cli_probes",
)

analyze_app = typer.Typer(
    help="The paper's analyses: doubt, ablations, BIG-Bench Mistake, paraphrase check, probes, doubt clusters.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)


@analyze_app.callback()
def _options(
    partial: bool = typer.Option(
        False,
        "--partial",
        help="Analyse a run that is not finished (or is being written): the result says 'partial: N of M'.",
    ),
) -> None:
    """The paper's analyses of a finished run (`--partial`: of an unfinished one, marked partial)."""
    partial_allowed.set(partial)


def register_analyze_commands(app: typer.Typer) -> None:
    """Attach ``recovery analyze`` (with every analysis sub-command) to the main CLI ``app``."""
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(analyze_app)
    app.add_typer(analyze_app, name="analyze")
