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

What the judge is shown: by default the problem as stored and the continuation. With ``authors_input``
(``protocol: reference``, part ``grading``) it is shown what the authors' judge sees (scripts/judge_answers.py
``main``, completions mode): the question with the reasoning instruction their traces were asked with, and
the extract of the *complete answer* (`recovery.metrics.reference.complete_answer`: prefix, separator and
continuation) after the last ``</think>`` only (``extract_answer_for_judging``). The extract of the complete
answer equals that of the continuation alone unless the continuation never closes and is short
(`needs_prefix`), so only those need their chain's prefix. Not reproduced: their prompt is cut to its last
30,000 tokens of the judge's tokenizer, which a question and an 8,000-character extract never reach.
Why the default differs: the question is the problem (the instruction belongs to the model's prompt), and a
verdict on the answer should not depend on the intervened prefix it continues.

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
from recovery.protocol import reference
from recovery.segment import AUTHORS_CLOSE, THINK, ThinkTags
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


def after_last_close(response: str, think_close: str = THINK[1]) -> str:
    """The text after the last closing think tag of the response's model (``think_close``), stripped; the
    whole text, stripped, when there is none — what the reference judge is shown (before keeping its tail)
    under the project's protocol. Another family's closing tag is text.

    >>> after_last_close("a</think>b</think> The answer is 4. ")
    'The answer is 4.'
    >>> after_last_close("so</think> The answer is \\boxed{4}. </thought> stray tag")
    'The answer is \\boxed{4}. </thought> stray tag'
    >>> after_last_close(" never closed, so 4 ")
    'never closed, so 4'
    """
    cut = response.rfind(think_close)
    return (response if cut < 0 else response[cut + len(think_close) :]).strip()


def authors_extract(response: str) -> str:
    """The authors' extract (scripts/judge_answers.py ``extract_answer_for_judging``): the text after the last
    ``</think>``, stripped, or the whole text stripped — ``</thought>`` is not a closing tag there.

    >>> authors_extract("a</think>b</think> 4 "), authors_extract("x</thought> 4 ")
    ('4', 'x</thought> 4')
    """
    cut = response.rfind(AUTHORS_CLOSE)
    return (response if cut < 0 else response[cut + len(AUTHORS_CLOSE) :]).strip()


def needs_prefix(continuation: str, tail_chars: int) -> bool:
    """Whether the authors' extract of a complete answer (prefix + separator + ``continuation``, stripped)
    can differ from that of ``continuation`` alone: only when the continuation holds no ``</think>`` and,
    stripped, is shorter than the extract's ``tail_chars`` (plus a tag's length, so a tag cut by the
    separator cannot matter either).

    >>> needs_prefix("so 4</think>4", 8000), needs_prefix("still thinking", 8000), needs_prefix("x" * 9000, 8000)
    (False, True, False)
    """
    return AUTHORS_CLOSE not in continuation and len(continuation.strip()) < tail_chars + len(AUTHORS_CLOSE)


def authors_question(question: str) -> str:
    """The question as the authors stored it for their judge: the problem, a blank line and their reasoning
    instruction (scripts/generate_traces.py ``main``; `recovery.protocol.reference` ``instruction``)."""
    return f"{question}\n\n{reference()['instruction']}"


# The authors' prompt of each judge prompt name (`JUDGE_PROMPTS`); None for the project's own.
_AUTHORS_PROMPT = {"default": lambda: None, "reference": reference_prompt}


@dataclass
class LLMJudge:
    """Grade a response by asking ``generator`` (greedy) with the judge prompt named ``prompt``.

    ``tail_chars`` bounds the response text shown and ``max_new_tokens`` the reply; None takes the prompt's
    own (default: 2,000 characters, 8 tokens; reference: 8,000 characters, 10 tokens). ``authors_input``
    (reference prompt only) shows the judge the authors' input: the question with their instruction and
    `authors_extract` of ``response``, which the caller makes the complete answer where `needs_prefix`.
    """

    generator: TextGenerator
    tail_chars: int | None = None
    max_new_tokens: int | None = None
    prompt: str = "default"
    authors_input: bool = False

    def __post_init__(self) -> None:
        if self.prompt not in JUDGE_PROMPTS:
            raise ValueError(f"unknown judge prompt {self.prompt!r}; known: {', '.join(JUDGE_PROMPTS)}")
        self._authors_prompt = _AUTHORS_PROMPT[self.prompt]()  # None: the project's prompt
        if self.authors_input and self._authors_prompt is None:
            raise ValueError("the authors' judge input goes with the reference judge prompt")

    @property
    def shown_chars(self) -> int:
        """How many characters of the response's extract the judge is shown."""
        own = _DEFAULT_TAIL if self._authors_prompt is None else self._authors_prompt.tail_chars
        return self.tail_chars or own

    def messages(self, problem: Problem, response: str, tags: ThinkTags = THINK) -> list[Message]:
        """The judge's messages for ``response``, written by a model with think ``tags`` (which decide where
        its answer starts; the authors' input looks for ``</think>`` whatever the model)."""
        ref = self._authors_prompt
        if ref is not None:
            if self.authors_input:
                tail = authors_extract(response)[-self.shown_chars :]
                return ref.render(authors_question(problem.question), problem.answer, tail)
            tail = after_last_close(response, tags[1])[-self.shown_chars :]
            return ref.render(problem.question, problem.answer, tail)
        tail = answer_part(response, tags)[-(self.tail_chars or _DEFAULT_TAIL) :]
        user = JUDGE_USER.format(question=problem.question, answer=problem.answer, tail=tail)
        return [Message("system", JUDGE_SYSTEM), Message("user", user)]

    def __call__(self, problem: Problem, response: str, tags: ThinkTags = THINK) -> Grade:
        """``CORRECT``/``WRONG`` from the reply; ``ERROR`` with the reply in ``detail`` if it is neither
        (``tags``: the think tags of the model that wrote ``response``, see `messages`)."""
        reference = self._authors_prompt
        default_tokens = _DEFAULT_NEW_TOKENS if reference is None else reference.max_new_tokens
        decoding = Decoding(temperature=0.0, max_new_tokens=self.max_new_tokens or default_tokens)
        try:
            reply = self.generator(self.messages(problem, response, tags), decoding)
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
