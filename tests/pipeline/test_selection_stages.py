"""The paper's selection as pipeline stages: the reference-solved filter and NuminaMath's cap in the problems
stage, the LLM judge deciding correctness under the authors' selection, runs that reuse another run's problems
and traces (``traces.source: run``, the Table 9 swap), and manifests that keep their bytes at the defaults."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from recovery.configs import ConfigError
from recovery.generation import GenerationResult, Sample
from recovery.model_config import ModelConfig
from recovery.pipeline import run_pipeline
from recovery.pipeline.context import StageContext
from recovery.pipeline.filter_stage import stage_filter
from recovery.plan import plan_for
from recovery.run_config import DatasetConfig, FilterConfig, GradingConfig, RunConfig, TracesConfig
from recovery.run_dir import read_clean_accuracy, records, write_manifest
from recovery.run_dir.records import KEPT_TABLE, PROBLEMS_TABLE, SKIPS_TABLE, TRACES_TABLE
from recovery.run_filters import ReferenceSolvedConfig
from recovery.segment import parse_trace
from recovery.store import RunDir
from recovery.types import Problem
from reference.selection_rows import MODELS, model_rows, problem_rows

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "fixtures"


def _no_backend(model):  # noqa: ANN001, ANN202
    raise AssertionError(f"no backend should be needed, asked for {model.name}")


def test_reference_solved_problems_and_their_skips(tmp_path):
    solved = ReferenceSolvedConfig(path=str(FIXTURES / "general_thoughts_sample.jsonl"))
    config = RunConfig(
        run_dir=str(tmp_path / "run"),
        dataset=DatasetConfig(name="numina_olympiads", path=str(FIXTURES / "numina_olympiads_sample.jsonl")),
        traces=TracesConfig(filters=FilterConfig(reference_solved=solved)),
    )
    run_pipeline(config, stages=["problems"], make_generator=_no_backend, progress=False)
    run = RunDir(config.run_dir)
    questions = [row["question"] for row in run.table(PROBLEMS_TABLE).iter_rows()]
    assert questions == [f"Problem {n}: find the value asked for in item {n}." for n in (0, 1, 2)]
    skips = [row for row in run.table(SKIPS_TABLE).iter_rows() if row["stage"] == "problems"]
    reasons = {row["reason"] for row in skips}
    assert reasons == {"reference_not_solved", "reference_no_trace"} and len(skips) == 14  # 17 numeric, 3 solved


def test_numina_is_not_capped_at_load_time_under_the_authors_selection(tmp_path):
    source = tmp_path / "numina.jsonl"
    rows = [{"source": "olympiads", "problem": f"Problem {i}.", "solution": "So \\boxed{7}"} for i in range(22)]
    source.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    counts = {}
    for protocol in ("default", "reference"):
        config = RunConfig(
            run_dir=str(tmp_path / protocol),
            dataset=DatasetConfig(name="numina_olympiads", path=str(source)),
            protocol=protocol,
        )
        run_pipeline(config, stages=["problems"], make_generator=_no_backend, progress=False)
        counts[protocol] = RunDir(config.run_dir).table(PROBLEMS_TABLE).count()
    assert counts == {"default": 20, "reference": 22}  # the reference cap comes after the intersection


def _fixture_run(path: Path, config_models=MODELS, **config) -> tuple[RunDir, RunConfig]:
    """A run directory holding the selection fixture's problems and traces (selection_rows.py)."""
    run = RunDir(path)
    with run.table(PROBLEMS_TABLE).writer(records.PROBLEMS) as writer:
        for row in problem_rows():
            problem = Problem("math", row["raw_question"], row["reference_answer"], "numeric", "t", id=row["id"])
            writer.add(records.problem_row(problem))
    with run.table(TRACES_TABLE).writer(records.TRACES) as writer:
        for model, rows in model_rows().items():
            writer.add_many(records.trace_row(parse_trace(r["id"], model, r["answer_content"])) for r in rows)
    run_config = RunConfig(
        run_dir=str(path),
        dataset=DatasetConfig(name="real_traces"),
        models=[ModelConfig(name=m) for m in config_models],
        protocol="reference",
        **config,
    )
    return run, run_config


class AlwaysCorrectJudge:
    """A judge LLM stand-in that answers every reference-prompt question "Correct"."""

    concurrency = 1  # the Generator protocol: one request in flight

    def __init__(self) -> None:
        self.calls = 0

    def generate(self, requests):
        for request in requests:
            self.calls += 1
            yield GenerationResult(request.request_id, (Sample("Correct", 1, "stop"),), prompt_tokens=0)

    def close(self) -> None:
        pass


