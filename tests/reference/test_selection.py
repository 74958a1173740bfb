"""Differential test: under ``protocol: reference`` the filter stage keeps, per model, the problems the authors'
``scripts/filter_correct.py`` kept (stored by make_selection.py from their code) on the traces of
selection_rows.py; the project's default order keeps others."""

from __future__ import annotations

from recovery.run_config import FilterConfig
from recovery.run_dir.records import KEPT_TABLE
from recovery.store import RunDir
from recovery.types import Problem
from reference.inputs import load
from reference.selection_rows import MODELS, OPTIONS, model_rows, problem_rows
from reference.selection_run import run_filter

STORED = load("selection")


def _problems() -> list[Problem]:
    return [
        Problem("math", row["raw_question"], row["reference_answer"], "numeric", "thought_anchors", id=row["id"])
        for row in problem_rows()
    ]


def _filtered(tmp_path, protocol: str) -> dict[str, list[str]]:
    """The problems each model kept when the filter stage runs on the fixture traces under ``protocol``."""
    filters = FilterConfig(
        drop_longest_fraction=OPTIONS["drop_top_length_fraction"], max_per_answer=OPTIONS["max_per_reference_answer"]
    )
    kept, unparsed = run_filter(tmp_path / protocol, protocol, model_rows(), filters)
    assert not unparsed
    return kept


def test_the_rule_grader_scores_the_fixture_as_the_authors_judge_would():
    from recovery.grading import grade_response

    problems = {p.id: p for p in _problems()}
    for model, rows in model_rows().items():
        for row in rows:
            correct = grade_response(row["answer_content"], problems[row["id"]]).correct
            assert correct == (row["verifier_score"] == 1), (model, row["id"])


def test_reference_selection_keeps_what_the_authors_kept(tmp_path):
    assert _filtered(tmp_path, "reference") == STORED["kept_problem_ids"]


def test_the_default_order_keeps_other_traces(tmp_path):
    default = _filtered(tmp_path, "default")
    assert default != STORED["kept_problem_ids"]
    # closed → correct → longest reasoning → solved by all drops D and C for everyone (one model's unclosed or
    # long trace), and caps F as the same answer as A.
    assert default == {model: ["problem_2370"] for model in MODELS}


def test_every_step_of_the_reference_order_drops_something(tmp_path):
    _filtered(tmp_path, "reference")
    reasons = {row["reason"] for row in RunDir(tmp_path / "reference").table(KEPT_TABLE).iter_rows()}
    assert reasons == {
        "kept",
        "not_correct",
        "not_solved_by_all",
        "no_closing_think_tag",
        "longest_fraction",
        "answer_cap",
    }
