"""``recovery analyze doubt`` and ``recovery analyze doubt-validate``: the doubt analysis from the command line.

The functions `doubt_analysis` and `doubt_validation` do the work (and are what tests and notebooks call);
`register` wraps them as Typer sub-commands. Both store their report section in the run directory
(`recovery.report.sections_store`) and re-render the run's report.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recovery.analysis.agreement import load_labels, validate, validation_section
from recovery.analysis.doubt_judge import LexicalDetector, load_judge_config, make_judge
from recovery.configs import ConfigError
from recovery.protocol import DEFAULT_STYLE
from recovery.run_dir import is_run_dir, open_run
from recovery.run_dir.state import require_finished
from recovery.store import atomic_write_text

if TYPE_CHECKING:  # the analysis modules (pyarrow, matplotlib) load when a command runs, not at CLI start
    from recovery.analysis.agreement import Validation
    from recovery.analysis.doubt_curve import DoubtResult
    from recovery.model_config import ModelConfig

__all__ = ["VALIDATION_NAME", "doubt_analysis", "doubt_validation", "register", "rerender_report", "run_doubt_protocol"]

VALIDATION_NAME = "doubt_validation"
GeneratorFactory = Callable[["ModelConfig"], Any]


def rerender_report(run_dir: str | os.PathLike) -> Path:
    """Re-write ``RUN_DIR/report`` so it shows the stored analysis sections; returns the HTML path.
    Raises `recovery.configs.ConfigError` when ``run_dir`` has no run config."""
    from recovery.report.run_report import rewrite_report  # lazy: loads matplotlib

    return rewrite_report(run_dir)


def _judge(judge_config: str | os.PathLike | None, make_generator: GeneratorFactory | None, protocol: str = "default"):

    if judge_config is None:
        return None
    return make_judge(load_judge_config(judge_config), make_generator, protocol=protocol)


def run_doubt_protocol(run_dir: str | os.PathLike) -> str:
    """The name of the style of the ``doubt`` part of the run in ``run_dir`` (`recovery.protocol`): its plan's,
    or the default style's without a readable run config."""

    if not is_run_dir(run_dir):
        return DEFAULT_STYLE
    try:
        return open_run(run_dir).plan.doubt.protocol
    except (ConfigError, OSError, ValueError):
        return DEFAULT_STYLE


def _close(detector: Any) -> None:
    generator = getattr(detector, "generator", None)
    if generator is not None and hasattr(generator, "close"):
        generator.close()


def doubt_analysis(
    run_dir: str | os.PathLike,
    *,
    judge_config: str | os.PathLike | None = None,
    sentences: int = 20,
    seed: int = 0,
    splitter: str | None = None,
    protocol: str | None = None,
    make_generator: GeneratorFactory | None = None,
    progress: bool = True,
    render: bool = True,
) -> tuple[DoubtResult, Path | None]:
    """Run the doubt analysis on ``run_dir`` (lexical detector, or the LLM judge of ``judge_config``; sentences
    found by ``splitter``, see `recovery.doubt.SENTENCE_SPLITTERS`, None: the protocol's), store the section
    "Doubt after the intervention" and re-render the report (``render``). Returns the counts and the report's
    path. ``protocol`` (None: the run's, `run_doubt_protocol`): ``reference`` takes the authors' units and
    reading of the judge's replies (`recovery.analysis.doubt_units`)."""
    from recovery.analysis.doubt_curve import ANALYSIS_NAME, DoubtConfig, analyze_doubt  # lazy: loads matplotlib
    from recovery.analysis.doubt_section import doubt_section  # lazy: loads matplotlib
    from recovery.report.sections_store import save_section  # lazy: loads matplotlib

    require_finished(run_dir, "recovery analyze doubt")  # an unfinished run: refused before any work
    protocol = run_doubt_protocol(run_dir) if protocol is None else protocol
    # A bad splitter or protocol fails here, before a judge loads.
    config = DoubtConfig(sentences=sentences, seed=seed, splitter=splitter, protocol=protocol)
    detector = _judge(judge_config, make_generator, protocol) or LexicalDetector()
    try:
        result = analyze_doubt(run_dir, detector, config, progress=progress)
    finally:
        _close(detector)
    save_section(run_dir, ANALYSIS_NAME, doubt_section(result))
    return result, (rerender_report(run_dir) if render else None)


