"""CorrectnessReward: hand-computed rewards, None only for unusable golds, math-verify with a hard timeout."""

from __future__ import annotations

import os
import time

import pytest

from recovery.grading import Grader
from recovery.rewards import CorrectnessReward
from recovery.types import Grade, Verdict


@pytest.fixture(scope="module")
def reward():
    with CorrectnessReward(workers=1, timeout_s=2.0) as r:
        yield r


def score(reward, completions, answers, answer_type="numeric", **columns):
    n = len(completions)
    return reward(
        prompts=["p"] * n,
        completions=completions,
        completion_ids=[[0]] * n,
        answer=answers if isinstance(answers, list) else [answers] * n,
        answer_type=[answer_type] * n,
        domain=["math"] * n,
        **columns,
    )


def test_numeric_hand_computed(reward):
    completions = [
        "Let me add: 5 + 7 = 12.</think>The answer is $\\boxed{12}$.",  # correct
        "So 12.</think>\\boxed{13}",  # wrong
        "So 12.</think>The final answer is 12.",  # phrase, no box: still read
        "So 12.</think>\\boxed{12.0}",  # equal value
        "So 12.</think>\\boxed{1,2}",  # not the number
        "So it is \\boxed{12} but I keep thinking",  # never closed: no final answer
        "</think>",  # closed, nothing after
        "\\boxed{99} in the reasoning.</think>\\boxed{12}",  # only the answer part counts
    ]
    assert score(reward, completions, "12") == [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0]


def test_tolerances_from_columns_and_source(reward):
    completions = ["</think>\\boxed{104}", "</think>\\boxed{106}"]
    assert score(reward, completions, "100") == [0.0, 0.0]
    assert score(reward, completions, "100", rel_tol=[0.05, 0.05]) == [1.0, 0.0]
    assert score(reward, completions, "100", source=["scibench/thermo"] * 2) == [1.0, 0.0]  # SciBench: 5 %
    assert score(reward, completions, "100", rel_tol=[float("nan")] * 2, abs_tol=[None, None]) == [0.0, 0.0]
    assert score(reward, ["</think>\\boxed{100.009}"], "100", source=["jeebench"]) == [1.0]  # |Δ| ≤ 0.01


def test_categorical_answers(reward):
    assert score(reward, ["</think>The answer is (C).", "</think>(B)"], "(C)", "multiple_choice") == [1.0, 0.0]
    assert score(reward, ["</think>**Yes**", "</think>No."], "Yes", "yes_no") == [1.0, 0.0]
    assert score(reward, ["</think>\\boxed{ABD}", "</think>\\boxed{AB}"], "ABD", "multi_select") == [1.0, 0.0]


def test_symbolic_answers_use_math_verify(reward):
    gold = "\\frac{\\sqrt{3}}{2}"
    completions = [
        "</think>\\boxed{\\frac{1}{2}\\sqrt{3}}",  # equivalent: math-verify
        "</think>\\boxed{\\dfrac{\\sqrt{3}}{2}}",  # identical up to \dfrac: fast path
        "</think>\\boxed{\\frac{\\sqrt{2}}{2}}",  # different
    ]
    assert score(reward, completions, gold, "expression") == [1.0, 1.0, 0.0]


def test_unusable_gold_is_none(reward):
    completions = ["</think>\\boxed{7}", "never closed"]
    assert score(reward, completions, "not an option", "multiple_choice") == [None, None]
    assert score(reward, completions, "", "numeric") == [None, None]
    assert score(reward, completions, [None, None], "numeric") == [None, None]
    assert score(reward, completions, "7", "no_such_type") == [None, None]
    assert score(reward, completions, "7", rel_tol=[-1.0, -1.0]) == [None, None]
    # a gold the math-verify worker refuses (nested exponent) is unusable too
    assert score(reward, ["</think>\\boxed{3}"], "10^{10^{10}}", "expression") == [None]


def test_non_string_gold_and_missing_columns(reward, caplog):
    assert reward(completions=["</think>\\boxed{42}"], answer=[42], answer_type=["numeric"], domain=["m"]) == [1.0]
    assert reward(completions=["</think>\\boxed{42}"], answer_type=["numeric"]) == [None]  # no answer column
    assert reward(completions=["</think>\\boxed{42}"], answer=["42"]) == [None]  # no answer_type, no default
    assert CorrectnessReward(answer_type="numeric")(completions=["</think>\\boxed{42}"], answer=["42"]) == [1.0]
    assert CorrectnessReward(answer_column="solution")(
        completions=["</think>\\boxed{42}"], solution=["42"], answer_type=["numeric"]
    ) == [1.0]
    assert "no 'answer' column" in caplog.text


def test_unclosed_grade_grades_whole_text():
    reward = CorrectnessReward(unclosed="grade", use_math_verify=False)
    assert reward(completions=["I think \\boxed{5}"], answer=["5"], answer_type=["numeric"]) == [1.0]


