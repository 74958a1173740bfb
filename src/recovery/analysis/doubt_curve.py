"""Doubtfulness per sentence index after an intervention, and its baseline (paper §4.2, Fig. 5).

For every graded continuation of a run directory, the first ``sentences`` (20) sentences of its reasoning
(the continuation text up to the closing think tag, split by `recovery.doubt.split_sentences` with the
configured splitter: the project's by default, the authors' spaCy-based one on request) are classified by
a doubt detector (`recovery.analysis.doubt_judge`: lexical by default, the LLM judge optionally). The
doubt rate at index i is the share of windows with an i-th sentence whose i-th sentence is
doubtful, per intervention and model, and split by whether the continuation was graded correct
("recovered"). Sentences the judge gave no verdict for leave the denominator and are counted. Under the
authors' protocol (``DoubtConfig.protocol = "reference"``, `recovery.analysis.doubt_units`) the units are
the authors': sentences of the whole continuation, each cut to 1,000 characters.

The baseline is the doubt rate in unperturbed reasoning: one window of ``sentences`` consecutive sentences
at a random position in each original trace (the ``traces`` table; only the traces the filter kept when
the filter stage ran). A trace with fewer sentences contributes all of them (counted as "short"). Each
trace's window comes from ``random.Random(f"doubt-baseline/{seed}/{trace_id}")``, so it does not depend
on the order or the number of traces, and the same seed gives the same numbers. The paper reports 0.153.

Written to ``RUN_DIR/analysis/doubt/`` (atomically): ``sentences.parquet`` (one row per classified
sentence after an intervention: `SENTENCES_SCHEMA`, read by the doubt-phrase clustering),
``baseline.parquet`` (`BASELINE_SCHEMA`) and ``summary.json`` (counts per cell, skips, settings), from which
`DoubtResult.load` (`recovery.analysis.doubt_result`) rebuilds everything the report shows, including which
splitter, detector and grading protocol produced the numbers.
"""

from __future__ import annotations

import json
import os
import random
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import pyarrow as pa
import pyarrow.parquet as pq

from recovery.analysis.doubt_judge import DoubtDetector, LexicalDetector
from recovery.analysis.doubt_result import ANALYSIS_NAME, PAPER_BASELINE, SUMMARY_FILE, DoubtResult
from recovery.analysis.doubt_units import reasoning_after_intervention
from recovery.configs import ConfigError
from recovery.doubt import SENTENCE_SPLITTERS
from recovery.generation import batched
from recovery.plan import UnitRules, unit_rules
from recovery.report.sections_store import analysis_dir
from recovery.run_dir import Run, open_run
from recovery.segment import SegmentationError, split_reasoning
from recovery.store import atomic_write_text

__all__ = [
    "ANALYSIS_NAME",
    "BASELINE_SCHEMA",
    "PAPER_BASELINE",
    "SENTENCES_SCHEMA",
    "DoubtConfig",
    "DoubtResult",
    "analyze_doubt",
    "baseline_window",
    "reasoning_after_intervention",
]

SENTENCES_FILE = "sentences.parquet"
BASELINE_FILE = "baseline.parquet"

SENTENCES_SCHEMA = pa.schema(
    [
        ("continuation_id", pa.string()),
        ("chain_id", pa.string()),
        ("model", pa.string()),
        ("intervention", pa.string()),
        ("target_t", pa.float64()),
        ("sentence_index", pa.int64()),
        ("sentence", pa.string()),
        ("doubt", pa.bool_()),
        ("detector", pa.string()),
        ("recovered", pa.bool_()),
    ]
)
BASELINE_SCHEMA = pa.schema(
    [
        ("trace_id", pa.string()),
        ("model", pa.string()),
        ("window_start", pa.int64()),
        ("sentence_index", pa.int64()),
        ("sentence", pa.string()),
        ("doubt", pa.bool_()),
        ("detector", pa.string()),
    ]
)


@dataclass
class DoubtConfig:
    """Settings of the doubt analysis. ``sentences``: the window after the intervention (paper: 20);
    ``seed``: the baseline windows; ``chunk``: continuations classified together (the judge's batches);
    ``protocol``: whose units (`recovery.plan.doubt`: ``default``, the continuation's reasoning,
    or ``reference``, the authors' units of the whole continuation cut to 1,000 characters); ``splitter``:
    how sentences are found (`recovery.doubt.SENTENCE_SPLITTERS`; None: the protocol's — "default", the
    project's, or "reference", the authors' spaCy sentencizer inside blank-line segments)."""

    sentences: int = 20
    seed: int = 0
    chunk: int = 512
    splitter: str | None = None
    protocol: str = "default"

    def __post_init__(self) -> None:
        if self.splitter is not None and self.splitter not in SENTENCE_SPLITTERS:
            raise ValueError(f"splitter must be one of {', '.join(SENTENCE_SPLITTERS)}, got {self.splitter!r}")
        self.splitter = unit_rules(self.protocol, self.splitter).splitter  # also checks the protocol
        if self.sentences < 1:
            raise ValueError(f"sentences must be ≥ 1, got {self.sentences}")
        if self.chunk < 1:
            raise ValueError(f"chunk must be ≥ 1, got {self.chunk}")

    @property
    def rules(self) -> UnitRules:
        """How units are found (`recovery.plan.unit_rules`)."""
        return unit_rules(self.protocol, self.splitter)


