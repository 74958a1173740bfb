"""The LLM judge's prompt and reply parsing. The judge model itself (a strong LLM) cannot run here, so a
scripted generator stands in for it and records what it was asked."""

from recovery.grading.judge import JUDGE_SYSTEM, LLMJudge, parse_judge_reply
from recovery.types import AnswerType, Problem, Verdict

PROBLEM = Problem("math", "What is 6*7?", "42", AnswerType.NUMERIC, "unit")


class Scripted:
    def __init__(self, reply):
        self.reply, self.calls = reply, []

    def __call__(self, messages, decoding):
        self.calls.append((messages, decoding))
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


def test_judge_prompt_and_greedy_decoding():
    gen = Scripted("Yes")
    grade = LLMJudge(gen)(PROBLEM, "<think>lots of work</think> so the answer is \\boxed{42}")
    assert grade.verdict is Verdict.CORRECT
    (messages, decoding), = gen.calls
    assert messages[0].content == JUDGE_SYSTEM
    assert "Reference answer: 42" in messages[1].content
    assert "\\boxed{42}" in messages[1].content and "lots of work" not in messages[1].content  # answer part only
    assert decoding.temperature == 0.0


def test_judge_tail_is_bounded():
    gen = Scripted("No")
    LLMJudge(gen, tail_chars=50)(PROBLEM, "</think>" + "x" * 10_000 + "\\boxed{41}")
    assert len(gen.calls[0][0][1].content) < 400


def test_judge_failures_are_verdicts_not_exceptions():
    assert LLMJudge(Scripted(RuntimeError("server down")))(PROBLEM, "x").verdict is Verdict.ERROR
    assert LLMJudge(Scripted(None))(PROBLEM, "x").verdict is Verdict.ERROR
    assert parse_judge_reply("**Yes**").verdict is Verdict.CORRECT
    assert parse_judge_reply("Nope").verdict is Verdict.ERROR
    assert parse_judge_reply("No, it is 41").verdict is Verdict.WRONG
