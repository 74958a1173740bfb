"""`run_paraphrase_check`: judge the sample (resumable), store the section, re-render the report."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from recovery.analysis.bbm import store_in_run
from recovery.analysis.paraphrase.constants import GENERATION_ERROR, NAME
from recovery.analysis.paraphrase.items import (
    ParaphraseItem,
    paraphrase_items,
    sample_per_domain,
)
from recovery.analysis.paraphrase.judge import (
    JUDGMENTS,
    ParaphraseCheckConfig,
    judge_messages,
    judgment_key,
    judgments_table,
    parse_equivalence_reply,
)
from recovery.analysis.paraphrase.rates import EquivalenceRate, equivalence_rates
from recovery.analysis.paraphrase.section import paraphrase_section
from recovery.backends.registry import make_generator as default_factory
from recovery.data.skips import Skips
from recovery.generation import GenerationRequest, Generator, SamplingParams, batched
from recovery.model_config import ModelConfig
from recovery.report.data import Section
from recovery.report.sections_store import save_section
from recovery.store import Table as StoreTable


@dataclass
class ParaphraseResult:
    """What `run_paraphrase_check` did: judgments written now, the sample's judgments, rates, skips."""

    written: int
    rows: list[dict[str, Any]]
    rates: list[EquivalenceRate]
    skips: Skips
    section: Section
    report_html: Path | None


def run_paraphrase_check(
    run_dir: str | Path,
    config: ParaphraseCheckConfig,
    *,
    make_generator: Callable[[ModelConfig], Generator] | None = None,
    progress: bool = True,
    rerender: bool = True,
) -> ParaphraseResult:
    """Judge a seeded sample of the run's paraphrase chains, store the judgments and the section.

    Resumable: chains already judged under the same key are not asked again (generation errors are).
    ``make_generator`` builds the judge's backend (default `recovery.backends.registry.make_generator`).
    """
    skips = Skips()
    items = paraphrase_items(run_dir, config.interventions, skips=skips)
    sample = sample_per_domain(items, config.per_domain, config.seed) if items else []
    table = judgments_table(run_dir)
    table.clean_stale()
    keyed = [(judgment_key(item, config), item) for item in sample]
    done = {r["id"] for r in table.iter_rows(["id", "verdict"]) if r["verdict"] != GENERATION_ERROR}
    todo = [(k, item) for k, item in keyed if k not in done]
    written = 0
    if todo:
        if make_generator is None:

            def make_generator(model: ModelConfig) -> Generator:
                return default_factory(model, seed=config.seed)

        written = _judge(todo, config, make_generator(config.judge), progress, table)
    rows = _read_judgments(table, [k for k, _ in keyed])
    section = paraphrase_section(rows, config=config, n_available=Counter(i.domain for i in items), skips=skips)
    save_section(run_dir, NAME, section)
    html = store_in_run(run_dir, section, NAME) if rerender else None
    return ParaphraseResult(written, rows, equivalence_rates(rows), skips, section, html)


def _judge(
    todo: list[tuple[str, ParaphraseItem]],
    config: ParaphraseCheckConfig,
    generator: Generator,
    progress: bool,
    table: StoreTable,
) -> int:
    sampling = SamplingParams(
        n=1,
        temperature=config.temperature,
        top_p=1.0,
        top_k=None,
        seed=config.seed,
        max_new_tokens=config.max_new_tokens,
    )
    written = 0
    bar = tqdm(
        total=len(todo),
        desc=f"paraphrase judge [{config.judge.name}]",
        unit="chain",
        disable=not progress,
        dynamic_ncols=True,
    )
    try:
        with table.writer(JUDGMENTS) as writer:
            for batch in batched(todo, config.flush_every):
                by_key = dict(batch)
                requests = [
                    GenerationRequest(request_id=k, sampling=sampling, messages=judge_messages(item))
                    for k, item in batch
                ]
                for result in generator.generate(requests):
                    item = by_key[result.request_id]
                    reply = n_tokens = finish = None
                    if result.error or not result.samples:
                        verdict, detail = GENERATION_ERROR, (result.error or "no samples returned")[:500]
                    else:
                        s = result.samples[0]
                        reply, n_tokens, finish = s.text, s.n_tokens, s.finish_reason
                        verdict, detail = parse_equivalence_reply(reply, finish_reason=finish)
                    writer.add(
                        {
                            "id": result.request_id,
                            "chain_id": item.chain_id,
                            "domain": item.domain,
                            "model": item.model,
                            "intervention": item.intervention,
                            "target_t": item.target_t,
                            "judge": config.judge.name,
                            "verdict": verdict,
                            "detail": detail,
                            "reply": reply,
                            "n_tokens": n_tokens,
                            "finish_reason": finish,
                        }
                    )
                    written += 1
                writer.flush()
                bar.update(len(batch))
    finally:
        bar.close()
        generator.close()
    return written


def _read_judgments(table: StoreTable, keys: Sequence[str]) -> list[dict[str, Any]]:
    wanted = set(keys)
    best: dict[str, dict[str, Any]] = {}
    for row in table.iter_rows():
        if row["id"] in wanted and (row["id"] not in best or best[row["id"]]["verdict"] == GENERATION_ERROR):
            best[row["id"]] = row
    return sorted(best.values(), key=lambda r: (r["domain"], r["chain_id"]))
