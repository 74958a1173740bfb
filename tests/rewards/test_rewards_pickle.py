"""Pickling: rewards travel to other processes (TRL's async rollout worker pickles reward functions)."""

from __future__ import annotations

import concurrent.futures
import copy
import multiprocessing
import os
import pickle

import pytest

from recovery.rewards import (
    CorrectnessReward,
    DoubtReward,
    LengthOverheadReward,
    RecoveryReward,
)

EXPR = dict(
    completions=["</think>\\boxed{\\frac{1}{2}\\sqrt{3}}", "</think>\\boxed{7}"],
    answer=["\\frac{\\sqrt{3}}{2}", "7"],
    answer_type=["expression", "numeric"],
    domain=["math", "math"],
    reference_length=[10, 10],
    intervention=["wrong_step", "none"],
)
NUMERIC = dict(
    EXPR, completions=["Wait.</think>\\boxed{7}", "</think>\\boxed{8}"], answer=["7", "7"], answer_type=["numeric"] * 2
)


def toy_tokenizer():
    """The tiny reasoner's real tokenizer (the token-unit length reward counts with the policy's)."""
    from transformers import AutoTokenizer

    from recovery.toy import checkpoint_dir

    return AutoTokenizer.from_pretrained(str(checkpoint_dir()))


def all_rewards():
    return [
        CorrectnessReward(workers=1),
        DoubtReward(only_intervened=True),
        LengthOverheadReward(unit="tokens", tokenizer=toy_tokenizer()),
        RecoveryReward(correctness=CorrectnessReward(workers=1)),
    ]


def test_round_trip_after_use_drops_the_pool_and_works_again():
    reward = CorrectnessReward(workers=1, name="acc")
    try:
        assert reward(**EXPR) == [1.0, 1.0]  # math-verify pool is running now
        assert reward._grader is not None
        clone = pickle.loads(pickle.dumps(reward))
        assert clone._grader is None and clone.__name__ == "acc" and clone.timeout_s == reward.timeout_s
        assert clone(**EXPR) == [1.0, 1.0]  # its own pool, started on need
        assert clone._grader is not reward._grader
        deep = copy.deepcopy(clone)
        assert deep(**EXPR) == [1.0, 1.0]
    finally:
        reward.close()
        clone.close()
        deep.close()


@pytest.mark.parametrize("index", range(4))
def test_every_reward_pickles(index):
    reward = all_rewards()[index]
    before = reward(completion_ids=[[1] * 5, [1] * 20], **NUMERIC)  # numeric: no math-verify pool needed
    assert before != [None, None]
    clone = pickle.loads(pickle.dumps(reward, protocol=pickle.HIGHEST_PROTOCOL))
    assert clone(completion_ids=[[1] * 5, [1] * 20], **NUMERIC) == before
    assert clone.__name__ == reward.__name__ and type(clone) is type(reward)
    getattr(reward, "close", lambda: None)()
    getattr(clone, "close", lambda: None)()


def test_a_forked_copy_starts_its_own_pool():
    reward = CorrectnessReward(workers=1)
    try:
        reward(**EXPR)
        reward._grader_pid = -1  # as seen from a forked child: the pool belongs to another process
        parent_grader = reward._grader
        assert reward(**EXPR) == [1.0, 1.0]
        assert reward._grader is not parent_grader
        parent_grader.close()
    finally:
        reward.close()


def score_numeric(reward):
    return reward(
        completions=["</think>\\boxed{7}", "</think>\\boxed{8}"],
        answer=["7", "7"],
        answer_type=["numeric"] * 2,
        domain=["math"] * 2,
        reference_length=[10, 10],
        intervention=["a", "b"],
    ), os.getpid()


def test_runs_in_a_spawned_process():
    reward = RecoveryReward(correctness=CorrectnessReward(use_math_verify=False))
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        out, pid = pool.submit(score_numeric, reward).result(timeout=60)
    assert pid != os.getpid()
    assert out == [1.0, 0.0]
