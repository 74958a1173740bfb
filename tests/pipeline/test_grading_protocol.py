"""The authors' grading protocol as run options (``grading.judge_prompt``, ``grading.unclosed``), through the
real grades stage on a real toy run directory (`toy_runs`), and the protocol named in the run report.

The toy run's continuations are the toy teacher's correct recoveries, the same with a wrong boxed answer,
and — added here — the correct recovery with its closing tag removed, so the boxed answer sits inside
reasoning that never closed. The answer judge is a strong LLM that cannot run here: `PresenceJudge`, a
scripted stand-in, answers the reference prompt by checking whether the reference answer is boxed in the
shown extract, and records every prompt it was given.
"""

from __future__ import annotations

import shutil

import pytest

from recovery.configs import ConfigError
from recovery.generation import GenerationResult, Sample
from recovery.pipeline import DatasetConfig, GradingConfig, InterventionsConfig, ModelConfig, RunConfig, run_pipeline
from recovery.report.run_report import run_report_data, write_run_report
from recovery.run_dir import records
from recovery.store import RunDir
from recovery.types import Continuation
from run_rows import continuation_row
from toy_runs import MODEL, ToyRunSpec

SPEC = ToyRunSpec(interventions=("toy/wrong_continuation",), timesteps=(0.5,), n_problems=3)
UNCLOSED_INDEX = 7  # sample index of the added unclosed continuation of each chain


class PresenceJudge:
    """Scripted stand-in for the judge LLM: "Correct" when ``\\boxed{<reference>}`` is in the extract."""

    concurrency = 1  # the Generator protocol: one request in flight

    name = "presence-judge"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def generate(self, requests):
        for r in requests:
            user = r.messages[-1].content
            self.prompts.append(user)
            reference = user.split("Reference Answer:\n", 1)[1].split("\n\n", 1)[0]
            extract = user.split("Answer Content (extract):\n", 1)[1]
            reply = "Correct" if f"\\boxed{{{reference}}}" in extract else "Incorrect"
            yield GenerationResult(r.request_id, (Sample(reply, 1, "stop"),), prompt_tokens=0)

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def source(toy_run_for, tmp_path_factory):
    """A copy of the toy run with one unclosed (correct-answer) continuation added per chain, ungraded."""
    toy = toy_run_for(SPEC)
    path = tmp_path_factory.mktemp("protocol") / "source"
    shutil.copytree(toy.path, path)
    run = RunDir(path)
    rows = list(run.table("continuations").iter_rows(["chain_id", "problem_id", "sample_index", "text"]))
    added = []
    for row in rows:
        if row["sample_index"] == 0:  # the teacher's correct recovery
            assert "</think>" in row["text"] and "\\boxed{" in row["text"].split("</think>")[1]
            cont = Continuation(
                row["chain_id"], UNCLOSED_INDEX, row["text"].replace("</think>", ""), None, "length", MODEL
            )
            added.append(continuation_row(cont, row["problem_id"], 10, 10))
    with run.table("continuations").writer(records.CONTINUATIONS, writer_id="unclosed") as writer:
        writer.add_many(added)
    shutil.rmtree(path / "grades")
    (path / "config.json").unlink()
    return path, len(added)


def _graded(source_dir, tmp_path, name: str, grading: GradingConfig, judge: PresenceJudge | None = None):
    """Copy ``source_dir``, run the grades stage with ``grading``; the stored grades by sample index."""
    run_dir = tmp_path / name
    shutil.copytree(source_dir, run_dir)
    config = RunConfig(
        run_dir=str(run_dir),
        dataset=DatasetConfig(name="toy", limit=SPEC.n_problems),
        models=[ModelConfig(name=MODEL)],
        interventions=InterventionsConfig(names=list(SPEC.interventions), timesteps=list(SPEC.timesteps)),
        grading=grading,
        cpu_workers=1,
    )
    summary = run_pipeline(config, stages=["grades"], make_generator=lambda m: judge, progress=False)
    run = RunDir(run_dir)
    index = {r["id"]: r["sample_index"] for r in run.table("continuations").iter_rows(["id", "sample_index"])}
    by_index: dict[int, list[dict]] = {}
    for g in run.table("grades").iter_rows():
        by_index.setdefault(index[g["id"]], []).append(g)
    return config, summary, by_index


