"""`run_bbm`: ask every model about every item (resumable), store the answers, write the section and reports."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from recovery.analysis.bbm.answers import ANSWERS, NAME, answer_key, answer_row, answers_table, read_answers
from recovery.analysis.bbm.config import BBMConfig, sampling_for
from recovery.analysis.bbm.data import BBMItem, load_bbm
from recovery.analysis.bbm.prompt import build_prompt
from recovery.analysis.bbm.report import bbm_section
from recovery.analysis.bbm.scoring import GENERATION_ERROR, TaskAccuracy, accuracy_table
from recovery.backends.registry import make_generator as default_factory
from recovery.data.skips import Skips
from recovery.data.sources import DataError, HubLoader
from recovery.generation import GenerationRequest, Generator, Message, batched
from recovery.ids import request_seed
from recovery.model_config import ModelConfig
from recovery.report.data import Section
from recovery.report.sections_store import save_section
from recovery.run_dir import open_run
from recovery.store import Table as StoreTable


@dataclass
class BBMResult:
    """What `run_bbm` did: answers written now, all current answers, accuracies, the report paths."""

    out: Path
    written: int
    rows: list[dict[str, Any]]
    accuracies: list[TaskAccuracy]
    skips: Skips
    report_html: Path
    section: Section


def run_bbm(
    config: BBMConfig,
    *,
    make_generator: Callable[[ModelConfig], Generator] | None = None,
    progress: bool = True,
    run_dir: str | Path | None = None,
    loader: HubLoader | None = None,
) -> BBMResult:
    """Ask every model of ``config`` to locate the first mistake of every item; store, score and report.

    Resumable: answers already stored under the same key are not asked again (generation errors are).
    Writes ``OUT/analysis/bbm/`` (answers + section) and ``OUT/report/``; with ``run_dir`` the section is
    also stored in that pipeline run directory and its report re-rendered.
    """
    if run_dir is not None:  # refuse a wrong --run-dir before hours of generation, not after
        open_run(run_dir).config  # noqa: B018 - reading it is the check
    skips = Skips()
    data = config.data
    hub = data.hub_copy(loader)
    items = load_bbm(data.tasks, path=data.path, hub=hub, task_column=data.task_column, limit=data.limit, skips=skips)
    if not items:
        raise DataError(
            f"no usable BIG-Bench Mistake items for tasks {data.tasks} ({skips.summary() or 'empty source'})"
        )
    if make_generator is None:

        def make_generator(model: ModelConfig) -> Generator:
            return default_factory(model, seed=config.sampling.seed)

    table = answers_table(config.out)
    table.clean_stale()
    done = {r["id"] for r in table.iter_rows(["id", "outcome"]) if r["outcome"] != GENERATION_ERROR}
    all_keys: list[str] = []
    written = 0
    for model in config.models:
        keyed = [(answer_key(model, item, config.sampling), item) for item in items]
        all_keys.extend(k for k, _ in keyed)
        todo = [(k, item) for k, item in keyed if k not in done]
        if todo:
            written += _answer(model, todo, config, make_generator, progress, table)
    rows = read_answers(table, all_keys)
    accuracies = accuracy_table(rows)
    section = bbm_section(rows, config=config, skips=skips)
    save_section(config.out, NAME, section)
    report_html = _write_reports(config, section, run_dir)
    return BBMResult(Path(config.out), written, rows, accuracies, skips, report_html, section)


def _answer(
    model: ModelConfig,
    todo: list[tuple[str, BBMItem]],
    config: BBMConfig,
    make_generator: Callable[[ModelConfig], Generator],
    progress: bool,
    table: StoreTable,
) -> int:
    generator = make_generator(model)
    written = 0
    bar = tqdm(total=len(todo), desc=f"bbm [{model.name}]", unit="item", disable=not progress, dynamic_ncols=True)
    try:
        with table.writer(ANSWERS) as writer:
            for batch in batched(todo, config.flush_every):
                by_key = dict(batch)
                requests = [
                    GenerationRequest(
                        request_id=key,
                        sampling=sampling_for(
                            model,
                            config.sampling,
                            seed=request_seed(config.sampling.seed, "bbm", model.name, item.id),
                        ),
                        messages=(Message("user", build_prompt(item)),),
                    )
                    for key, item in batch
                ]
                for result in generator.generate(requests):
                    item = by_key[result.request_id]
                    if result.error or not result.samples:
                        row = answer_row(
                            result.request_id,
                            model.name,
                            item,
                            None,
                            prompt_tokens=result.prompt_tokens,
                            error=result.error or "no samples returned",
                        )
                    else:
                        sample = result.samples[0]
                        row = answer_row(
                            result.request_id,
                            model.name,
                            item,
                            sample.text,
                            n_tokens=sample.n_tokens,
                            finish_reason=sample.finish_reason,
                            prompt_tokens=result.prompt_tokens,
                        )
                    writer.add(row)
                    written += 1
                writer.flush()  # one committed shard per batch: a kill loses at most one batch
                bar.update(len(batch))
    finally:
        bar.close()
        generator.close()
    return written


def _write_reports(config: BBMConfig, section: Section, run_dir: str | Path | None) -> Path:
    from recovery.report import ReportData, write_report  # lazy: loads matplotlib

    meta = {"models": ", ".join(m.name for m in config.models), "tasks": ", ".join(config.data.tasks)}
    paths = write_report(
        ReportData(meta=meta, sections=(section,), title=config.title, standard=False), Path(config.out) / "report"
    )
    if run_dir is not None:
        store_in_run(run_dir, section)
    return Path(paths.html)


def store_in_run(run_dir: str | Path, section: Section, name: str = NAME) -> Path:
    """Store ``section`` as analysis ``name`` of a pipeline run directory and re-render its report."""
    from recovery.report.run_report import store_section  # lazy: loads matplotlib

    return store_section(run_dir, name, section)
