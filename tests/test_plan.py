"""A run's plan (`recovery.plan`): each protocol part picked once from its style, independently of the others;
the grading resolved without rewriting the config; a run directory resumable whichever form of its config is
given."""

from __future__ import annotations

import dataclasses

import pytest

from recovery.interventions.reference import REFERENCE_RULES
from recovery.model_config import ModelConfig
from recovery.pipeline import run_pipeline
from recovery.plan import plan_for, resolved_config
from recovery.plan.styles.authors import WholeResponseLength
from recovery.prompt_building import AuthorsPrompts, ProjectPrompts
from recovery.protocol import PARTS
from recovery.run_config import DatasetConfig, GradingConfig, RunConfig
from recovery.run_dir import open_run
from recovery.run_dir.writing import check_resumable


def _config(protocol: str = "default", parts: dict | None = None, **fields) -> RunConfig:
    return RunConfig(
        run_dir="unused", dataset=DatasetConfig(name="toy"), protocol=protocol, protocol_parts=parts or {}, **fields
    )


def _authors(plan) -> dict[str, bool]:
    """Which parts of ``plan`` run the authors' way, read from what each part holds."""
    return {
        "prompts": isinstance(plan.prompts, AuthorsPrompts),
        "interventions": plan.interventions is REFERENCE_RULES,
        "selection": plan.selection.authors_order,
        "length": isinstance(plan.length, WholeResponseLength),
        "grading": plan.grading.unclosed == "grade",
        "doubt": plan.doubt.authors_reading,
        "budget": plan.max_total_tokens is not None,
    }


def test_every_part_covered():
    assert set(_authors(plan_for(_config()))) == set(PARTS)


def test_the_default_and_the_authors_plans():
    default, authors = plan_for(_config()), plan_for(_config("reference"))
    assert not any(_authors(default).values()) and all(_authors(authors).values())
    assert type(default.prompts) is ProjectPrompts and default.max_total_tokens is None
    assert authors.max_total_tokens == 32768 and authors.doubt.max_unit_chars == 1000
    assert default.label == "default" and authors.label.startswith("reference (ExplainableML/RLLM-CoT-Robustness@")


@pytest.mark.parametrize("part", sorted(PARTS))
def test_each_part_is_picked_on_its_own(part):
    """A part set to the other style changes that part of the plan and no other."""
    mixed = _authors(plan_for(_config("reference", {part: "default"})))
    assert mixed == {name: name != part for name in PARTS}
    alone = _authors(plan_for(_config("default", {part: "reference"})))
    assert alone == {name: name == part for name in PARTS}


def test_the_judge_sees_the_authors_input_only_with_their_prompt_and_part():
    judge = ModelConfig(name="judge")
    full = plan_for(_config("reference", grading=GradingConfig(judge=judge)))
    assert (full.judge_inputs.grades, full.judge_inputs.selection) == (True, True)
    assert (full.grading.primary, full.grading.judge_prompt) == ("judge", "reference")
    own_grading = plan_for(_config("reference", {"grading": "default"}, grading=GradingConfig(judge=judge)))
    assert (own_grading.judge_inputs.grades, own_grading.judge_inputs.selection) == (False, False)
    assert not plan_for(_config("reference")).judge_inputs.grades  # no judge, nothing to show


def test_the_plan_resolves_grading_without_rewriting_the_config():
    config = _config("reference")
    plan = plan_for(config)
    assert config.grading == GradingConfig() and plan.grading.unclosed == "grade"
    assert resolved_config(plan.config) == plan.config  # resolving twice changes nothing
    assert plan_for(_config()).config is not None and resolved_config(_config()) == _config()


def test_a_reference_run_records_its_resolved_grading_and_resumes_from_either_form(tmp_path):
    config = dataclasses.replace(_config("reference"), run_dir=str(tmp_path / "run"))
    run_pipeline(config, stages=["problems"], progress=False)
    assert open_run(config.run_dir).config.grading.unclosed == "grade"  # what the manifest records
    check_resumable(config)  # the config as the user wrote it
    check_resumable(plan_for(config).config)  # the same run, resolved
    with pytest.raises(Exception, match="different config"):
        check_resumable(dataclasses.replace(config, protocol_parts={"grading": "default"}))
