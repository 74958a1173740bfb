"""Doubt detectors for the doubt analysis: the lexical one (`recovery.doubt`) and the paper's LLM judge.

The paper (§4.2, App. D.2) asks an instruct LLM (Qwen2.5-32B-Instruct, greedy: Table 15 "Doubt
Classification", T=0) whether each sentence "indicates that the PRIOR reasoning contains an error or
irrelevant information", and reads Yes/No. `DoubtJudge` sends that prompt through any backend the
interventions use — a batched `recovery.backends.Generator` or a one-at-a-time `TextGenerator` — and
parses the reply with `parse_doubt_reply`. A reply that is neither Yes nor No, or a failed call, is no
label: the sentence is skipped and counted under its reason, never a crash.

Both detectors share one interface: ``detector(sentence) -> bool`` (like `recovery.doubt.is_doubt`) and
``detector.classify(sentences) -> list[bool | None]`` (None = skipped; ``detector.skips`` counts why).
The analysis uses `classify`, which batches and asks the judge about each distinct sentence once.

>>> parse_doubt_reply("**Yes.**"), parse_doubt_reply("Answer: no"), parse_doubt_reply("Maybe")
(JudgeReply(doubt=True, reason=''), JudgeReply(doubt=False, reason=''), JudgeReply(doubt=None, reason='no_yes_or_no'))
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from recovery.analysis.doubt_units import authors_doubt, authors_unit_text
from recovery.backends.registry import make_generator as registry_generator
from recovery.configs import from_mapping, load_yaml
from recovery.doubt import is_doubt
from recovery.generation import Decoding, GenerationRequest, Message, SamplingParams
from recovery.interventions.prompts import decoding_for
from recovery.model_config import ModelConfig
from recovery.plan import unit_rules
from recovery.plan.styles.project import JUDGE_TOKENS

__all__ = [
    "DOUBT_JUDGE_SYSTEM",
    "DOUBT_JUDGE_USER",
    "DoubtDetector",
    "DoubtJudge",
    "DoubtJudgeConfig",
    "JudgeReply",
    "LexicalDetector",
    "UnusableReply",
    "load_judge_config",
    "make_judge",
    "parse_doubt_reply",
]

# Paper App. D.2, "Doubt analysis prompt", verbatim (the PDF's typographic quotes around Yes/No made plain).
DOUBT_JUDGE_SYSTEM = (
    "You are an expert evaluator. Respond ONLY with 'Yes' or 'No'. Given a piece of text from a reasoning chain, "
    "state whether that text indicates that the PRIOR reasoning contains an error or irrelevant information."
)
DOUBT_JUDGE_USER = (
    "Consider the following text: {sentence_or_segment}. Does this text indicate that the previous reasoning "
    "contains errors or irrelevant information? Answer with Yes or No."
)
# Not in the paper: a Yes/No reply needs a handful of tokens; a judge that thinks first needs more
# (set ``max_new_tokens`` in the judge config).
DEFAULT_MAX_NEW_TOKENS = JUDGE_TOKENS
# Distinct sentences whose verdicts are kept (short interjections like "Wait, no." repeat a lot).
_CACHE_LIMIT = 500_000


@runtime_checkable
class DoubtDetector(Protocol):
    """What the doubt analysis needs from a detector."""

    name: str
    skips: Counter

    def __call__(self, sentence: str) -> bool: ...

    def classify(self, sentences: Sequence[str]) -> list[bool | None]: ...


@dataclass
class LexicalDetector:
    """`recovery.doubt.is_doubt` behind the detector interface (never skips a sentence)."""

    name: str = "lexical"
    skips: Counter = field(default_factory=Counter)

    def __call__(self, sentence: str) -> bool:
        return is_doubt(sentence)

    def classify(self, sentences: Sequence[str]) -> list[bool | None]:
        """`is_doubt` of each sentence."""
        return [is_doubt(s) for s in sentences]


# -- reply parsing -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JudgeReply:
    """A parsed judge reply: ``doubt`` is True (Yes), False (No) or None with a short ``reason``."""

    doubt: bool | None
    reason: str = ""


_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)
_DECORATION = str.maketrans("", "", "*_`\"'\u2018\u2019\u201c\u201d#>")
_LEAD = re.compile(r"^\s*(?:final\s+answer|answer|response|verdict)\s*[:\-]\s*", re.IGNORECASE)
_FIRST = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)
_ANY = re.compile(r"\b(yes|no)\b", re.IGNORECASE)
# A reply this long that does not open with Yes/No is an explanation, not an answer; only a short one is
# searched for a lone Yes or No ("I would say yes.").
_SHORT_REPLY_WORDS = 12
# Both words among the first few ("Yes or No", "yes/no") is an echo of the question, not an answer.
_OPENING_WORDS = 4


def parse_doubt_reply(reply: object) -> JudgeReply:
    """Read Yes/No from a judge reply, tolerating markdown, quotes, an "Answer:" lead and a closed
    ``<think>`` block. Anything else is ``JudgeReply(None, reason)`` with reason one of ``not_text``,
    ``empty``, ``unfinished_thinking``, ``ambiguous`` (both Yes and No) or ``no_yes_or_no``.

    >>> parse_doubt_reply("<think>The text says wait.</think>\\n\\nYes").doubt
    True
    >>> parse_doubt_reply("I would say no.").doubt, parse_doubt_reply("Yes or No?").reason
    (False, 'ambiguous')
    """
    if not isinstance(reply, str):
        return JudgeReply(None, "not_text")
    text = _THINK_BLOCK.sub(" ", reply)
    if "<think>" in text.lower():
        return JudgeReply(None, "unfinished_thinking")  # the budget ran out before the answer
    text = _LEAD.sub("", text.translate(_DECORATION).strip())
    if not text:
        return JudgeReply(None, "empty")
    first = _FIRST.match(text)
    if first:
        opening = re.findall(r"[a-z]+", text.lower())[:_OPENING_WORDS]
        if "yes" in opening and "no" in opening:
            return JudgeReply(None, "ambiguous")  # "Yes or No", "Yes/No": the prompt echoed, not an answer
        return JudgeReply(first.group(1).lower() == "yes")
    found = {m.lower() for m in _ANY.findall(text)}
    if len(found) == 2:
        return JudgeReply(None, "ambiguous")
    if len(found) == 1 and len(text.split()) <= _SHORT_REPLY_WORDS:
        return JudgeReply(found.pop() == "yes")
    return JudgeReply(None, "no_yes_or_no")


class UnusableReply(ValueError):
    """The judge gave no usable Yes/No for a sentence (raised only by the one-sentence ``judge(s)`` call)."""

    def __init__(self, sentence: str, reason: str, reply: str | None) -> None:
        super().__init__(f"doubt judge: no Yes/No for {sentence[:80]!r} ({reason}; reply {str(reply)[:80]!r})")
        self.reason = reason
        self.reply = reply


# -- the judge -----------------------------------------------------------------------------------------------


@dataclass
class DoubtJudge:
    """The paper's LLM doubt judge (App. D.2) over any generation backend.

    ``generator`` is a `recovery.backends.Generator` (requests are batched, ``batch_size`` at a time) or a
    `TextGenerator` (called once per sentence). Decoding is Table 15's "Doubt Classification" row
    (greedy), with ``max_new_tokens`` new tokens. Verdicts are cached per distinct sentence (greedy
    decoding gives the same reply again). ``skips`` counts skipped sentences by reason; ``examples``
    keeps the first reply seen for each reason, for the report. ``authors`` (``protocol: reference``)
    shows each unit with its newlines as spaces and reads every reply the authors' way
    (`recovery.analysis.doubt_units.authors_doubt`: Yes or else No, never skipped; a failed call still is).
    """

    generator: Any
    batch_size: int = 64
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    name: str = "judge"
    authors: bool = False
    skips: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    calls: int = 0
    _cache: dict[str, tuple[JudgeReply, str | None]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be ≥ 1, got {self.batch_size}")
        if not (hasattr(self.generator, "generate") or callable(self.generator)):
            raise TypeError(f"generator must be a Generator or a TextGenerator, got {type(self.generator).__name__}")

    @property
    def decoding(self) -> Decoding:
        """Table 15, "Doubt Classification": greedy (T=0)."""
        return decoding_for("doubt_classification", max_new_tokens=self.max_new_tokens)

    def messages(self, sentence: str) -> tuple[Message, Message]:
        """The App. D.2 (system, user) messages for one sentence (the authors': newlines as spaces)."""
        shown = authors_unit_text(sentence) if self.authors else sentence
        return Message("system", DOUBT_JUDGE_SYSTEM), Message(
            "user", DOUBT_JUDGE_USER.format(sentence_or_segment=shown)
        )

    def parse(self, reply: str) -> JudgeReply:
        """`parse_doubt_reply`, or the authors' reading (`authors_doubt`)."""
        return JudgeReply(authors_doubt(reply)) if self.authors and isinstance(reply, str) else parse_doubt_reply(reply)

    def __call__(self, sentence: str) -> bool:
        """Whether ``sentence`` expresses doubt; raises `UnusableReply` when the judge gives no Yes/No."""
        ((reply, raw),) = self._judge([sentence])
        if reply.doubt is None:
            raise UnusableReply(sentence, reply.reason, raw)
        return reply.doubt

    def classify(self, sentences: Sequence[str]) -> list[bool | None]:
        """The judge's verdict per sentence, None where it gave none (counted in ``skips``)."""
        out: list[bool | None] = []
        for _sentence, (reply, raw) in zip(sentences, self._judge(sentences)):
            if reply.doubt is None:
                self.skips[reply.reason] += 1
                self.examples.setdefault(reply.reason, str(raw)[:200])
            out.append(reply.doubt)
        return out

    def _judge(self, sentences: Sequence[str]) -> list[tuple[JudgeReply, str | None]]:
        if len(self._cache) > _CACHE_LIMIT:
            self._cache.clear()  # bounded memory on paper-scale runs; repeats within a call stay cached
        todo = list(dict.fromkeys(s for s in sentences if s not in self._cache))
        for start in range(0, len(todo), self.batch_size):
            batch = todo[start : start + self.batch_size]
            for sentence, raw in zip(batch, self._replies(batch)):
                reply = self.parse(raw) if raw is not None else JudgeReply(None, "generator_error")
                self._cache[sentence] = (reply, raw)
        return [self._cache[s] for s in sentences]

    def _replies(self, batch: list[str]) -> list[str | None]:
        """Raw reply text per sentence; None where the backend failed (the error text is kept in examples)."""
        self.calls += len(batch)
        decoding = self.decoding
        if hasattr(self.generator, "generate"):
            sampling = SamplingParams.from_decoding(decoding, n=1)
            requests = [
                GenerationRequest(f"doubt-{i}", sampling, messages=self.messages(s)) for i, s in enumerate(batch)
            ]
            replies: list[str | None] = [None] * len(batch)
            try:
                for result in self.generator.generate(requests):
                    i = int(result.request_id.split("-", 1)[1])
                    if result.error or not result.samples:
                        self.examples.setdefault("generator_error", str(result.error or "no samples")[:200])
                    else:
                        replies[i] = result.samples[0].text
            except Exception as err:  # noqa: BLE001 — a failed batch is counted per sentence, not fatal
                self.examples.setdefault("generator_error", f"{type(err).__name__}: {err}"[:200])
            return replies
        out: list[str | None] = []
        for sentence in batch:
            try:
                out.append(self.generator(list(self.messages(sentence)), decoding))
            except Exception as err:  # noqa: BLE001 — as above
                self.examples.setdefault("generator_error", f"{type(err).__name__}: {err}"[:200])
                out.append(None)
        return out


# -- configuration -------------------------------------------------------------------------------------------


@dataclass
class DoubtJudgeConfig:
    """A judge config file (YAML): the judge model and how to query it.

    Example (the paper's judge behind a vLLM server)::

        model: {name: qwen2.5-32b-instruct, backend: openai, base_url: http://localhost:8000/v1,
                path: Qwen/Qwen2.5-32B-Instruct}
        batch_size: 256
    """

    model: ModelConfig
    batch_size: int = 64
    # The project's default; under another style the default becomes that style's (`UnitRules.judge_tokens`).
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError("batch_size must be ≥ 1")
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be ≥ 1")


def load_judge_config(path: str | os.PathLike) -> DoubtJudgeConfig:
    """Read and validate a `DoubtJudgeConfig` YAML file (errors name the key path)."""
    return from_mapping(DoubtJudgeConfig, load_yaml(path), where=str(path))


def make_judge(
    config: DoubtJudgeConfig, make_generator: Callable[[ModelConfig], Any] | None = None, *, protocol: str = "default"
) -> DoubtJudge:
    """A `DoubtJudge` on the backend of ``config.model`` (built by ``make_generator``; default
    `recovery.backends.registry.make_generator`), reading replies as ``protocol`` does (``reference``: the
    authors'). Close it with ``judge.generator.close()``."""
    if make_generator is None:
        make_generator = registry_generator
    rules = unit_rules(protocol)
    tokens = config.max_new_tokens
    if tokens == DEFAULT_MAX_NEW_TOKENS:  # not chosen: the protocol's own
        tokens = rules.judge_tokens
    return DoubtJudge(
        make_generator(config.model),
        batch_size=config.batch_size,
        max_new_tokens=tokens,
        authors=rules.authors_reading,
    )
