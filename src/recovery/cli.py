"""The ``recovery`` command line.

Examples::

    recovery demo                              # the embedded default: tiny reasoner on the toy world
    recovery run eval/logic.yaml               # the whole benchmark from a YAML config
    recovery run eval/logic.yaml --stages chains,continuations
    recovery continuations eval/logic.yaml     # one stage on its own
    recovery report runs/logic                 # (re)write the report of a run directory
    recovery interventions                     # list the registered interventions
    recovery serve-rewards --port 8000         # the rewards as an HTTP service (verl, OpenRLHF, any client)
    recovery view runs/logic                   # browse a run chain by chain in a web browser
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text
from typer.core import TyperGroup

from recovery.analysis.commands import register_analyze_commands
from recovery.integrations.server import register_serve_command
from recovery.interventions.registry import INTERVENTIONS
from recovery.pipeline import load_run_config, run_pipeline
from recovery.training.commands import register_train_commands
from recovery.training.wandb_benchmark import log_run_to_wandb
from recovery.training_data.commands import register_export_command
from recovery.viewer import register_view_command

try:  # typer vendors its own click (typer ≥ 0.20); its exceptions are those raised here
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as click_exceptions

from recovery.configs import ConfigError
from recovery.pipeline.outcome import EXIT_NOTHING_MEASURED, NothingMeasured
from recovery.pipeline.stages import STAGES
from recovery.process_guard import end_on_interrupt
from recovery.user_errors import user_error_message

INTERRUPTED = "interrupted; re-run the same command to resume"
INTERRUPTED_AT_EXIT = "interrupted while exiting, after the command had ended"
EXIT_INTERRUPTED = 130


class _Commands(TyperGroup):
    """Every command's errors a user causes end in one line and exit 2; a run that measured nothing (every
    request of a stage failed, or the filter kept no trace) in one line saying why and exit 1; Ctrl-C and
    SIGTERM end in one line (exit 130) instead of tracebacks; usage errors (a missing option) are one line too."""

    def invoke(self, ctx):  # noqa: ANN001 — a click context
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _interrupt)
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort):
            raise
        except click_exceptions.UsageError as err:
            where = err.ctx.command_path if err.ctx is not None else "recovery"
            _fail(f"{where}: {err.format_message()}")
        except KeyboardInterrupt:
            console.print(INTERRUPTED)
            raise typer.Exit(code=EXIT_INTERRUPTED) from None
        except NothingMeasured as err:  # the stages ran, but there is no result: not a success
            console.print(_error_line(str(err)))  # a server's words verbatim
            raise typer.Exit(code=EXIT_NOTHING_MEASURED) from None
        except Exception as err:  # noqa: BLE001 — only user errors are turned into one line; the rest re-raise
            message = user_error_message(err)
            if message is None:
                raise
            _fail(message)


def _interrupt(signum, frame) -> None:  # noqa: ANN001 — a signal handler
    raise KeyboardInterrupt


app = typer.Typer(
    help="Measure how reasoning models recover from interventions on their chain of thought.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",
    cls=_Commands,
    pretty_exceptions_show_locals=False,
)
# One line per error (grep-able). Printed text carries user and file text (config values, paths, model names,
# parser and server messages): never read as markup, so it appears verbatim; our styling is explicit (`Text`).
console = Console(stderr=True, soft_wrap=True, markup=False, highlight=False)
_stdout = Console(markup=False, highlight=False)  # results (tables, summaries) on stdout, verbatim too


def _error_line(message: str, label: str = "error:", style: str = "bold red") -> Text:
    """``label`` styled, then ``message`` verbatim (never parsed as markup)."""
    return Text.assemble((label, style), " ", message)


def _fail(message: str) -> None:
    """One error line and exit 2; ``message`` (user and server text) is printed verbatim, never as markup."""
    console.print(_error_line(message))
    raise typer.Exit(code=2)


def _run(
    config_path: Path,
    stages: list[str] | None,
    run_dir: str | None,
    progress: bool,
    executor: str | None = None,
    ray_address: str | None = None,
) -> None:

    overrides = {"run_dir": run_dir} if run_dir else None
    config = load_run_config(config_path, overrides)
    if executor or ray_address:  # the config's executor settings, with the flags' kind and address
        import dataclasses

        if executor not in (None, "local", "ray"):
            _fail(f"--executor: {executor!r} is not one of local, ray")
        chosen = dataclasses.replace(config.executor, kind=executor or "ray")
        if ray_address:
            chosen = dataclasses.replace(chosen, address=ray_address)
        config = dataclasses.replace(config, executor=chosen)
    try:
        summary = run_pipeline(config, stages=stages or tuple(STAGES), progress=progress)
    except NothingMeasured as err:
        _print_summary(err.summary)  # what was done and skipped, then the one line saying why nothing
        raise
    _print_summary(summary)
    if config.wandb.project:
        console.print(f"W&B: {log_run_to_wandb(config.run_dir, config.wandb)}")


def _print_summary(summary) -> None:
    table = RichTable(title=f"run {summary.run_dir}", show_header=True)
    table.add_column("stage")
    table.add_column("written", justify="right")
    for stage, count in summary.written.items():
        table.add_row(stage, str(count))
    console.print(table)
    if summary.skips:
        skips = RichTable(title="skipped (counted, with reasons)")
        skips.add_column("stage / reason")
        skips.add_column("count", justify="right")
        for key, count in summary.skips.items():
            skips.add_row(key, str(count))
        console.print(skips)
    if summary.failed_requests:  # every distinct reason a backend gave, verbatim
        failed = RichTable(title="failed requests (by reason)")
        for column in ("stage", "reason", "count"):
            failed.add_column(column, justify="right" if column == "count" else "left")
        for row in summary.failed_requests:
            failed.add_row(row["stage"], row["reason"], f"{row['count']} of {row['of']}")
        console.print(failed)
    for warning in summary.warnings:
        console.print(_error_line(warning, "warning:", "bold yellow"))
    if summary.grades:
        console.print("grades by verdict: " + ", ".join(f"{verdict} {n:,}" for verdict, n in summary.grades.items()))
    if summary.report:
        console.print(f"report: {summary.report}")


@app.command()
def run(
    config: Path = typer.Argument(..., help="YAML run config (see eval/*.yaml)."),
    stages: str | None = typer.Option(None, help="Comma-separated subset of stages to run."),
    run_dir: str | None = typer.Option(None, help="Override the config's run_dir."),
    progress: bool = typer.Option(True, help="Show progress bars."),
    executor: str | None = typer.Option(None, help="Where generation runs: local or ray (overrides the config)."),
    ray_address: str | None = typer.Option(None, help="The Ray cluster to join ('auto': this machine's); implies ray."),
) -> None:
    """Run the benchmark described by CONFIG; re-running resumes where a previous run stopped.

    Exit status: 0 when the run measured something; 1 when it measured nothing (every request of a stage
    failed, or the filter kept no trace: one line says why); 2 for a bad config or input; 130 interrupted.

    Example: `recovery run eval/logic.yaml --stages problems,traces,filter`
    """
    _run(config, stages.split(",") if stages else None, run_dir, progress, executor, ray_address)


def _stage_command(stage: str, description: str) -> None:
    def command(
        config: Path = typer.Argument(..., help="YAML run config."),
        run_dir: str | None = typer.Option(None, help="Override the config's run_dir."),
        progress: bool = typer.Option(True, help="Show progress bars."),
    ) -> None:
        _run(config, [stage], run_dir, progress)

    command.__doc__ = (
        f"Run only the `{stage}` stage of CONFIG ({description}; resumable).\n\n"
        f"Example: `recovery {stage} eval/logic.yaml`"
    )
    app.command(name=stage)(command)


for _stage in STAGES.values():
    if _stage.command:
        _stage_command(_stage.name, _stage.description)


@app.command()
def report(run_dir: Path = typer.Argument(..., help="A run directory written by `recovery run`.")) -> None:
    """(Re)write the Markdown + HTML report of RUN_DIR from its stored results.

    Example: `recovery report runs/logic`
    """
    from recovery.report.run_report import rewrite_report  # lazy: loads matplotlib

    path = rewrite_report(run_dir)
    console.print(f"report: {path}")


@app.command()
def compare(
    before: Path = typer.Argument(..., help="Run directory measured before training."),
    after: Path = typer.Argument(..., help="Run directory measured after training."),
    out: Path = typer.Option(Path("runs/compare"), help="Where to write the comparison report."),
    labels: str = typer.Option("before,after", help="Two comma-separated labels."),
    clean_before: Path | None = typer.Option(None, help="A run that measured clean accuracy only, before."),
    clean_after: Path | None = typer.Option(None, help="A run that measured clean accuracy only, after."),
) -> None:
    """Before/after report of two runs over what both measured: change in majority robustness per
    intervention and timestep, clean accuracy and length overhead, each with a 95 % interval paired over
    the shared chains; what only one run measured is listed. Runs that share nothing are refused.

    Example: `recovery compare runs/base runs/sft --out runs/compare`
    """
    from recovery.report import write_report  # lazy: loads matplotlib
    from recovery.report.compare import (  # lazy: loads matplotlib
        NothingToCompare,
        comparison_report,
        compute_comparison,
    )

    label_pair = tuple(labels.split(","))
    if len(label_pair) != 2:
        _fail(f"--labels needs two comma-separated names, got {labels!r}")
    if (clean_before is None) != (clean_after is None):
        _fail("--clean-before and --clean-after go together")
    clean_runs = (clean_before, clean_after) if clean_before is not None else None
    try:
        comp = compute_comparison(before, after, label_pair, clean_runs=clean_runs)
    except (ConfigError, NothingToCompare) as err:
        _fail(str(err))
        return
    paths = write_report(comparison_report(comp), out)
    Console(soft_wrap=True, markup=False, highlight=False).print(comp.summary)
    console.print(f"report: {paths.html}")


@app.command()
def interventions() -> None:
    """List the registered interventions with their category.

    Example: `recovery interventions`
    """

    table = RichTable(show_header=True)
    for col in ("name", "category", "family", "needs an LLM"):
        table.add_column(col, no_wrap=True)
    table.add_column("description")
    for name, spec in sorted(INTERVENTIONS.items(), key=lambda kv: (kv[1].family, kv[0])):
        table.add_row(name, str(spec.category), spec.family, "yes" if spec.needs_generator else "no", spec.description)
    _stdout.print(table)


@app.command()
def demo(
    out: Path = typer.Option(Path("runs/demo"), help="Where the demo writes its runs, model and reports."),
    quick: bool = typer.Option(False, help="A smaller, faster variant (fewer problems, timesteps, samples, steps)."),
    train: bool = typer.Option(True, help="Fine-tune and measure again (--no-train: measure only)."),
    grpo: bool = typer.Option(False, help="After SFT, also train with GRPO and the recovery reward."),
    grpo_only: bool = typer.Option(
        False, "--grpo-only", help="Train the base model with GRPO and the recovery reward alone (no SFT, no teacher)."
    ),
    wandb: bool = typer.Option(
        False, "--wandb", help="Report the GRPO stage's curves to W&B (project and mode from WANDB_* variables)."
    ),
    progress: bool = typer.Option(True, help="Show progress bars."),
) -> None:
    """The embedded default, on a CPU with no downloads: measure the tiny reasoner shipped with the package
    on held-out toy problems (seven toy interventions, N sampled continuations, grading, report), build SFT
    recovery traces from its own continuations and the toy teacher, fine-tune it with TRL, measure again and
    write a before/after report.

    Example: `recovery demo --quick`
    """
    from recovery.demo import run_demo  # lazy: loads matplotlib

    result = run_demo(out, quick=quick, train=train, grpo=grpo, grpo_only=grpo_only, wandb=wandb, progress=progress)
    _stdout.print(result.summary_table())
    if result.comparison_summary:
        _stdout.print(result.comparison_summary)
    if result.grpo_comparison is not None:
        rewards = result.training.get("grpo_rewards", {})
        _stdout.print(
            "\nWhat GRPO adds beyond SFT (reward means over training: "
            + ", ".join(f"{name} {value:+.3f}" for name, value in rewards.items())
            + ")"
        )
        _stdout.print(result.grpo_comparison.summary)
    if result.doubt_lines:
        _stdout.print("\nDoubt after the intervention (lexical detector), per stage:")
        for line in result.doubt_lines:
            _stdout.print(f"- {line}")
    console.print(f"report: {result.report}")
    console.print(f"browse the chains: {result.view_command}")


# The command groups that live with what they run: each module's register function adds its commands to `app`.
# `recovery export RUN --out DIR [--format hf|verl|openrlhf] [--push --repo-id ...]`: recovery.training_data.
register_export_command(app)
# `recovery train sft|grpo --config FILE`: TrlParser recipes, see recipes/ and recovery.training.
register_train_commands(app)
# `recovery analyze <name>`: the paper's analyses (doubt, ablations, BBM, probes, ...).
register_analyze_commands(app)
# `recovery serve-rewards`: the rewards over HTTP (recovery.integrations.server; FastAPI loaded when it runs).
register_serve_command(app)
# `recovery view RUN_DIR [--compare OTHER]`: the run viewer (recovery.viewer; FastAPI loaded when it serves).
register_view_command(app)


def main() -> None:
    """Console-script entry point: the command, then, through the interpreter's exit work (threads joined,
    atexit callbacks), Ctrl-C and SIGTERM still end the process in one line with exit 130
    (`recovery.process_guard.end_on_interrupt`)."""
    status: int | str | None = None
    try:
        app()
    except SystemExit as done:
        status = done.code
        raise
    finally:
        end_on_interrupt(None if status == EXIT_INTERRUPTED else INTERRUPTED_AT_EXIT, EXIT_INTERRUPTED)


if __name__ == "__main__":
    sys.exit(main())
