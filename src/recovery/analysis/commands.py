"""``recovery analyze <name> …``: one sub-command per analysis.

`ANALYSES` (a `recovery.registry.Registry`) maps a name to what adds its sub-command(s) to the ``analyze``
Typer group: the path of a module exposing ``register(analyze_app)`` (the built-ins, `COMMAND_MODULES`, in
the order `recovery analyze --help` lists them), or such a ``register`` function itself. A plug-in adds an
entry (``ANALYSES["least-robust"] = register``) or calls its ``register(analyze_app)`` when it loads; either
way its command is found the first time the ``analyze`` group looks a command up or lists them, which loads
the plug-ins. Commands that work on a run directory store their report section there
(`recovery.report.sections_store`) and re-render the run's report.

``--partial`` (analyse a run that is not finished) is an option of the group and of every sub-command, a
plug-in's included, so ``recovery analyze --partial doubt RUN`` and ``recovery analyze doubt RUN --partial``
mean the same.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperGroup
from typer.main import get_command_from_info, get_command_name

from recovery.registry import Registry
from recovery.run_dir.state import partial_allowed

# Modules holding analysis sub-commands, in the order `recovery analyze --help` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "recovery.analysis.cli_ablations",
    "recovery.analysis.cli_doubt",
    "recovery.analysis.cli_bbm",
    "recovery.analysis.cli_probes",
)

ANALYSES: Registry[str | Callable[[typer.Typer], None]] = Registry(
    "analysis", {module: module for module in COMMAND_MODULES}, plural="analyses"
)
_added: set[str] = set()  # the entries of ANALYSES whose commands are on `analyze_app`


class _AnalysisCommands(TyperGroup):
    """The ``analyze`` group: before it lists or finds a command, the registry's entries added since the CLI
    was built (by plug-ins, loaded then) put their commands on it."""

    def list_commands(self, ctx):  # noqa: ANN001 — a click context
        self._add_late_commands()
        return super().list_commands(ctx)

    def get_command(self, ctx, cmd_name):  # noqa: ANN001 — a click context
        self._add_late_commands()
        return super().get_command(ctx, cmd_name)

    def _add_late_commands(self) -> None:
        add_registered_analyses()
        for info in analyze_app.registered_commands:
            if (info.name or get_command_name(info.callback.__name__)) not in self.commands:
                self.add_command(get_command_from_info(info, pretty_exceptions_short=True, rich_markup_mode="markdown"))


analyze_app = typer.Typer(
    help="The paper's analyses: doubt, ablations, BIG-Bench Mistake, paraphrase check, probes, doubt clusters.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
    cls=_AnalysisCommands,
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


def _add(name: str, target: str | Callable[[typer.Typer], None]) -> None:
    """Put the commands of the entry ``name`` on `analyze_app` (once), each with its own ``--partial``."""
    if name not in _added:
        register = importlib.import_module(target).register if isinstance(target, str) else target
        register(analyze_app)
        _added.add(name)
        for info in analyze_app.registered_commands:
            if info.callback is not None and "partial" not in inspect.signature(info.callback).parameters:
                info.callback = _with_partial(info.callback)


def add_registered_analyses() -> None:
    """Put the commands of every entry of `ANALYSES` (plug-ins loaded first) on `analyze_app`, once each."""
    for name, target in ANALYSES.items():
        _add(name, target)


def register_analyze_commands(app: typer.Typer) -> None:
    """Attach ``recovery analyze`` (with every built-in analysis sub-command, each with ``--partial``) to the
    main CLI ``app``; a plug-in's are added when the group is first used."""
    for module in COMMAND_MODULES:
        _add(module, module)
    app.add_typer(analyze_app, name="analyze")
