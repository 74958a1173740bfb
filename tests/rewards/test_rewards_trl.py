"""The rewards called exactly as the installed TRL's GRPOTrainer calls them (its own `_calculate_rewards`).

`GRPOTrainer._calculate_rewards` is run unbound on a stand-in trainer carrying only what the method reads,
so the keyword arguments, the None → NaN conversion and the tensor it builds are TRL's own code.
"""

from __future__ import annotations

import inspect
import math
import operator
import re
import types
from collections import defaultdict

import pytest

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")
from transformers import TrainerState
from trl import GRPOTrainer

try:  # TRL >= 1.12 names and classifies reward functions through these helpers
    from trl.trainer.utils import get_callable_name, is_async_callable
except ImportError:  # older TRL reads ``__name__`` and asks `inspect.iscoroutinefunction` in GRPOTrainer itself
    get_callable_name = operator.attrgetter("__name__")
    is_async_callable = inspect.iscoroutinefunction

from recovery.rewards import (
    CorrectnessReward,
    DoubtReward,
    LengthOverheadReward,
    RecoveryReward,
)


def stand_in_trainer(funcs):
    trainer = types.SimpleNamespace(
        accelerator=types.SimpleNamespace(device=torch.device("cpu"), is_main_process=True),
        args=types.SimpleNamespace(report_to=[]),
        state=TrainerState(),
        reward_funcs=funcs,
        reward_processing_classes=[None] * len(funcs),
        reward_func_names=[get_callable_name(f) for f in funcs],
        environments=None,
        _pending_extra_logs=defaultdict(list),
        _pending_metrics=defaultdict(list),
    )
    trainer._log_completion_extra = types.MethodType(GRPOTrainer._log_completion_extra, trainer)
    trainer._log_metric = types.MethodType(GRPOTrainer._log_metric, trainer)
    return trainer


ROWS = [  # (gold, answer_type, intervention, reference_length, completion text)
    ("12", "numeric", "wrong_step", 100, "\n\nWait, no. 5 + 7 = 12.</think>\\boxed{12}"),
    ("12", "numeric", "none", 40, "\n\nSo 5 + 7 = 12." + "x" * 44 + "</think>\\boxed{12}"),
    ("(C)", "multiple_choice", "paraphrase", None, "\n\nThe answer must be C"),
    ("zzz", "multiple_choice", "none", 10, "</think>(C)"),
]


@pytest.fixture(scope="module")
def funcs():
    correctness = CorrectnessReward(use_math_verify=False)
    funcs = [
        correctness,
        DoubtReward(only_intervened=True),
        LengthOverheadReward(),
        RecoveryReward(correctness=correctness),
    ]
    yield funcs


@pytest.mark.parametrize("conversational", [False, True])
def test_calculate_rewards_runs_our_functions(funcs, conversational):
    trainer = stand_in_trainer(funcs)
    if conversational:
        prompts = [[{"role": "user", "content": "q"}] for _ in ROWS]
        completions = [[{"role": "assistant", "content": r[4]}] for r in ROWS]
    else:
        prompts = ["q"] * len(ROWS)
        completions = [r[4] for r in ROWS]
    inputs = [
        {
            "prompt": p,
            "answer": g,
            "answer_type": t,
            "domain": "math",
            "intervention": i,
            "reference_length": ref,
            "timestep": 0.5,
        }
        for p, (g, t, i, ref, _) in zip(prompts, ROWS)
    ]
    completion_ids = [[1] * len(r[4]) for r in ROWS]

    rewards = GRPOTrainer._calculate_rewards(trainer, inputs, prompts, completions, completion_ids)

    expected = [
        [1.0, 1.0, 0.0, 1.2],  # correct, doubt, short
        [1.0, math.nan, -0.5, 1.0 - 0.3 * 0.5],  # clean row: doubt says nothing; 60 chars vs 40 → +50 %
        [0.0, 0.0, math.nan, 0.0],  # never closed; no reference
        [math.nan, math.nan, 0.0, math.nan],  # unusable gold; 0 reasoning chars vs 10 → no penalty
    ]
    assert rewards.shape == (4, 4)
    assert torch.allclose(rewards, torch.tensor(expected), equal_nan=True)
    metrics = trainer._pending_metrics
    assert metrics["correctness_reward/unparsable_gold"] == [0.25, 0.25]  # standalone + inside the combination
    assert metrics["doubt_reward/not_intervened"][0] == 0.5
    extra = trainer._pending_extra_logs
    for column in ("correctness_reward/verdict", "doubt_reward/family", "length_overhead_reward/overhead_pct"):
        assert len(extra[column]) % len(ROWS) == 0 and extra[column]  # one value per completion per call
    assert extra["correctness_reward/verdict"][:4] == ["correct", "correct", "no_answer", "unparsable_gold"]


def test_trl_still_calls_reward_functions_this_way():
    source = " ".join(inspect.getsource(GRPOTrainer._calculate_rewards).split())
    assert re.search(
        r"reward_func\( prompts=prompts, completions=completions, "
        r"completion_ids=completion_ids_list, \*\*reward_kwargs \)",
        source,
    )
    for key in ("trainer_state", "log_extra", "log_metric"):
        assert f'reward_kwargs["{key}"]' in source
    assert "torch.nan for reward in output_reward_func" in source


def test_names_and_sync(funcs):
    assert [get_callable_name(f) for f in funcs] == [
        "correctness_reward",
        "doubt_reward",
        "length_overhead_reward",
        "recovery_reward",
    ]
    assert not any(is_async_callable(f) for f in funcs)
