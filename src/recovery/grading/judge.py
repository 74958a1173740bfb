"""An LLM judge for final answers, beside the rule-based grader (its disagreements are logged, not hidden).

Two prompts, chosen by name (``grading.judge_prompt``):

- ``default``: the judge sees the problem, the reference answer and the end of the response's answer part
  (where the final answer is), and replies Yes or No, greedily — the same reply contract as the paper's
  doubt judge (App. D.2).
- ``reference``: the authors' reference implementation's judge, for comparing with published figures: it
  is asked whether the reference answer is *present* in the last 8,000 characters after the last closing
  think tag (the whole text when there is none, so an unclosed continuation is judged too), and only an
  exact "Correct" counts. Its wording is protocol data in ``recovery/prompts/answer_judge_reference.yaml``
  (cited there).

Any backend works through `recovery.interventions.base.TextGenerator`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

import yaml

from recovery.generation import Decoding, Message, TextGenerator
from recovery.grading.extract import answer_part
from recovery.segment import THINK_TAGS
from recovery.types import Grade, Problem, Verdict

#: The judge prompts by name; "default" is the project's.
JUDGE_PROMPTS = ("default", "reference")
REFERENCE_PROMPT_FILE = "answer_judge_reference.yaml"

JUDGE_SYSTEM = (
    "You are an expert grader. Respond ONLY with 'Yes' or 'No'. Given a problem, its reference answer and the "
    "end of a solution, state whether the solution's FINAL answer is equivalent to the reference answer."
)
JUDGE_USER = (
    "Problem:\n{question}\n\nReference answer: {answer}\n\nEnd of the solution:\n{tail}\n\n"
    "Is the solution's final answer equivalent to the reference answer? Answer with Yes or No."
)
_REPLY = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)
_DEFAULT_TAIL, _DEFAULT_NEW_TOKENS = 2000, 8
# How the ``detail`` of a judge call that got no reply begins; the generator's reason follows it verbatim.
JUDGE_CALL_FAILED = "judge call failed: "
_CLOSE_TAGS = tuple(close for _, close in THINK_TAGS)
_REFERENCE_FIELD = re.compile(r"<(QUESTION|REFERENCE|ANSWER)>")


@dataclass(frozen=True, slots=True)
class ReferencePrompt:
    """The reference judge: its messages (``<QUESTION>``/``<REFERENCE>``/``<ANSWER>`` placeholders), how
    much of the response it sees, its one positive reply and its expected negative one."""

    system: str
    user: str
    tail_chars: int
    positive: str
    negative: str
    max_new_tokens: int

    def render(self, question: str, reference: str, answer: str) -> list[Message]:
        """The (system, user) messages; one substitution pass, so a question holding a placeholder stays as written."""
        values = {"QUESTION": question, "REFERENCE": reference, "ANSWER": answer}
        user = _REFERENCE_FIELD.sub(lambda m: values[m.group(1)], self.user)
        return [Message("system", self.system), Message("user", user)]

    def parse(self, reply: object) -> Grade:
        """``CORRECT`` only for a reply that is exactly `positive` once stripped; `negative` is ``WRONG``;
        any other text is ``ERROR`` (never correct, as the reference scores it 0, but kept visible)."""
        if not isinstance(reply, str):
            return Grade(Verdict.ERROR, None, f"judge replied with {type(reply).__name__}, not text")
        text = reply.strip()
        if text == self.positive:
            return Grade(Verdict.CORRECT, None, f"judge: {text}")
        if text == self.negative:
            return Grade(Verdict.WRONG, None, f"judge: {text}")
        return Grade(Verdict.ERROR, None, f"judge reply is neither {self.positive} nor {self.negative}: {text[:80]!r}")


@cache
def reference_prompt() -> ReferencePrompt:
    """The reference judge prompt, read from the package's prompt data."""
    raw = resources.files("recovery").joinpath("prompts", REFERENCE_PROMPT_FILE).read_text(encoding="utf-8")
    data = yaml.safe_load(raw)
    return ReferencePrompt(
        str(data["system"]),
        str(data["user"]),
        int(data["tail_chars"]),
        str(data["positive"]),
        str(data["negative"]),
        int(data["max_new_tokens"]),
    )


def after_last_close(response: str) -> str:
    """The text after the last closing think tag (any of `recovery.segment.THINK_TAGS`), stripped; the whole
    text, stripped, when there is none — what the reference judge is shown (before keeping its tail).

    The reference implementation looks for ``</think>`` only; ``</thought>`` (EXAONE) is found here too.

    >>> after_last_close("a</think>b</think> The answer is 4. ")
    'The answer is 4.'
    >>> after_last_close(" never closed, so 4 ")
    'never closed, so 4'
    """
    best, cut = -1, 0
    for tag in _CLOSE_TAGS:
        pos = response.rfind(tag)
        if pos > best:
            best, cut = pos, pos + len(tag)
    return response[cut:].strip()


@dataclass
class LLMJudge:
    """Grade a response by asking ``generator`` (greedy) with the judge prompt named ``prompt``.

    ``tail_chars`` bounds the response text shown and ``max_new_tokens`` the reply; None takes the prompt's
    own (default: 2,000 characters, 8 tokens; reference: 8,000 characters, 10 tokens).
    """

    generator: TextGenerator
    tail_chars: int | None = None
    max_new_tokens: int | None = None
    prompt: str = "default"

    def __post_init__(self) -> None:
        if self.prompt not in JUDGE_PROMPTS:
            raise ValueError(f"unknown judge prompt {self.prompt!r}; known: {', '.join(JUDGE_PROMPTS)}")

    def messages(self, problem: Problem, response: str) -> list[Message]:
        if self.prompt == "reference":
            ref = reference_prompt()
            tail = after_last_close(response)[-(self.tail_chars or ref.tail_chars) :]
            return ref.render(problem.question, problem.answer, tail)
        tail = answer_part(response)[-(self.tail_chars or _DEFAULT_TAIL) :]
        user = JUDGE_USER.format(question=problem.question, answer=problem.answer, tail=tail)
        return [Message("system", JUDGE_SYSTEM), Message("user", user)]

    def __call__(self, problem: Problem, response: str) -> Grade:
        """``CORRECT``/``WRONG`` from the reply; ``ERROR`` with the reply in ``detail`` if it is neither."""
        reference = reference_prompt() if self.prompt == "reference" else None
        default_tokens = _DEFAULT_NEW_TOKENS if reference is None else reference.max_new_tokens
        decoding = Decoding(temperature=0.0, max_new_tokens=self.max_new_tokens or default_tokens)
        try:
            reply = self.generator(self.messages(problem, response), decoding)
        except Exception as err:  # noqa: BLE001 — a failed judge call is a verdict, not a crash
            return Grade(Verdict.ERROR, None, f"{JUDGE_CALL_FAILED}{type(err).__name__}: {err}"[:300])
        return parse_judge_reply(reply) if reference is None else reference.parse(reply)


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
