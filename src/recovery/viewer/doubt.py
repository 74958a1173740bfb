"""Doubt after the intervention, as the run measured it: which units (sentences) of a continuation doubt.

When the run's doubt analysis was stored (``recovery analyze doubt``: ``RUN_DIR/analysis/doubt/``), its detector
(lexical or the LLM judge) already classified each unit: the viewer reads its flags back and says which detector
gave them. Otherwise the viewer runs the lexical detector (`recovery.analysis.doubt_judge.LexicalDetector`) on the
units the run's plan defines (`recovery.plan.UnitRules`: the first 20 sentences of the continuation's reasoning
under the project's protocol, of the whole continuation under the authors'), as that analysis would.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from recovery.analysis.doubt_curve import SENTENCES_FILE, DoubtConfig
from recovery.analysis.doubt_judge import LexicalDetector
from recovery.analysis.doubt_result import ANALYSIS_NAME, DoubtResult
from recovery.report.sections_store import analysis_dir
from recovery.run_dir import Run
from recovery.run_dir.positions import rows_at
from recovery.viewer.chains import RunChains


class RunDoubt:
    """The doubt flags of a run's continuations (see the module doc). ``detector`` names what gave them."""

    def __init__(self, run: Run, chains: RunChains) -> None:
        self.run, self.chains = run, chains
        stored = DoubtResult.load(run.path)
        path = analysis_dir(run.path, ANALYSIS_NAME) / SENTENCES_FILE
        self.stored = path if stored is not None and path.is_file() else None
        self.window = stored.sentences if self.stored else DoubtConfig().sentences
        self.detector = (
            f"{stored.detector} (stored doubt analysis)" if self.stored else "lexical (computed by the viewer)"
        )
        self.rules = run.plan.doubt
        self._lexical = LexicalDetector()
        self._flags = np.full(len(chains), -1, dtype=np.int8)  # per chain: -1 not known yet, 0 no, 1 yes

    def units(self, chain_id: str, continuations: list[dict[str, Any]]) -> dict[str, list[tuple[str, bool | None]]]:
        """The units after the intervention of each of one chain's ``continuations`` (rows with ``id``, ``text``,
        ``model``), each unit with its doubt flag (None: the detector gave no verdict), by continuation id."""
        if self.stored is not None:
            table = pq.read_table(
                self.stored,
                columns=["continuation_id", "sentence_index", "sentence", "doubt"],
                filters=[("chain_id", "=", chain_id)],
            ).sort_by("sentence_index")
            found: dict[str, list[tuple[str, bool | None]]] = {c["id"]: [] for c in continuations}
            for row in table.to_pylist():
                found.setdefault(row["continuation_id"], []).append((row["sentence"], row["doubt"]))
            return found
        return {c["id"]: self._lexical_units(c["text"], c["model"]) for c in continuations}

    def _lexical_units(self, text: str | None, model: str) -> list[tuple[str, bool | None]]:
        units = self.rules.continuation_units(text or "", self.window, self.run.think_tags(model)[1])
        return list(zip(units, self._lexical.classify(units)))

    def chain_flags(self, positions: np.ndarray) -> np.ndarray:
        """Whether any continuation of each chain in ``positions`` doubts after the intervention (computed once per
        chain, then remembered)."""
        unknown = positions[self._flags[positions] < 0]
        if len(unknown):
            if self.stored is not None:
                self._from_stored()
            else:
                self._lexical_flags(unknown)
        return self._flags[positions] == 1

    def _from_stored(self) -> None:
        table = pq.read_table(self.stored, columns=["chain_id", "doubt"])
        doubting = table.filter(pc.equal(table.column("doubt"), True)).column("chain_id").combine_chunks()
        self._flags[:] = 0
        where, _ = self.chains.lookup.find(pc.unique(doubting) if len(doubting) else pa.array([], pa.string()))
        self._flags[where] = 1

    def _lexical_flags(self, positions: np.ndarray) -> None:
        """The lexical detector over the continuations of the chains at ``positions``, 512 chains at a time."""
        rows_of = self.chains.continuations.positions
        for start in range(0, len(positions), 512):
            chunk = positions[start : start + 512]
            self._flags[chunk] = 0
            owners = [(int(i), rows_of(int(i))) for i in chunk]
            rows = np.concatenate([r for _, r in owners]) if owners else np.empty(0, dtype=np.int64)
            if not len(rows):
                continue
            owner = np.concatenate([np.full(len(r), i) for i, r in owners])
            table = rows_at(self.run.tables.continuations, rows, ["text", "model"])
            for i, text, model in zip(owner, table.column("text").to_pylist(), table.column("model").to_pylist()):
                if self._flags[i] == 0 and any(flag for _, flag in self._lexical_units(text, model)):
                    self._flags[i] = 1
