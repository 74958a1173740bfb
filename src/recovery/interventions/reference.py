"""The paper's seven interventions as the authors' code writes them (``protocol: reference``, part
"interventions"), beside the project's own (`recovery.interventions.llm_backed`, `.rule_based`).

Each follows rllm_robustness/interventions.py of github.com/ExplainableML/RLLM-CoT-Robustness at
`recovery.protocol.reference().commit` (functions named per class); the prompts and topics are their
constants (``prompts/reference_interventions.yaml``). Where they differ from the default protocol:

- the prefix is restored the authors' way (`recovery.interventions.reference_text.restored_steps`);
- prompts: the question is the problem, a blank line and the authors' instruction; ``<R>`` is the shown
  steps joined with one newline (complete step, wrong continuation, hallucinated fact) or a blank line
  (paraphrase); blank lines between the template's sections; their system prompts;
- the LLM's reply is stripped and inserted whole (blank lines included), never skipped; a paraphrase is
  re-split on blank lines (nothing left: one empty step);
- random characters, Wikipedia paragraphs and Unrelated-CoT topics are drawn from the item's *batch
  position* (`InterventionContext.position`, see `reference_text.batch_positions`), not a per-item seed;
- ``Edit.inserted_text`` is the authors' ``intervention_text``: the new step, the whole mutated step for
  random characters, the raw pool paragraph for Wikipedia text, the whole rewrite for paraphrase.

`create` builds one by its registry name; the chains stage uses these when
``config.style("interventions") == "reference"``. Chains made with them record ``protocol: reference`` in
their options, so their ids differ from the default protocol's.
"""

from __future__ import annotations

import random
import string
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any, ClassVar

import yaml

from recovery.generation import Decoding, Message
from recovery.interventions.base import Edit, Intervention, InterventionContext, steps_before_new
from recovery.interventions.llm_backed import generate
from recovery.interventions.prompts import PromptTemplate, decoding_for
from recovery.interventions.reference_text import ReferencePool, restored_steps, stripped_steps
from recovery.protocol import reference
from recovery.types import Category

STYLE = "reference"
DATA_FILE = "reference_interventions.yaml"
# interventions.py insert_random_characters: letters, digits, punctuation and a space; ratio 0.5.
ALPHABET = string.ascii_letters + string.digits + string.punctuation + " "
RATIO = 0.5


@cache
def _data() -> Mapping[str, Any]:
    text = resources.files("recovery").joinpath("prompts", DATA_FILE).read_text(encoding="utf-8")
    return MappingProxyType(yaml.safe_load(text))


def template(name: str) -> PromptTemplate:
    """The authors' (system, user) template of one LLM-backed intervention."""
    entry = _data()["templates"][name]
    return PromptTemplate(name, entry["authors_name"], entry["system"], entry["user"])


def topics() -> tuple[str, ...]:
    """The authors' Unrelated-CoT topics, in their order (constants.py ``UNRELATED_TOPICS``)."""
    return tuple(_data()["topics"])


def question_of(ctx: InterventionContext) -> str:
    """The authors' stored question: the problem, a blank line, their instruction
    (scripts/generate_traces.py ``prompt_text``)."""
    return f"{ctx.problem.question}\n\n{reference()['instruction']}"


def decoding(name: str) -> Decoding:
    """constants.py ``INTERVENTION_DECODING``: the paper's Table 15 row with the authors' new-token limit."""
    return decoding_for(name, max_new_tokens=int(reference()["intervention_max_new_tokens"][name]))


def _position(ctx: InterventionContext, name: str) -> int:
    if ctx.position is None:
        raise ValueError(f"{name} (protocol: reference) draws from the item's batch position: none was given")
    return ctx.position


def _originals(ctx: InterventionContext) -> list[str]:
    return [step.text for step in ctx.steps]