def doubt_validation(
    labels_path: str | os.PathLike,
    *,
    run_dir: str | os.PathLike | None = None,
    judge_config: str | os.PathLike | None = None,
    make_generator: GeneratorFactory | None = None,
    render: bool = True,
) -> tuple[Validation, Path | None]:
    """Score the lexical detector (and the judge of ``judge_config``, with their mutual agreement) against
    the labels in ``labels_path``. With ``run_dir``, store the section "Doubt detector validation" there
    (plus ``metrics.json`` and ``predictions.jsonl``) and re-render its report."""
    from recovery.report.sections_store import analysis_dir, save_section  # lazy: loads matplotlib

    labels = load_labels(labels_path)
    detectors: list[Any] = [LexicalDetector()]
    judge = _judge(judge_config, make_generator)
    try:
        if judge is not None:
            detectors.append(judge)
        validation = validate(labels, detectors)
    finally:
        _close(judge)
    if run_dir is None:
        return validation, None
    out = analysis_dir(run_dir, VALIDATION_NAME)
    metrics = {name: _metrics_json(m) for name, m in validation.results.items()}
    payload = {
        "labels": str(labels_path),
        "n_labels": validation.n_labels,
        "n_doubt": validation.n_doubt,
        "skipped": validation.skipped,
        "metrics": metrics,
        "agreement": None
        if validation.pair is None
        else {"a": validation.pair[0], "b": validation.pair[1], **_metrics_json(validation.pair[2])},
    }
    atomic_write_text(out / "metrics.json", json.dumps(payload, indent=1, ensure_ascii=False))
    lines = [
        json.dumps(
            {"text": s.text, "label": s.label, **{n: p[i] for n, p in validation.predictions.items()}},
            ensure_ascii=False,
        )
        for i, s in enumerate(labels)
    ]
    atomic_write_text(out / "predictions.jsonl", "\n".join(lines) + "\n")
    save_section(run_dir, VALIDATION_NAME, validation_section(validation, labels, labels_name=Path(labels_path).name))
    return validation, (rerender_report(run_dir) if render else None)


