"""The LLM judge's prompt and reply parsing. The judge model itself (a strong LLM) cannot run here, so a
scripted generator stands in for it and records what it was asked."""

import pytest

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
    ((messages, decoding),) = gen.calls
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


# -- the reference prompt (the authors' judge, carried over in recovery/prompts/answer_judge_reference.yaml) --


def test_reference_prompt_shows_the_last_8000_chars_after_the_last_closing_tag():
    gen = Scripted("Correct")
    head = "<think>first</think>draft \\boxed{41}</think>"  # two closing tags: only text after the last one counts
    answer = "A" * 3000 + "MARK" + "B" * 8000 + " so the answer is \\boxed{42}.  "
    grade = LLMJudge(gen, prompt="reference")(PROBLEM, head + answer)
    assert grade.verdict is Verdict.CORRECT
    ((messages, decoding),) = gen.calls
    system, user = messages
    assert system.role == "system" and "determine if the Reference Answer is present" in system.content
    shown = answer.strip()[-8000:]
    assert user.content == (
        f"Question:\n{PROBLEM.question}\n\nReference Answer:\n42\n\nAnswer Content (extract):\n{shown}\n\n"
        "Is the Reference Answer present in the Answer Content? Respond with only 'Correct' or 'Incorrect'."
    )
    assert "MARK" not in user.content and "draft" not in user.content and "\\boxed{41}" not in user.content
    assert (decoding.temperature, decoding.max_new_tokens) == (0.0, 10)


def test_reference_prompt_judges_an_unclosed_continuation_and_the_thought_tag():
    gen = Scripted("Incorrect")
    assert LLMJudge(gen, prompt="reference")(PROBLEM, "  still thinking, \\boxed{42} ").verdict is Verdict.WRONG
    assert (
        gen.calls[0][0][1].content.split("Answer Content (extract):\n")[1].startswith("still thinking, \\boxed{42}\n")
    )
    # Only the model's own closing tag cuts the extract: EXAONE's </thought> for an EXAONE continuation ...
    thought = ("<thought>", "</thought>")
    LLMJudge(gen, prompt="reference")(PROBLEM, "r</think>old</thought> new \\boxed{42}", thought)
    assert "(extract):\nnew \\boxed{42}\n" in gen.calls[1][0][1].content
    # ... and for an R1 one </thought> is text, wherever it stands (issue 35: "stray tag" was all it saw).
    LLMJudge(gen, prompt="reference")(PROBLEM, "r</think>The answer is \\boxed{42}. </thought> stray tag")
    assert "(extract):\nThe answer is \\boxed{42}. </thought> stray tag\n" in gen.calls[2][0][1].content


def test_reference_prompt_counts_only_an_exact_correct():
    replies = {
        "Correct": Verdict.CORRECT,
        "  Correct\n": Verdict.CORRECT,
        "Incorrect": Verdict.WRONG,
        "correct": Verdict.ERROR,
        "Correct.": Verdict.ERROR,
        "Yes": Verdict.ERROR,
        "**Correct**": Verdict.ERROR,
    }
    for reply, verdict in replies.items():
        assert LLMJudge(Scripted(reply), prompt="reference")(PROBLEM, "</think>\\boxed{42}").verdict is verdict, reply
    # the default prompt keeps its Yes/No contract, so "Correct" is no verdict there
    assert LLMJudge(Scripted("Correct"))(PROBLEM, "</think>\\boxed{42}").verdict is Verdict.ERROR


def test_unknown_judge_prompt():
    with pytest.raises(ValueError, match="unknown judge prompt"):
        LLMJudge(Scripted("Yes"), prompt="paper")