@dataclass(frozen=True)
class _ReferenceStep:
    """A new step written by the intervention LLM (interventions.py ``apply_llm_intervention_batch``).

    ``join`` is how the shown steps become ``<R>``; ``shown`` which prefix steps are shown (``"before"``:
    R_1..R_{k-1}, ``"all"``: R_1..R_k); ``edit_kind`` where the step goes (`recovery.interventions.base`).
    """

    name: ClassVar[str]
    category: ClassVar[Category]
    edit_kind: ClassVar[str]
    needs_generator: ClassVar[bool] = True
    protocol: ClassVar[str] = STYLE
    join: ClassVar[str] = "\n"

    def shown_steps(self, ctx: InterventionContext) -> tuple[str, ...]:
        return steps_before_new(ctx.prefix_steps, self.edit_kind)

    def messages(self, ctx: InterventionContext) -> tuple[Message, Message]:
        """The (system, user) messages of build_*_prompts and their system prompt."""
        return template(self.name).render(Q=question_of(ctx), R=self.join.join(self.shown_steps(ctx)))

    def reply(self, ctx: InterventionContext) -> str:
        """The reply, stripped (the authors' runner strips it, and the batch function again)."""
        return str(generate(ctx, self.name, self.messages(ctx), decoding(self.name))).strip()

    def apply(self, ctx: InterventionContext) -> Edit:
        generated = self.reply(ctx)
        edited = [*self.shown_steps(ctx), generated]
        return Edit(restored_steps(edited, _originals(ctx)), generated)


@dataclass(frozen=True)
class ReferenceCompleteStep(_ReferenceStep):
    """Benign, the authors' way: the next step replaces R_k (build_complete_step_prompts)."""

    name: ClassVar[str] = "complete_step"
    category: ClassVar[Category] = Category.BENIGN
    edit_kind: ClassVar[str] = "replace_last"


@dataclass(frozen=True)
class ReferenceWrongContinuation(_ReferenceStep):
    """Adversarial, the authors' way: a wrong next step replaces R_k (build_wrong_reasoning_prompts)."""

    name: ClassVar[str] = "wrong_continuation"
    category: ClassVar[Category] = Category.ADVERSARIAL
    edit_kind: ClassVar[str] = "replace_last"


@dataclass(frozen=True)
class ReferenceHallucinatedFact(_ReferenceStep):
    """Adversarial, the authors' way: a false statement after R_k, padded like the trace's step k+1
    (build_wrong_fact_prompts; _restore_for_intervention pairs it with that step's whitespace)."""

    name: ClassVar[str] = "hallucinated_fact"
    category: ClassVar[Category] = Category.ADVERSARIAL
    edit_kind: ClassVar[str] = "append"


@dataclass(frozen=True)
class ReferenceUnrelatedCoT(_ReferenceStep):
    """Adversarial, the authors' way: an unrelated opening replaces R_k; the topic is draw number
    *position* of ``random.Random(topic_seed).choices(topics)`` (build_unrelated_prompts draws one per item
    of the batch; each draw is one ``random()``, so draw *p* does not depend on the batch's size)."""

    name: ClassVar[str] = "unrelated_cot"
    category: ClassVar[Category] = Category.ADVERSARIAL
    edit_kind: ClassVar[str] = "replace_last"

    def topic(self, ctx: InterventionContext) -> str:
        position = _position(ctx, self.name)
        return random.Random(int(reference()["topic_seed"])).choices(topics(), k=position + 1)[position]

    def messages(self, ctx: InterventionContext) -> tuple[Message, Message]:
        return template(self.name).render(TOPIC=self.topic(ctx))


@dataclass(frozen=True)
class ReferenceParaphrase(_ReferenceStep):
    """Benign, the authors' way: the whole prefix rewritten; the reply's blank-line pieces, stripped, are
    the new prefix and, joined, the inserted text (build_rewrite_prompts, ``skip_metadata=True``)."""

    name: ClassVar[str] = "paraphrase"
    category: ClassVar[Category] = Category.BENIGN
    edit_kind: ClassVar[str] = "rewrite"
    join: ClassVar[str] = "\n\n"

    def shown_steps(self, ctx: InterventionContext) -> tuple[str, ...]:
        return ctx.prefix_steps

    def apply(self, ctx: InterventionContext) -> Edit:
        steps = stripped_steps(self.reply(ctx))
        return Edit(steps, "\n\n".join(steps))