def test_metrics_and_table_columns(reward):
    metrics, extra = {}, {}
    out = reward(
        completions=["</think>\\boxed{1}", "</think>\\boxed{2}", "open", "</think>\\boxed{1}"],
        answer=["1", "1", "1", "zzz"],
        answer_type=["numeric", "numeric", "numeric", "multiple_choice"],
        domain=["math", "math", "math", "logic"],
        log_metric=lambda name, value: metrics.setdefault(name, value),
        log_extra=lambda column, values: extra.setdefault(column, values),
    )
    assert out == [1.0, 0.0, 0.0, None]
    assert metrics["correctness_reward/unclosed"] == 0.25
    assert metrics["correctness_reward/unparsable_gold"] == 0.25
    assert metrics["correctness_reward/accuracy/math"] == pytest.approx(1 / 3)
    assert metrics["correctness_reward/timeout"] == 0.0 and metrics["correctness_reward/errors"] == 0.0
    assert extra["correctness_reward/verdict"] == ["correct", "wrong", "no_answer", "unparsable_gold"]
    assert extra["correctness_reward/extracted"][:2] == ["1", "2"]


# -- hard timeout: a worker that hangs is killed, the item scores 0.0 -------------------------------------
def hanging_worker(conn, memory_mb):
    conn.send("ready")
    while True:
        job = conn.recv()
        if job is None:
            return
        if "hang" in job[0]:  # the prediction as math-verify parses it: the answer part, "\\boxed{hang+x}"
            time.sleep(600)
        conn.send(("correct", "fake"))


def test_stuck_math_verify_times_out_to_zero():
    reward = CorrectnessReward(workers=1, timeout_s=1.0)
    grader = Grader(workers=1, timeout_s=1.0, wall_timeout_s=1.0, retry_factor=None)  # the fake hang sleeps
    grader._worker_target = hanging_worker
    reward._grader, reward._grader_pid = grader, os.getpid()
    metrics = {}
    try:
        reward(completions=["</think>\\boxed{okay+1}"], answer=["y+1"], answer_type=["expression"])  # warm up
        out = reward(
            completions=["</think>\\boxed{hang+x}", "</think>\\boxed{z+1}"],
            answer=["y+1", "y+1"],
            answer_type=["expression"] * 2,
            log_metric=lambda name, value: metrics.setdefault(name, value),
        )
    finally:
        reward.close()
    assert out == [0.0, 1.0]
    assert metrics["correctness_reward/timeout"] == 0.5


def test_verdicts_map_to_rewards():
    class FakeGrader:
        def __init__(self, verdicts):
            self.verdicts = verdicts

        def grade_parts(self, items):
            return [Grade(v, "x", d) for v, d in self.verdicts[: len(items)]]

        def close(self):
            pass

    reward = CorrectnessReward()
    reward._grader_pid = os.getpid()
    reward._grader = FakeGrader(
        [
            (Verdict.TIMEOUT, "slow"),
            (Verdict.ERROR, "math-verify failed: boom"),
            (Verdict.UNPARSABLE_GOLD, "bad"),
            (Verdict.NO_ANSWER, ""),
        ]
    )
    out = reward(completions=["</think>a"] * 4, answer=["x"] * 4, answer_type=["expression"] * 4)
    assert out == [0.0, 0.0, None, 0.0]


def broken_worker(conn, memory_mb):  # noqa: ARG001 - a worker whose math-verify cannot start
    conn.send(("fatal", "ImportError: no math-verify here"))


def test_math_verify_that_cannot_run_is_a_counted_warned_error_every_batch(caplog):
    """Not a silent fallback: answers that need math-verify are not graded as wrong without it."""
    reward = CorrectnessReward(workers=1)
    grader = Grader(workers=1)
    grader._worker_target = broken_worker  # real worker processes that fail at start-up
    reward._grader, reward._grader_pid = grader, os.getpid()
    batch = dict(
        completions=["</think>\\boxed{\\frac{1}{2}\\sqrt{3}}", "</think>\\boxed{7}"],
        answer=["\\frac{\\sqrt{3}}{2}", "7"],
        answer_type=["expression", "numeric"],
    )
    try:
        for _ in range(2):  # the second batch tries math-verify again: still unavailable, still counted
            metrics, extra = {}, {}
            out = reward(**batch, log_metric=metrics.setdefault, log_extra=extra.setdefault)
            assert out == [0.0, 1.0]  # the numeric fast path is unaffected
            assert metrics["correctness_reward/grader_unavailable"] == 0.5
            assert metrics["correctness_reward/grader_error"] == 0.0
            assert extra["correctness_reward/verdict"] == ["error", "correct"]
    finally:
        reward.close()
    assert caplog.text.count("math-verify cannot run here") == 1  # warned once per reason
    assert "failed to start" in caplog.text


def test_workers_do_not_rerun_the_training_script(tmp_path):
    """A script without a main guard must not be re-executed by each math-verify worker."""
    import subprocess
    import sys

    marker = tmp_path / "runs.txt"
    script = tmp_path / "train.py"
    script.write_text(
        "import os\n"
        f"open({str(marker)!r}, 'a').write(f'{{os.getpid()}}\\n')\n"
        "from recovery.rewards import CorrectnessReward\n"
        "r = CorrectnessReward(workers=2)\n"
        "print(r(completions=['</think>\\\\boxed{\\\\frac{1}{2}\\\\sqrt{3}}'], answer=['\\\\frac{\\\\sqrt{3}}{2}'],\n"
        "        answer_type=['expression']))\n"
        "r.close()\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[1.0]"
    assert len(marker.read_text().split()) == 1  # only the script's own process ran it
