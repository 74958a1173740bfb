"""One verdict everywhere: the pipeline's grades (both of its grading paths), the training callback's
mini-benchmark and the correctness reward give the same verdict to the same continuation, under both
policies for reasoning that never closed, and for a model of either tag family (only the model's own tags
close its reasoning; another family's are text)."""

from __future__ import annotations

import pytest

from recovery.grading import Grader
from recovery.model_config import ModelConfig
from recovery.pipeline.rule_grading import RuleGrading
from recovery.rewards import CorrectnessReward
from recovery.run_config import GradingConfig, InterventionsConfig, SamplingConfig
from recovery.training.minibench import MiniBench, MiniBenchConfig
from recovery.types import Problem

PROBLEM = Problem("math", "What is 7 + 5?", "12", "numeric", "toy", id="p12")

CONTINUATIONS = {
    "closed, correct": "so 7 + 5 = 12.\n\n</think>\n\nThe answer is $\\boxed{12}$.",
    "closed, wrong": "so 7 + 5 = 13.</think>\\boxed{13}",
    "unclosed, boxed inside": "Wait, 7 + 5 = \\boxed{12} so far, let me keep",
    "unclosed, nothing": "Wait, let me redo 7 + 5",
    "boxed only after the close": "I think \\boxed{13}? No.</think>\\boxed{12}",
    "closed, no answer": "7 + 5 = 12.</think>",
    "closed twice": "12?</think>Hmm.</think>\\boxed{12}",
    "an opener of its own": "<think>restart: 12</think>The answer is \\boxed{12}",
    "EXAONE's </thought>": "7 + 5 = 12.</thought>The answer is $\\boxed{12}$.",
    "EXAONE, unclosed": "<thought>7 + 5 = \\boxed{12}",
    "the other family's closer first": "13? </thought> no: 12.</think>\\boxed{12}",
    "the other family's closer after": "13? no: 12.</think>\\boxed{12} </thought> stray \\boxed{13}",
}
THINK, THOUGHT = ("<think>", "</think>"), ("<thought>", "</thought>")


@pytest.fixture(scope="module")
def grader():
    with Grader(workers=1, timeout_s=5.0) as g:
        yield g


def _pipeline(texts, grader, unclosed, tags):
    problems, ids = {PROBLEM.id: PROBLEM}, [PROBLEM.id] * len(texts)
    row_tags = None if tags == THINK else [tags] * len(texts)  # None: the columnar path every <think> run takes
    grades, _ = RuleGrading(problems, grader, {}, unclosed=unclosed).grades(texts, ids, tags=row_tags)
    columns, _ = RuleGrading(problems, grader, {}, unclosed=unclosed).columns(texts, ids, tags=row_tags)
    return [g.verdict.value for g in grades], columns["verdict"].to_pylist()


def _minibench(texts, unclosed, tags):
    bench = MiniBench(MiniBenchConfig(n_problems=1, grading=GradingConfig(workers=1, unclosed=unclosed)))
    try:
        return [g.verdict.value for g in bench.grade([(text, PROBLEM) for text in texts], tags[1])]
    finally:
        bench.close()


def _reward(texts, unclosed, tags):
    extra = {}
    with CorrectnessReward(unclosed=unclosed, workers=1, think_close=tags[1]) as reward:
        rewards = reward(
            completions=texts,
            answer=[PROBLEM.answer] * len(texts),
            answer_type=["numeric"] * len(texts),
            domain=["math"] * len(texts),
            log_extra=lambda column, values: extra.setdefault(column, values),
        )
    return extra["correctness_reward/verdict"], rewards


@pytest.mark.parametrize("unclosed", ["no_answer", "grade"])
@pytest.mark.parametrize("tags", [THINK, THOUGHT], ids=["think", "thought"])
def test_the_same_continuation_gets_the_same_verdict_everywhere(grader, unclosed, tags):
    texts = list(CONTINUATIONS.values())
    stage, stage_arrays = _pipeline(texts, grader, unclosed, tags)
    bench = _minibench(texts, unclosed, tags)
    reward, rewards = _reward(texts, unclosed, tags)
    table = {name: (s, a, b, r) for name, s, a, b, r in zip(CONTINUATIONS, stage, stage_arrays, bench, reward)}
    disagreements = {name: v for name, v in table.items() if len(set(v)) != 1}
    assert not disagreements, disagreements
    # The reward is the documented map of the verdicts: 1.0 only for a correct one.
    assert rewards == [1.0 if v == "correct" else 0.0 for v in stage]
    whole = unclosed == "grade"  # reasoning that never closed is graded whole: its last number
    if tags == THINK:
        expected = {
            "closed, correct": "correct",
            "closed, wrong": "wrong",
            "boxed only after the close": "correct",
            "closed, no answer": "no_answer",
            "EXAONE's </thought>": "correct" if whole else "no_answer",  # </thought> is text to an R1 model
            "unclosed, nothing": "wrong" if whole else "no_answer",
            "unclosed, boxed inside": "correct" if whole else "no_answer",
            "EXAONE, unclosed": "correct" if whole else "no_answer",
            "the other family's closer first": "correct",
            "the other family's closer after": "wrong",  # the stray box after </thought> is its last answer
        }
    else:
        expected = {
            "closed, correct": "correct" if whole else "no_answer",  # </think> is text to EXAONE
            "EXAONE's </thought>": "correct",
            "EXAONE, unclosed": "correct" if whole else "no_answer",
            "the other family's closer first": "correct",  # closed at </thought>, the </think> after it is text
            "the other family's closer after": "wrong",
        }
    assert {name: table[name][0] for name in expected} == expected


def test_the_mini_benchmark_of_a_run_grades_as_the_run_did(tmp_path):
    """A run graded with ``unclosed: grade`` gives its policy to the mini-benchmark built from it, so the curve
    logged during training and the run's own figures grade alike; an explicit setting wins."""
    import json

    from toy_runs import ToyRunSpec, build_toy_run

    run = build_toy_run(tmp_path / "run", ToyRunSpec(interventions=("toy/random_characters",), n_problems=2))
    config_file = run.path / "config.json"
    config = json.loads(config_file.read_text())
    config.setdefault("grading", {})["unclosed"] = "grade"
    config_file.write_text(json.dumps(config))
    from_run = MiniBench(MiniBenchConfig(source="run", run_dir=str(run.path)))
    assert from_run.grading.unclosed == "grade"
    text = CONTINUATIONS["unclosed, boxed inside"]
    assert [g.verdict.value for g in from_run.grade([(text, PROBLEM)])] == ["correct"]
    from_run.close()
    explicit = MiniBenchConfig(source="run", run_dir=str(run.path), grading=GradingConfig(unclosed="no_answer"))
    assert MiniBench(explicit).grading.unclosed == "no_answer"
    assert MiniBench(MiniBenchConfig(n_problems=1)).grading.unclosed == "no_answer"  # toy chains: the default


def test_the_mini_benchmark_takes_the_run_configs_sections_and_their_validation():
    # The same names and the same checks as a run config: no second vocabulary.
    with pytest.raises(ValueError, match="top_p"):
        MiniBenchConfig(continuation=SamplingConfig(top_p=1.5))
    with pytest.raises(ValueError, match="timesteps"):
        MiniBenchConfig(interventions=InterventionsConfig(names=["toy/paraphrase"], timesteps=[1.5]))
    with pytest.raises(ValueError, match="prompt_template"):
        MiniBenchConfig(prompt_template="no placeholder")
    with pytest.raises(ValueError, match="judge"):
        MiniBenchConfig(grading=GradingConfig(judge=ModelConfig(name="j")))