def insert_characters(text: str, rng: random.Random) -> str:
    """interventions.py ``insert_random_characters`` at ratio 0.5: ``max(1, round(0.5·len))`` positions
    drawn with ``randint(0, len)`` (repeats allowed), sorted, then one ``choice`` of the alphabet inserted at
    each (shifted by the characters already inserted). Empty text stays empty.

    >>> insert_characters("", random.Random(0)), len(insert_characters("abcd", random.Random(0)))
    ('', 6)
    """
    if not text:
        return text
    count = max(1, int(round(RATIO * len(text))))
    positions = sorted([rng.randint(0, len(text)) for _ in range(count)])
    chars = list(text)
    for offset, position in enumerate(positions):
        chars.insert(position + offset, rng.choice(ALPHABET))
    return "".join(chars)


@dataclass(frozen=True)
class ReferenceRandomCharacters:
    """Neutral, the authors' way: characters inserted into R_k with ``random.Random(random_seed +
    position)``; the inserted text is the whole mutated step (apply_neutral_intervention_batch). An empty
    R_k stays as it is (no skip)."""

    name: ClassVar[str] = "random_characters"
    category: ClassVar[Category] = Category.NEUTRAL
    needs_generator: ClassVar[bool] = False
    edit_kind: ClassVar[str] = "modify_last"
    protocol: ClassVar[str] = STYLE

    def apply(self, ctx: InterventionContext) -> Edit:
        rng = random.Random(int(reference()["random_seed"]) + _position(ctx, self.name))
        mutated = insert_characters(ctx.prefix_steps[-1], rng)
        edited = [*ctx.prefix_steps[:-1], mutated]
        return Edit(restored_steps(edited, _originals(ctx)), mutated)


@dataclass(frozen=True)
class ReferenceWikipediaText:
    """Neutral, the authors' way: R_k replaced by ``pool[position % len(pool)]`` of a `ReferencePool`; the
    inserted text is the paragraph as the pool holds it (apply_neutral_intervention_batch)."""

    pool: ReferencePool

    name: ClassVar[str] = "wikipedia_text"
    category: ClassVar[Category] = Category.NEUTRAL
    needs_generator: ClassVar[bool] = False
    needs_pool: ClassVar[bool] = True
    edit_kind: ClassVar[str] = "replace_last"
    protocol: ClassVar[str] = STYLE

    def __post_init__(self) -> None:
        if not isinstance(self.pool, ReferencePool):
            raise TypeError(f"wikipedia_text (protocol: reference) needs a ReferencePool, got {type(self.pool)}")

    def apply(self, ctx: InterventionContext) -> Edit:
        paragraph = self.pool.at(_position(ctx, self.name))
        edited = [*ctx.prefix_steps[:-1], paragraph]
        return Edit(restored_steps(edited, _originals(ctx)), paragraph)


REFERENCE_INTERVENTIONS: Mapping[str, type] = MappingProxyType(
    {
        cls.name: cls
        for cls in (
            ReferenceCompleteStep,
            ReferenceParaphrase,
            ReferenceRandomCharacters,
            ReferenceWikipediaText,
            ReferenceWrongContinuation,
            ReferenceHallucinatedFact,
            ReferenceUnrelatedCoT,
        )
    }
)


def is_reference(impl: object) -> bool:
    """Whether ``impl`` is one of the authors' implementations (its chains follow their text handling)."""
    return getattr(impl, "protocol", None) == STYLE


def create(name: str, **options: Any) -> Intervention:
    """The authors' version of the intervention called ``name`` (``pool=`` a `ReferencePool` for
    ``wikipedia_text``; the others take no options: their settings are the authors')."""
    if name not in REFERENCE_INTERVENTIONS:
        raise KeyError(f"{name!r} has no reference implementation; known: {', '.join(REFERENCE_INTERVENTIONS)}")
    cls = REFERENCE_INTERVENTIONS[name]
    unknown = set(options) - ({"pool"} if name == "wikipedia_text" else set())
    if unknown:
        raise ValueError(
            f"interventions.options.{name}: {sorted(unknown)} do not apply under protocol: reference (the "
            "authors' settings are fixed); set protocol_parts: {interventions: default} to use them"
        )
    return cls(**options)
