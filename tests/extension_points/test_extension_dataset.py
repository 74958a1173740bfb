"""A new dataset, added as docs/architecture.md says (a loader, one `DATASETS` entry), through `recovery run`:
problems from a JSONL file, answered by the tiny reasoner, measured and reported."""

from __future__ import annotations

import json

import pytest

from recovery.data.common import DatasetSpec
from recovery.data.registry import DATASETS
from recovery.run_dir import read_aggregates
from recovery.store import RunDir
from recovery.toy import generate_problems
from recovery.types import AnswerType, Problem


def load_jsonl(path, sub, limit, **options):
    """One problem per line of the JSONL file at ``path``: {"question": ..., "answer": ...}."""
    with open(path, encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines if line.strip()]
    return [
        Problem(
            domain="math",
            question=row["question"],
            answer=str(row["answer"]),
            answer_type=AnswerType.NUMERIC,
            source="jsonl",
        )
        for row in rows[:limit]
    ]


# The tiny reasoner knows the toy world's questions, asked bare (the default prompt adds an instruction).
CONFIG = """\
run_dir: runs/jsonl
dataset: {name: jsonl, path: problems.jsonl, limit: 4, prompt_template: "{question}"}
models: [{name: tiny-reasoner, backend: hf}]
traces: {sampling: {n: 1, max_new_tokens: 320}}
interventions: {names: [toy/random_characters], timesteps: [0.5]}
continuation: {n: 2, max_new_tokens: 320}
"""


def test_a_new_dataset_runs_through_recovery_run(tmp_path, monkeypatch, restored, recovery_cli):
    pytest.importorskip("torch")  # the tiny reasoner answers
    arithmetic = [p for p in generate_problems(12, seed=3) if p.answer_type is AnswerType.NUMERIC][:4]
    monkeypatch.chdir(tmp_path)
    with open("problems.jsonl", "w", encoding="utf-8") as out:
        for problem in arithmetic:
            out.write(json.dumps({"question": problem.question, "answer": int(problem.answer)}) + "\n")
    with open("config.yaml", "w", encoding="utf-8") as out:
        out.write(CONFIG)
    restored(DATASETS)

    DATASETS["jsonl"] = DatasetSpec("questions with numeric answers, one JSON object a line", load_jsonl)

    output = recovery_cli("run", "config.yaml", "--no-progress")
    assert "problems      │       4" in output
    rows = read_aggregates(RunDir(tmp_path / "runs" / "jsonl"))
    assert {(r["domain"], r["intervention"]) for r in rows} == {("math", "toy/random_characters")}
    assert rows[0]["n_chains"] >= 1
    assert (tmp_path / "runs" / "jsonl" / "report" / "report.md").is_file()
