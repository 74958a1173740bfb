"""Adversarial completions: every reward scores them or says None within 1 s, and never raises."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recovery.rewards import (
    CorrectnessReward,
    DoubtReward,
    LengthOverheadReward,
    RecoveryReward,
)

MB = 1_000_000
ADVERSARIAL = {
    "1MB_unclosed": "a " * (MB // 2),
    "1MB_closed_with_box": "Wait. " * (MB // 6) + "</think>\\boxed{5}",
    "1MB_of_box_openers": "</think>" + "\\boxed{" * (MB // 7),
    "nested_boxes": "</think>" + "\\boxed{" * 5000 + "5" + "}" * 5000,
    "unclosed_box_1MB": "</think>\\boxed{" + "1" * MB,
    "huge_exponent": "</think>\\boxed{10^{10^{10}}}",
    "power_tower": "</think>\\boxed{9^{9^{9^{9}}}}",
    "big_power": "</think>\\boxed{2^{99999999}}",
    "python_power": "</think>\\boxed{10**10**10}",
    "factorial": "</think>\\boxed{100000!}",
    "exponent_literal": "</think>The answer is 1e999999",
    "million_digits": "</think>The answer is " + "7" * MB,
    "nested_fracs": "</think>\\boxed{" + "\\frac{1}{" * 3000 + "2" + "}" * 3000 + "}",
    "open_parens": "</think>\\boxed{" + "(" * 100_000 + "}",
    "big_matrix": "</think>\\boxed{\\begin{pmatrix}" + "1&" * 5000 + "1\\end{pmatrix}}",
    "code_injection": "</think>\\boxed{__import__('os').system('touch /tmp/pwned_by_reward')}",
    "surrogates": "\ud800\udfff Wait \udc80</think>\\boxed{\ud83d5}",
    "nul_and_controls": "\x00\x01\x1b[31m</think>\\boxed{5}\x00",
    "non_utf8_bytes": b"\xff\xfe Wait, no.</think>\\boxed{5}",
    "none": None,
    "int": 5,
    "empty": "",
    "content_blocks": [{"role": "assistant", "content": [{"type": "text", "text": "Hmm.</think>\\boxed{5}"}]}],
    "message_without_content": [{"role": "assistant"}, 7, None],
    "dict_message": {"role": "assistant", "content": None},
    "bytes_content": [{"role": "assistant", "content": b"\x80</think>\\boxed{5}"}],
}
GOLDS = [("5", "numeric"), ("\\frac{\\sqrt{3}}{2}", "expression"), ("(C)", "multiple_choice")]


@pytest.fixture(scope="module")
def rewards():
    correctness = CorrectnessReward(workers=1, timeout_s=1.0)
    from transformers import AutoTokenizer

    from recovery.toy import checkpoint_dir

    tokenizer = AutoTokenizer.from_pretrained(str(checkpoint_dir()))
    funcs = [
        correctness,
        DoubtReward(correctness=correctness),
        LengthOverheadReward(),
        LengthOverheadReward(unit="tokens", tokenizer=tokenizer),
        RecoveryReward(correctness=correctness, doubt=DoubtReward(correctness=correctness)),
    ]
    # start the math-verify worker first: its one-off start is not a per-item cost
    correctness(
        completions=["</think>\\boxed{\\sqrt{3}/2}"], answer=["\\frac{\\sqrt{3}}{2}"], answer_type=["expression"]
    )
    yield funcs
    correctness.close()


@pytest.mark.parametrize("gold,answer_type", GOLDS, ids=[t for _, t in GOLDS])
@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_adversarial_completion(rewards, name, gold, answer_type):
    completion = ADVERSARIAL[name]
    for func in rewards:
        start = time.perf_counter()
        out = func(
            prompts=["p"],
            completions=[completion],
            completion_ids=[[1, 2, 3]],
            answer=[gold],
            answer_type=[answer_type],
            domain=["math"],
            reference_length=[100],
            intervention=["wrong_step"],
        )
        elapsed = time.perf_counter() - start
        assert len(out) == 1 and (out[0] is None or isinstance(out[0], float)), (func, out)
        assert elapsed < 1.0, f"{func.__name__} took {elapsed:.2f} s on {name}"


def test_nothing_was_executed():
    import os

    assert not os.path.exists("/tmp/pwned_by_reward")


def test_expected_scores_on_a_few(rewards):
    correctness = rewards[0]

    def one(completion, gold="5", answer_type="numeric"):
        return correctness(completions=[completion], answer=[gold], answer_type=[answer_type], domain=["m"])[0]

    assert one(ADVERSARIAL["1MB_unclosed"]) == 0.0  # no final answer
    assert one(ADVERSARIAL["1MB_closed_with_box"]) == 1.0  # long but well-formed
    assert one(ADVERSARIAL["huge_exponent"], "10", "expression") == 0.0  # refused, not computed
    assert one(ADVERSARIAL["non_utf8_bytes"]) == 1.0  # decoded with replacement
    assert one(ADVERSARIAL["none"]) is None  # no completion at all


@pytest.mark.parametrize("bad", [None, 5, "not a list"])
def test_odd_batches_never_raise(bad):
    for func in (CorrectnessReward(use_math_verify=False), DoubtReward(), LengthOverheadReward()):
        out = func(prompts=["a", "b"], completions=bad, answer=bad, answer_type=bad, reference_length=bad)
        assert isinstance(out, list) and all(r is None or isinstance(r, float) for r in out)
    assert DoubtReward()(prompts=["a", "b"]) == [None, None]
    assert DoubtReward()() == []


def test_column_shorter_than_batch_scores_none():
    out = CorrectnessReward(use_math_verify=False)(
        completions=["</think>5", "</think>5"], answer=["5"], answer_type=["numeric", "numeric"]
    )
    assert out == [1.0, None]


def test_failing_logger_does_not_break_scoring():
    def explode(*args):
        raise RuntimeError("logger down")

    out = DoubtReward(pay_for="expression")(
        completions=["Wait."], intervention=["wrong_step"], log_metric=explode, log_extra=explode
    )
    assert out == [1.0]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    pieces=st.lists(
        st.sampled_from(
            list("0123456789{}\\^!()$.,=+-*/ xWaitbodefrcsqt</>\n")
            + ["\\boxed{", "</think>", "\\frac{", "^{", "\ud800", "Wait, no. "]
        ),
        max_size=40,
    )
)
def test_fuzzed_text_never_raises(pieces):
    text = "".join(pieces)
    funcs = (CorrectnessReward(use_math_verify=False), DoubtReward(), LengthOverheadReward())
    for func in funcs:
        out = func(completions=[text], answer=["12"], answer_type=["numeric"], reference_length=[10])
        assert len(out) == 1 and (out[0] is None or isinstance(out[0], float))


def test_the_token_unit_scores_what_the_character_unit_scores(r1_tokenizer):
    """A lone surrogate (the tokenizer cannot encode it) and a reference near the largest float (its
    saturation point overflows) are scored in tokens as they are in characters, not None."""
    completions = ["ab\ud800c Wait</think>5", "abc</think>5", "x" * 50 + "</think>5"]
    references = [3, 9e307, 1.7e308]
    chars = LengthOverheadReward()(completions=completions, reference_length=references)
    tokens = LengthOverheadReward(unit="tokens", tokenizer=r1_tokenizer)(
        completions=completions, reference_length=references
    )
    assert None not in chars and None not in tokens, (chars, tokens)
    assert tokens[1:] == chars[1:] == [0.0, 0.0]  # far below any reference
    assert tokens[0] < 0 and chars[0] < 0  # longer than the reference in both units


def test_a_none_answer_type_is_not_a_missing_column(caplog):
    """The column exists and one row's value is None: that row scores None, the warning says so, and it does
    not claim the column is missing."""
    reward = CorrectnessReward()
    scores = reward(
        completions=["</think>\\boxed{12}"] * 2, answer=["12", "12"], answer_type=["numeric", None], domain=["m"] * 2
    )
    assert scores == [1.0, None]
    assert "no 'answer_type' column" not in caplog.text
    assert "'answer_type' is None" in caplog.text