def _metrics_json(obj: Any) -> dict[str, Any]:
    """A metrics dataclass as JSON (NaN as null)."""
    from dataclasses import asdict

    def clean(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        return None if isinstance(x, float) and math.isnan(x) else x

    return clean(asdict(obj))


# -- Typer -----------------------------------------------------------------------------------------------------


def register(analyze_app: Any) -> None:
    """Add ``doubt`` and ``doubt-validate`` to the ``recovery analyze`` Typer group."""
    import typer
    from rich.console import Console
    from rich.table import Table as RichTable
    from rich.text import Text

    console = Console(stderr=True, soft_wrap=True, markup=False, highlight=False)  # user text verbatim

    def fail(message: str) -> None:
        console.print(Text.assemble(("error:", "bold red"), f" {message}"))
        raise typer.Exit(code=2)

    @analyze_app.command("doubt")
    def doubt_command(
        run_dir: Path = typer.Argument(..., help="A run directory (generated or imported traces)."),
        judge_config: Path | None = typer.Option(
            None, "--judge-config", help="YAML of the LLM judge (default: lexical detector)."
        ),
        sentences: int = typer.Option(20, "--sentences", min=1, help="Sentences after the intervention (paper: 20)."),
        seed: int = typer.Option(0, "--seed", help="Seed of the baseline windows."),
        splitter: str | None = typer.Option(
            None,
            "--splitter",
            help="Sentence splitter: 'default' (the project's) or 'reference' (the authors': spaCy's sentencizer "
            "inside blank-line segments; needs the analysis extra). Default: the protocol's.",
        ),
        protocol: str | None = typer.Option(
            None,
            "--protocol",
            help="Whose doubt units: 'default' (the project's) or 'reference' (the authors': sentences of the whole "
            "continuation cut to 1,000 characters, their reading of the judge's replies). Default: the run's.",
        ),
        progress: bool = typer.Option(True, "--progress/--no-progress"),
    ) -> None:
        """Doubt rate per sentence after the intervention (paper §4.2, Fig. 5), with its baseline.

        Example: `recovery analyze doubt runs/toy --sentences 20 --seed 0 --protocol reference`
        """
        try:
            result, _ = doubt_analysis(
                run_dir,
                judge_config=judge_config,
                sentences=sentences,
                seed=seed,
                splitter=splitter,
                protocol=protocol,
                progress=progress,
                render=False,
            )
        except (ConfigError, ValueError) as err:
            fail(str(err))
            return
        named = f", protocol {result.protocol}" if result.protocol != DEFAULT_STYLE else ""
        table = RichTable(title=f"doubt ({result.detector}, {result.splitter} splitter{named}) — {run_dir}")
        for col in ("part", "items", "sentences", "doubt rate"):
            table.add_column(col, justify="left" if col == "part" else "right")
        total = result.curve()
        n, k = sum(p[0] for p in total), sum(p[1] for p in total)
        table.add_row("after intervention", str(result.n_windows()), str(n), f"{k / n:.3f}" if n else "–")
        bn, bk = result.baseline_counts()
        table.add_row("baseline", str(sum(result.baseline_traces.values())), str(bn), f"{bk / bn:.3f}" if bn else "–")
        Console(markup=False, highlight=False).print(table)
        if result.skips:
            console.print("skipped: " + ", ".join(f"{s}/{r}={c}" for (s, r), c in sorted(result.skips.items())))
        _report(run_dir, console)

    @analyze_app.command("doubt-validate")
    def doubt_validate_command(
        labels: Path = typer.Argument(..., help="JSONL with {'text': str, 'label': bool} per line."),
        run_dir: Path | None = typer.Option(None, "--run-dir", help="Store the section in this run directory."),
        judge_config: Path | None = typer.Option(None, "--judge-config", help="YAML of the LLM judge to validate too."),
    ) -> None:
        """Doubt detectors against hand labels: accuracy, per-class P/R/F1, Cohen's κ (paper App. D.3).

        Example: `recovery analyze doubt-validate bench/data/doubt_labels_real_traces.jsonl --run-dir runs/toy`
        """
        try:
            validation, _ = doubt_validation(labels, run_dir=run_dir, judge_config=judge_config, render=False)
        except (ConfigError, ValueError) as err:
            fail(str(err))
            return
        table = RichTable(
            title=f"doubt detectors vs {labels.name} ({validation.n_labels} sentences, {validation.n_doubt} doubtful)"
        )
        table.add_column("detector")
        for col in ("n", "accuracy", "κ", "P doubt", "R doubt", "F1 doubt", "P none", "R none", "F1 none"):
            table.add_column(col, justify="right")
        for name, m in validation.results.items():
            cells = (
                m.accuracy,
                m.kappa,
                m.doubt.precision,
                m.doubt.recall,
                m.doubt.f1,
                m.no_doubt.precision,
                m.no_doubt.recall,
                m.no_doubt.f1,
            )
            table.add_row(name, str(m.n), *("–" if math.isnan(x) else f"{x:.3f}" for x in cells))
        Console(markup=False, highlight=False).print(table)
        if validation.pair is not None:
            a, b, agr = validation.pair
            Console(markup=False, highlight=False).print(
                f"agreement {a} vs {b}: κ={agr.kappa:.3f}, agreement={agr.accuracy:.3f} on {agr.n} sentences"
            )
        if run_dir is not None:
            _report(run_dir, console)

    def _report(run_dir: Path, console: Any) -> None:
        try:
            console.print(f"report: {rerender_report(run_dir)}")
        except ConfigError as err:
            console.print(Text.assemble(("section stored, report not re-rendered:", "yellow"), f" {err}"))