def baseline_window(sentences: Sequence[str], n: int, rng: random.Random) -> tuple[int, list[str]]:
    """``(start, window)``: ``n`` consecutive sentences from a uniform random start (all when fewer)."""
    if len(sentences) <= n:
        return 0, list(sentences)
    start = rng.randrange(len(sentences) - n + 1)
    return start, list(sentences[start : start + n])


# -- computation -----------------------------------------------------------------------------------------------


class _ParquetOut:
    """Stream record batches into a Parquet file that appears (atomically) only on a clean exit."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self.path, self.schema = path, schema
        self.tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        self.writer: pq.ParquetWriter | None = None

    def __enter__(self) -> Self:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.writer = pq.ParquetWriter(self.tmp, self.schema)
        return self

    def write(self, columns: dict[str, list]) -> None:
        if columns and next(iter(columns.values())):
            assert self.writer is not None
            self.writer.write_table(pa.Table.from_pydict(columns, schema=self.schema))

    def __exit__(self, exc_type, exc, tb) -> None:
        assert self.writer is not None
        self.writer.close()
        if exc_type is None:
            os.replace(self.tmp, self.path)
        else:
            self.tmp.unlink(missing_ok=True)


def _bar(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="item", disable=not enabled, leave=False)


def _classify(detector: DoubtDetector, windows: list[list[str]]) -> list[list[bool | None]]:
    """Classify the sentences of several windows in one detector call; labels come back per window."""
    flat = [s for w in windows for s in w]
    labels = detector.classify(flat) if flat else []
    if len(labels) != len(flat):
        raise RuntimeError(f"detector {detector.name!r} returned {len(labels)} labels for {len(flat)} sentences")
    out, pos = [], 0
    for w in windows:
        out.append(labels[pos : pos + len(w)])
        pos += len(w)
    return out


def _note_skips(result: DoubtResult, stage: str, detector: DoubtDetector, before: Counter) -> None:
    for reason, count in (detector.skips - before).items():
        result.skips[(stage, f"detector:{reason}")] += count
    for reason, reply in getattr(detector, "examples", {}).items():
        result.examples.setdefault(reason, reply)


def _continuations(
    run: Run, cfg: DoubtConfig, detector: DoubtDetector, result: DoubtResult, out: _ParquetOut, progress: bool
) -> None:
    table = run.tables.continuations
    if not table.exists() or table.count() == 0:
        return
    chains = {r["id"]: r for r in run.chain_rows(["id", "model", "intervention", "category", "target_t"])}
    verdicts = {r["id"]: r["verdict"] for r in run.grade_rows(["id", "verdict"])} if run.tables.grades.exists() else {}
    bar = _bar(table.count(), "doubt [continuations]", progress)
    rows = run.continuation_rows(["id", "chain_id", "text", "model"])
    for chunk in batched(rows, cfg.chunk):
        items = []
        for row in chunk:
            chain = chains.get(row["chain_id"])
            if chain is None:
                result.skips[("continuations", "unknown_chain")] += 1
            elif row["id"] not in verdicts:
                result.skips[("continuations", "ungraded")] += 1
            else:
                close = run.think_tags(row["model"] or chain["model"])[1]
                window = cfg.rules.continuation_units(row["text"] or "", cfg.sentences, close)
                if not window:
                    result.skips[("continuations", "no_sentences")] += 1
                else:
                    items.append((row, chain, verdicts[row["id"]] == "correct", window))
        before = Counter(detector.skips)
        labels = _classify(detector, [it[3] for it in items])
        _note_skips(result, "continuations", detector, before)
        cols: dict[str, list] = {name: [] for name in SENTENCES_SCHEMA.names}
        for (row, chain, recovered, window), flags in zip(items, labels):
            key = (chain["model"], chain["intervention"], chain["category"] or "other", recovered)
            result.windows[key] += 1
            for index, (sentence, doubt) in enumerate(zip(window, flags), 1):
                if doubt is None:
                    continue
                cell = result.cells.setdefault((*key, index), [0, 0])
                cell[0] += 1
                cell[1] += int(doubt)
                for name, value in (
                    ("continuation_id", row["id"]),
                    ("chain_id", row["chain_id"]),
                    ("model", chain["model"]),
                    ("intervention", chain["intervention"]),
                    ("target_t", chain["target_t"]),
                    ("sentence_index", index),
                    ("sentence", sentence),
                    ("doubt", doubt),
                    ("detector", detector.name),
                    ("recovered", recovered),
                ):
                    cols[name].append(value)
        out.write(cols)
        bar.update(len(chunk))
    bar.close()


def _baseline(
    run: Run, cfg: DoubtConfig, detector: DoubtDetector, result: DoubtResult, out: _ParquetOut, progress: bool
) -> None:
    table = run.tables.traces
    if not table.exists():
        return
    kept = run.kept_ids() if run.tables.kept.exists() else None
    if kept is not None:
        result.baseline_source = "traces kept by the filter"
    bar = _bar(table.count(), "doubt [baseline]", progress)
    for chunk in batched(run.trace_rows(["id", "model", "text"]), cfg.chunk):
        items = []
        for row in chunk:
            if kept is not None and row["id"] not in kept:
                continue
            try:
                reasoning = split_reasoning(row["text"] or "", record=f"trace {row['id']}").reasoning
            except SegmentationError:
                result.skips[("baseline", "no_think_tag")] += 1
                continue
            sentences = cfg.rules.units(reasoning, None)
            if not sentences:
                result.skips[("baseline", "empty_reasoning")] += 1
                continue
            rng = random.Random(f"doubt-baseline/{cfg.seed}/{row['id']}")
            start, window = baseline_window(sentences, cfg.sentences, rng)
            items.append((row, start, window, len(sentences) < cfg.sentences))
        before = Counter(detector.skips)
        labels = _classify(detector, [it[2] for it in items])
        _note_skips(result, "baseline", detector, before)
        cols: dict[str, list] = {name: [] for name in BASELINE_SCHEMA.names}
        for (row, start, window, short), flags in zip(items, labels):
            result.baseline_traces[row["model"]] += 1
            result.baseline_short[row["model"]] += int(short)
            for position, (sentence, doubt) in enumerate(zip(window, flags), 1):
                if doubt is None:
                    continue
                cell = result.baseline.setdefault((row["model"], position), [0, 0])
                cell[0] += 1
                cell[1] += int(doubt)
                for name, value in (
                    ("trace_id", row["id"]),
                    ("model", row["model"]),
                    ("window_start", start),
                    ("sentence_index", position),
                    ("sentence", sentence),
                    ("doubt", doubt),
                    ("detector", detector.name),
                ):
                    cols[name].append(value)
        out.write(cols)
        bar.update(len(chunk))
    bar.close()


def _summary_text(obj: dict[str, Any]) -> str:
    """JSON with one line per key and one line per row of the row lists (readable, still diff-friendly)."""
    parts = []
    for key, value in obj.items():
        if isinstance(value, list) and value:
            rows = ",\n  ".join(json.dumps(v, ensure_ascii=False) for v in value)
            parts.append(f"{json.dumps(key)}: [\n  {rows}\n ]")
        else:
            parts.append(f"{json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
    return "{\n " + ",\n ".join(parts) + "\n}\n"


def grading_protocol(run_dir: str | os.PathLike) -> str | None:
    """How the run's continuations were graded (`GradingConfig.protocol`), from its manifest; None when the
    directory has no readable run config (e.g. imported traces only, written by hand)."""

    try:
        return open_run(run_dir).config.grading.protocol()
    except (ConfigError, OSError, ValueError):
        return None


def analyze_doubt(
    run_dir: str | os.PathLike,
    detector: DoubtDetector | None = None,
    config: DoubtConfig | None = None,
    *,
    progress: bool = True,
) -> DoubtResult:
    """Classify the sentences after every intervention and the baseline windows of ``run_dir``; write
    ``sentences.parquet``, ``baseline.parquet`` and ``summary.json`` under ``analysis/doubt/`` and return
    the counts. ``detector`` defaults to the lexical one."""
    run_path = Path(run_dir)
    run = open_run(run_path)
    if not (run.tables.traces.exists() or run.tables.continuations.exists()):
        raise ValueError(f"{run_path} holds neither a traces nor a continuations table: not a run directory")
    cfg = config or DoubtConfig()
    detector = detector or LexicalDetector()
    result = DoubtResult(
        detector=detector.name,
        sentences=cfg.sentences,
        seed=cfg.seed,
        splitter=cfg.splitter,
        grading=grading_protocol(run_path),
        protocol=cfg.protocol,
    )
    out = analysis_dir(run_path, ANALYSIS_NAME)
    with _ParquetOut(out / SENTENCES_FILE, SENTENCES_SCHEMA) as sentences_out:
        _continuations(run, cfg, detector, result, sentences_out, progress)
    with _ParquetOut(out / BASELINE_FILE, BASELINE_SCHEMA) as baseline_out:
        _baseline(run, cfg, detector, result, baseline_out, progress)
    atomic_write_text(out / SUMMARY_FILE, _summary_text(result.to_json()))
    return result
