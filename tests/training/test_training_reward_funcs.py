"""`reward_funcs` names: short names, class import paths (instantiated) and function import paths; ``reward_options``
over the recipe's flat keys; errors that name what is known."""

from __future__ import annotations

import pytest

from recovery.rewards import DoubtReward
from recovery.training.configs import GRPOScriptArguments
from recovery.training.grpo import reward_functions


def test_a_class_path_is_instantiated_and_a_function_path_kept():
    args = GRPOScriptArguments(
        reward_funcs=["recovery.rewards.DoubtReward", "recovery.rewards.length.overhead_penalty", "doubt"]
    )
    doubt_cls, function, doubt_short = reward_functions(args)
    assert isinstance(doubt_cls, DoubtReward)  # not the class, which TRL would call with the batch's columns
    row = dict(intervention=["x"], answer=["5"], answer_type=["numeric"])
    assert doubt_cls(completions=["Wait, no.</think>5"], **row) == [1.0]  # doubt, then a correct answer
    assert doubt_cls(completions=["Wait, no.</think>6"], **row) == [0.0]
    assert function(150, 100) == -0.5
    assert isinstance(doubt_short, DoubtReward)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("recovery.rewards.NoSuchReward", "cannot import"),
        ("no_such_pkg.reward", "cannot import"),
        ("recovery.rewards.length._UNITS", "not a function"),
    ],
)
def test_bad_import_paths_are_named(path, message):
    with pytest.raises(ValueError, match=message):
        reward_functions(GRPOScriptArguments(reward_funcs=[path]))


def test_reward_options_go_over_the_flat_keys_part_by_part():
    args = GRPOScriptArguments(
        reward_funcs=["recovery", "length"],
        doubt_first_sentences=5,
        reward_options={
            "recovery": {"doubt": {"pay_for": "expression"}, "doubt_weight": 0.1},
            "length": {"unit": "chars"},
        },
    )
    recovery, length = reward_functions(args)
    assert recovery.doubt.pay_for == "expression" and recovery.doubt.correctness is None
    assert recovery.doubt.first_sentences == 5  # the flat key, kept where the option does not set it
    assert recovery.doubt_weight == 0.1 and recovery.length_weight == 0.3  # one weight set alone wins
    assert length.reference_column == "reference_length"
    path = "recovery.rewards.DoubtReward"  # a reward named by its import path takes its options the same way
    by_path = GRPOScriptArguments(reward_funcs=[path], reward_options={path: {"pay_for": "expression"}})
    assert reward_functions(by_path)[0].pay_for == "expression"
    json_args = GRPOScriptArguments(reward_funcs=["doubt"], reward_options='{"doubt": {"pay_for": "expression"}}')
    assert reward_functions(json_args)[0].pay_for == "expression"  # the command line gives JSON


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (dict(reward_funcs=["correctnes"]), "unknown reward 'correctnes'; known rewards: correctness, doubt, length"),
        (dict(reward_funcs=["doubt"], reward_options={"doubt": {"pay_fr": "x"}}), "takes no option 'pay_fr'"),
        (dict(reward_funcs=["doubt"], reward_options={"length": {}}), "'length' is not one of reward_funcs"),
        (dict(reward_funcs=["recovery"], reward_options={"recovery": {"weights": [1]}}), "weights needs 3 numbers"),
        (
            dict(
                reward_funcs=["recovery.rewards.length.overhead_penalty"],
                reward_options={"recovery.rewards.length.overhead_penalty": {"x": 1}},
            ),
            "takes no options",
        ),
    ],
)
def test_bad_reward_names_and_options_are_named(args, message):
    with pytest.raises(ValueError, match=message):
        reward_functions(GRPOScriptArguments(**args))


def test_training_silences_deepspeeds_no_gpu_banner():
    """DeepSpeed, imported by accelerate/transformers in a training run, announces on every CPU run that it
    found no GPU; the training entry points silence it (the banner is printed without them)."""
    import os
    import subprocess
    import sys

    pytest.importorskip("deepspeed")
    banner = "Setting accelerator to CPU"
    probe = "from recovery.training.common import quiet_third_party\n{}import deepspeed\n"
    env = {k: v for k, v in os.environ.items() if k != "DS_ACCELERATOR"}  # another test's run may have set it
    loud = subprocess.run([sys.executable, "-c", probe.format("")], capture_output=True, text=True, env=env)
    quiet = subprocess.run(
        [sys.executable, "-c", probe.format("quiet_third_party()\n")], capture_output=True, text=True, env=env
    )
    assert banner in loud.stdout + loud.stderr
    assert quiet.returncode == 0 and banner not in quiet.stdout + quiet.stderr