def test_the_judge_decides_correctness_under_the_authors_selection(tmp_path):
    judge = AlwaysCorrectJudge()
    grading = GradingConfig(judge=ModelConfig(name="judge"), primary="judge", judge_prompt="reference")
    run, config = _fixture_run(tmp_path / "run", grading=grading)
    ctx = StageContext(plan_for(config), run, make_generator=lambda model: judge, progress=False)
    try:
        stage_filter(ctx)
    finally:
        ctx.close()
    reasons = [row["reason"] for row in run.table(KEPT_TABLE).iter_rows()]
    assert judge.calls == len(reasons) == 18 and ctx.log.requests.sent["filter"] == 18
    assert "not_correct" not in reasons  # the rule grader finds four wrong traces; this judge none


def _filtered_source(path):
    """The fixture run with its filter stage done and its manifest written: a run another run can reuse."""
    source, source_config = _fixture_run(path)
    ctx = StageContext(plan_for(source_config), source, make_generator=_no_backend, progress=False)
    try:
        stage_filter(ctx)
    finally:
        ctx.close()
    write_manifest(source, source_config)
    return source


def test_a_run_reuses_another_runs_problems_traces_and_verdicts(tmp_path):
    source = _filtered_source(tmp_path / "logic")
    two = MODELS[:2]
    swap = RunConfig(
        run_dir=str(tmp_path / "swap"),
        dataset=DatasetConfig(name="real_traces"),
        models=[ModelConfig(name=m) for m in two],
        traces=TracesConfig(source="run", path=str(source.path)),
        protocol="reference",
        swap_to=two[1],
    )
    run_pipeline(swap, stages=["problems", "traces", "filter"], make_generator=_no_backend, progress=False)
    run = RunDir(swap.run_dir)

    def rows(r: RunDir, table: str) -> list[dict]:
        return sorted((row for row in r.table(table).iter_rows()), key=lambda row: row["id"])

    assert rows(run, PROBLEMS_TABLE) == rows(source, PROBLEMS_TABLE)
    assert rows(run, TRACES_TABLE) == [row for row in rows(source, TRACES_TABLE) if row["model"] in two]
    assert rows(run, KEPT_TABLE) == [row for row in rows(source, KEPT_TABLE) if row["model"] in two]
    assert read_clean_accuracy(run) == [row for row in read_clean_accuracy(source) if row["model"] in two]
    # Once copied, the swap run resumes without its source.
    shutil.rmtree(source.path)
    run_pipeline(swap, stages=["problems", "traces", "filter"], make_generator=_no_backend, progress=False)


def test_a_reused_run_must_have_finished_its_filter(tmp_path):
    source, source_config = _fixture_run(tmp_path / "logic")
    write_manifest(source, source_config)  # problems and traces, but no verdicts yet
    swap = RunConfig(
        run_dir=str(tmp_path / "swap"),
        dataset=DatasetConfig(name="real_traces"),
        traces=TracesConfig(source="run", path=str(source.path)),
    )
    with pytest.raises(ConfigError, match="has no kept table yet: run its filter stage first"):
        run_pipeline(swap, stages=["problems"], make_generator=_no_backend, progress=False)


def test_a_reused_run_without_a_model_of_the_swap_fails_before_any_work(tmp_path):
    source = _filtered_source(tmp_path / "logic")
    swap = RunConfig(
        run_dir=str(tmp_path / "swap"),
        dataset=DatasetConfig(name="real_traces"),
        models=[ModelConfig(name=MODELS[0]), ModelConfig(name="not-in-the-source")],
        traces=TracesConfig(source="run", path=str(source.path)),
    )
    with pytest.raises(ConfigError, match=r"traces.path: .*logic holds no trace of model\(s\) not-in-the-source$"):
        run_pipeline(swap, stages=["problems", "traces", "filter"], make_generator=_no_backend, progress=False)
    assert not RunDir(swap.run_dir).table(PROBLEMS_TABLE).exists()  # nothing copied


def test_a_manifest_names_the_new_filter_keys_only_when_set(tmp_path):
    plain = RunConfig(run_dir=str(tmp_path / "plain"), dataset=DatasetConfig(name="toy"))
    drawn = RunConfig(
        run_dir=str(tmp_path / "drawn"),
        dataset=DatasetConfig(name="toy"),
        traces=TracesConfig(filters=FilterConfig(draw=600, max_per_answer=20)),
    )
    for config in (plain, drawn):
        write_manifest(RunDir(config.run_dir), config)
    filters = {
        name: json.loads((tmp_path / name / "config.json").read_text())["traces"]["filters"]
        for name in ("plain", "drawn")
    }
    assert set(filters["plain"]) == {"require_correct", "require_closed", "drop_longest_fraction", "intersect_models"}
    assert filters["drawn"]["draw"] == 600 and filters["drawn"]["max_per_answer"] == 20
