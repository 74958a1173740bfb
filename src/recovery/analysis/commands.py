"""``recovery analyze <name> …``: one sub-command per analysis.

Each analysis module named in `COMMAND_MODULES` exposes ``register(analyze_app)``, which adds its
sub-command(s) to the ``analyze`` Typer group. Commands that work on a run directory store their report
section there (`recovery.report.sections_store`) and re-render the run's report.

``--partial`` (analyse a run that is not finished) is an option of the group and of every sub-command, so
``recovery analyze --partial doubt RUN`` and ``recovery analyze doubt RUN --partial`` mean the same.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from typing import Any

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


PARTIAL_HELP = "Analyse a run that is not finished (or is being written): the result says 'partial: N of M'."


@analyze_app.callback()
def _options(partial: bool = typer.Option(False, "--partial", help=PARTIAL_HELP)) -> None:
    """The paper's analyses of a finished run (`--partial`: of an unfinished one, marked partial)."""
    partial_allowed.set(partial)


def _with_partial(command: Callable[..., Any]) -> Callable[..., Any]:
    """``command`` with a ``--partial`` option of its own (after the group's, which it can only turn on)."""

    @functools.wraps(command)
    def run(*args: Any, partial: bool = False, **kwargs: Any) -> Any:
        if partial:
            partial_allowed.set(True)
        return command(*args, **kwargs)

    signature = inspect.signature(command)
    option = inspect.Parameter(
        "partial", inspect.Parameter.KEYWORD_ONLY, default=typer.Option(False, "--partial", help=PARTIAL_HELP)
    )
    run.__signature__ = signature.replace(parameters=[*signature.parameters.values(), option])  # type: ignore[attr-defined]
    run.__annotations__ = {**command.__annotations__, "partial": bool}
    return run


def register_analyze_commands(app: typer.Typer) -> None:
    """Attach ``recovery analyze`` (with every analysis sub-command, each with ``--partial``) to the main CLI
    ``app``."""
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(analyze_app)
    for info in analyze_app.registered_commands:
        if info.callback is not None and "partial" not in inspect.signature(info.callback).parameters:
            info.callback = _with_partial(info.callback)
    app.add_typer(analyze_app, name="analyze")
