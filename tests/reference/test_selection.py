"""Differential test: under ``protocol: reference`` the filter stage keeps, per model, the problems the authors'
``scripts/filter_correct.py`` kept (stored by make_selection.py from their code) on the traces of
selection_rows.py; the project's default order keeps others."""

from __future__ import annotations

from recovery.pipeline.context import StageContext
from recovery.pipeline.filter_stage import stage_filter
from recovery.run_config import DatasetConfig, FilterConfig, ModelConfig, RunConfig, TracesConfig
from recovery.run_dir import records
from recovery.run_dir.records import KEPT_TABLE, PROBLEMS_TABLE, TRACES_TABLE
from recovery.segment import parse_trace
from recovery.store import RunDir
from recovery.types import Problem
from reference.inputs import load
from reference.selection_rows import MODELS, OPTIONS, model_rows, problem_rows

STORED = load("selection")


def _problems() -> list[Problem]:
    return [
        Problem("math", row["raw_question"], row["reference_answer"], "numeric", "thought_anchors", id=row["id"])
        for row in problem_rows()
    ]


def _filtered(tmp_path, protocol: str) -> dict[str, list[str]]:
    """The problems each model kept when the filter stage runs on the fixture traces under ``protocol``."""
    run = RunDir(tmp_path / protocol)
    with run.table(PROBLEMS_TABLE).writer(records.PROBLEMS) as writer:
        writer.add_many(records.problem_row(p) for p in _problems())
    with run.table(TRACES_TABLE).writer(records.TRACES) as writer:
        for model, rows in model_rows().items():
            writer.add_many(records.trace_row(parse_trace(r["id"], model, r["answer_content"])) for r in rows)
    filters = FilterConfig(
        drop_longest_fraction=OPTIONS["drop_top_length_fraction"], max_per_answer=OPTIONS["max_per_reference_answer"]
    )
    config = RunConfig(
        run_dir=str(run.path),
        dataset=DatasetConfig(name="real_traces"),
        models=[ModelConfig(name=m) for m in MODELS],
        traces=TracesConfig(filters=filters),
        protocol=protocol,
    )
    ctx = StageContext(config, run, make_generator=None, progress=False)
    try:
        stage_filter(ctx)
    finally:
        ctx.close()
    order = [p.id for p in _problems()]
    kept: dict[str, list[str]] = {m: [] for m in MODELS}
    for row in run.table(KEPT_TABLE).iter_rows():
        if row["kept"]:
            kept[row["model"]].append(row["problem_id"])
    return {m: sorted(ids, key=order.index) for m, ids in kept.items()}


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
