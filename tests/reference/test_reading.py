"""Under the authors' style a response is read as they read it (issue 46, point 5). Their reasoning extraction
(segmentation.py ``extract_reasoning``) takes either family's think tags, so an R1 response written in
``<thought>`` tags is a trace to them, segmented as the same reasoning in ``<think>`` tags is, and it takes its
place in their batch: the rule-based interventions of the traces after it draw by the positions it holds. The
project's own reading skips it (``no_think_tag``), and its per-item seeds leave the other traces alone."""

from __future__ import annotations

import json

from recovery.run_dir import open_run
from reference.intervention_rows import batch_rows
from reference.test_interventions_pipeline import RULE, reference_run

THOUGHT_ROW = "edge_blank_steps"  # the fourth row of the first batch of eight: four traces of the batch follow


def _rows(*, thought: bool) -> list[dict]:
    rows = batch_rows()
    if thought:
        rows = [
            dict(row, answer_content=row["answer_content"].replace("think>", "thought>"))
            if row["id"] == THOUGHT_ROW
            else row
            for row in rows
        ]
        assert "<think>" not in next(r for r in rows if r["id"] == THOUGHT_ROW)["answer_content"]
    return rows


def _run(folder, rows, protocol: str = "reference") -> dict:
    folder.mkdir()
    return reference_run(folder, RULE, rows=rows, protocol=protocol)


def _drawn(chains: dict) -> dict:
    return {
        key: (row["prefix"], row["inserted_text"], row["cut_index"], json.loads(row["options"])["position"])
        for key, row in chains.items()
    }


def test_a_thought_tagged_r1_trace_is_read_and_placed_as_the_authors_do(tmp_path, shared_data):
    plain = _run(tmp_path / "plain", _rows(thought=False))
    thought = _run(tmp_path / "thought", _rows(thought=True))
    assert any(key.startswith(f"{THOUGHT_ROW}|") for key in thought)
    assert _drawn(thought) == _drawn(plain)  # the same chains, the same batch positions, the same draws


def test_the_projects_reading_skips_it_and_leaves_the_other_traces_alone(tmp_path, shared_data):
    plain = _run(tmp_path / "plain", _rows(thought=False), "default")
    thought = _run(tmp_path / "thought", _rows(thought=True), "default")
    assert not any(key.startswith(f"{THOUGHT_ROW}|") for key in thought)
    assert thought == {key: row for key, row in plain.items() if not key.startswith(f"{THOUGHT_ROW}|")}
    skips = [r for r in open_run(tmp_path / "thought" / "run").skip_rows() if r["stage"] == "traces"]
    assert [r["reason"] for r in skips] == ["no_think_tag"]