def test_unclosed_continuations_are_no_answer_by_default_and_graded_on_request(source, tmp_path):
    source_dir, n_unclosed = source
    _, summary, default = _graded(source_dir, tmp_path, "default", GradingConfig())
    assert [g["verdict"] for g in default[UNCLOSED_INDEX]] == ["no_answer"] * n_unclosed
    assert {g["verdict"] for g in default[0]} == {"correct"} and {g["verdict"] for g in default[1]} == {"wrong"}
    # Unclosed continuations are graded no_answer: outcomes, not skips.
    assert summary.grades["no_answer"] >= n_unclosed and not [k for k in summary.skips if "unclosed" in k]
    before = summary.grades
    _, summary, graded = _graded(source_dir, tmp_path, "grade", GradingConfig(unclosed="grade"))
    assert [g["verdict"] for g in graded[UNCLOSED_INDEX]] == ["correct"] * n_unclosed
    assert summary.grades["correct"] == before["correct"] + n_unclosed
    assert summary.grades.get("no_answer", 0) == before["no_answer"] - n_unclosed
    for i in (0, 1):  # closed continuations are graded the same either way
        assert graded[i] == default[i]


def test_reference_judge_grades_the_authors_way_in_the_grades_stage(source, tmp_path):
    source_dir, n_unclosed = source
    judge = PresenceJudge()
    grading = GradingConfig(
        judge=ModelConfig(name="judge"), primary="judge", judge_prompt="reference", unclosed="grade"
    )
    _, _, graded = _graded(source_dir, tmp_path, "reference", grading, judge)
    assert [g["verdict"] for g in graded[UNCLOSED_INDEX]] == ["correct"] * n_unclosed
    assert all(g["judge_verdict"] == g["verdict"] for gs in graded.values() for g in gs)
    assert {g["verdict"] for g in graded[0]} == {"correct"} and {g["verdict"] for g in graded[1]} == {"wrong"}
    assert len(judge.prompts) == n_unclosed * 3  # every continuation, closed or not, met the judge
    assert all(p.endswith("Respond with only 'Correct' or 'Incorrect'.") for p in judge.prompts)
    # By default the judge is not asked about an unclosed continuation, which stays no_answer.
    judge = PresenceJudge()
    grading = GradingConfig(judge=ModelConfig(name="judge"), primary="judge", judge_prompt="reference")
    _, _, default = _graded(source_dir, tmp_path, "reference-closed", grading, judge)
    assert [g["verdict"] for g in default[UNCLOSED_INDEX]] == ["no_answer"] * n_unclosed
    assert len(judge.prompts) == n_unclosed * 2


def test_the_grading_protocol_is_in_the_manifest_and_the_report(source, tmp_path):
    source_dir, _ = source
    config, _, _ = _graded(source_dir, tmp_path, "report", GradingConfig(unclosed="grade"))
    with pytest.raises(ConfigError, match="changed: grading"):
        run_pipeline(RunConfig(**{**vars(config), "grading": GradingConfig()}), stages=["grades"], progress=False)
    run = RunDir(config.run_dir)
    assert run_report_data(run, config).meta["grading"] == config.grading.protocol()
    assert config.grading.protocol() == "rule-based grader; unclosed continuations: graded on their whole text"
    write_run_report(run, config)
    md = (run.path / "report" / "report.md").read_text()
    assert "rule-based grader; unclosed continuations: graded on their whole text" in md
    judged = GradingConfig(judge=ModelConfig(name="qwen"), primary="judge", judge_prompt="reference")
    assert judged.protocol() == (
        "LLM judge qwen (prompt: reference), rule-based grader beside it; unclosed continuations: no_answer (never correct)"
    )
    with pytest.raises(ValueError, match="judge_prompt=reference needs grading.judge"):
        GradingConfig(judge_prompt="reference")
