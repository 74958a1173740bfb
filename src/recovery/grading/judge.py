"""An LLM judge for final answers, beside the rule-based grader (its disagreements are logged, not hidden).

The judge sees the problem, the reference answer and the end of the response (where the final answer
is), and replies Yes or No, greedily — the same reply contract as the paper's doubt judge (App. D.2).
Any backend works through `recovery.interventions.base.TextGenerator`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from recovery.grading.extract import answer_part
from recovery.interventions.base import Decoding, Message, TextGenerator
from recovery.types import Grade, Problem, Verdict

JUDGE_SYSTEM = (
    "You are an expert grader. Respond ONLY with 'Yes' or 'No'. Given a problem, its reference answer and the "
    "end of a solution, state whether the solution's FINAL answer is equivalent to the reference answer."
)
JUDGE_USER = (
    "Problem:\n{question}\n\nReference answer: {answer}\n\nEnd of the solution:\n{tail}\n\n"
    "Is the solution's final answer equivalent to the reference answer? Answer with Yes or No."
)
_REPLY = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)


@dataclass
class LLMJudge:
    """Grade a response by asking ``generator`` (greedy). ``tail_chars`` bounds the text shown."""

    generator: TextGenerator
    tail_chars: int = 2000
    max_new_tokens: int = 8

    def messages(self, problem: Problem, response: str) -> list[Message]:
        tail = answer_part(response)[-self.tail_chars :]
        user = JUDGE_USER.format(question=problem.question, answer=problem.answer, tail=tail)
        return [Message("system", JUDGE_SYSTEM), Message("user", user)]

    def __call__(self, problem: Problem, response: str) -> Grade:
        """``CORRECT``/``WRONG`` from the reply; ``ERROR`` with the reply in ``detail`` if it is neither."""
        try:
            reply = self.generator(self.messages(problem, response), Decoding(temperature=0.0, max_new_tokens=self.max_new_tokens))
        except Exception as err:  # noqa: BLE001 — a failed judge call is a verdict, not a crash
            return Grade(Verdict.ERROR, None, f"judge call failed: {type(err).__name__}: {err}"[:300])
        return parse_judge_reply(reply)


def parse_judge_reply(reply: object) -> Grade:
    """Map a judge's reply to a `Grade`.

    >>> parse_judge_reply("Yes.").verdict.value, parse_judge_reply(" no").verdict.value
    ('correct', 'wrong')
    >>> parse_judge_reply("Maybe").verdict.value
    'error'
    """
    if not isinstance(reply, str):
        return Grade(Verdict.ERROR, None, f"judge replied with {type(reply).__name__}, not text")
    match = _REPLY.match(reply)
    if not match:
        return Grade(Verdict.ERROR, None, f"judge reply is neither Yes nor No: {reply[:80]!r}")
    yes = match.group(1).lower() == "yes"
    return Grade(Verdict.CORRECT if yes else Verdict.WRONG, None, f"judge: {match.group(1)}")
