"""The five interventions written by an instruct LLM (paper §3.1, prompts App. D.1, decoding Table 15).

The LLM is any `TextGenerator` (messages + `Decoding` in, text out) supplied through
`InterventionContext.generator`; the paper used Qwen2.5-32B-Instruct. What the model is shown as ``<R>``:

- *complete step* and *wrong continuation* replace R_k with "the next step", so they see R_1..R_{k-1}
  (the step being replaced is withheld; otherwise "the next step" would follow R_k and then stand in its
  place);
- *hallucinated fact* is appended after R_k, so it sees R_1..R_k;
- *paraphrase* rewrites R_1..R_k and sees all of it;
- *unrelated CoT* sees only a topic drawn per item from Table 17, never the problem or the reasoning.

``<R>`` is the shown steps joined with the step separator (a blank line), ``<Q>`` the problem's question.
Replies are cleaned by `recovery.interventions.cleaning`; unusable ones raise `InterventionFailed`.

That is the default protocol. Each class is built with the `TextRules` of a protocol (``rules``, see
`recovery.interventions.rules`), which own the prompt's question, template and ``<R>`` joining, the decoding,
the topic draw, what a reply becomes and how the prefix is written back; under ``protocol: reference`` they
are the authors' (`recovery.interventions.reference.REFERENCE_RULES`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from recovery.generation import Decoding, Message
from recovery.interventions.base import Edit, InterventionContext, InterventionFailed, steps_before_new
from recovery.interventions.cleaning import MULTI_PARAGRAPH_POLICIES, FailureReason, MultiParagraph
from recovery.interventions.rules import FollowsProtocol
from recovery.segment import join_steps
from recovery.types import Category

# Not in the paper: a paraphrase is as long as the prefix it rewrites (up to ~10k tokens on long traces),
# so the single-step default of 1024 new tokens would truncate it.
PARAPHRASE_MAX_NEW_TOKENS = 8192


def generate(ctx: InterventionContext, name: str, messages: Sequence[Message], decoding: Decoding) -> str:
    """Call the context's generator; a backend exception becomes ``InterventionFailed("generator_error")``
    so one bad request is counted instead of ending a long run. A missing generator is a setup error."""
    if ctx.generator is None:
        raise ValueError(f"{name} is LLM-backed: pass generator=<TextGenerator> (messages, decoding) -> str")
    try:
        reply = ctx.generator(list(messages), decoding)
    except Exception as exc:  # noqa: BLE001 — any backend failure is one failed item, reported by reason
        raise InterventionFailed(FailureReason.GENERATOR_ERROR, f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(reply, str):
        raise InterventionFailed(FailureReason.GENERATOR_ERROR, f"generator returned {type(reply).__name__}")
    return reply


@dataclass(frozen=True)
class _GeneratedStep(FollowsProtocol):
    """One new step written by the LLM from the problem and the reasoning so far.

    ``decoding=None`` uses the Table 15 row of this intervention, with ``max_new_tokens`` new tokens (not in
    the paper; None keeps the `Decoding` default) — so a run can bound the reply without restating the
    paper's sampling settings; ``multi_paragraph`` is the cleaning policy for replies with several
    paragraphs (see `clean_step_reply`). ``Edit.inserted_text`` is the cleaned step. ``rules``: the
    protocol's (`recovery.interventions.rules`).
    """

    decoding: Decoding | None = None
    multi_paragraph: MultiParagraph = "first"
    max_new_tokens: int | None = None

    name: ClassVar[str]
    category: ClassVar[Category]
    edit_kind: ClassVar[str]  # "replace_last" or "append"
    needs_generator: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.multi_paragraph not in MULTI_PARAGRAPH_POLICIES:
            raise ValueError(f"multi_paragraph must be one of {MULTI_PARAGRAPH_POLICIES}, got {self.multi_paragraph!r}")
        if self.max_new_tokens is not None and self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be ≥ 1, got {self.max_new_tokens}")
        if self.max_new_tokens is not None and self.decoding is not None:
            raise ValueError("set max_new_tokens inside decoding when passing a decoding")
        super().__post_init__()

    def decoding_used(self) -> Decoding:
        """The decoding sent to the LLM: ``decoding``, else this intervention's Table 15 row (the protocol's)."""
        return self.rules.decoding(self)

    def shown_steps(self, ctx: InterventionContext) -> tuple[str, ...]:
        """The steps rendered as ``<R>``: R_1..R_{k-1} when replacing R_k, R_1..R_k when appending."""
        return steps_before_new(ctx.prefix_steps, self.edit_kind)

    def seen(self, ctx: InterventionContext) -> str:
        """The trace's text the LLM was shown (a reply that repeats it is cleaned of it)."""
        return join_steps(self.shown_steps(ctx))

    def messages(self, ctx: InterventionContext) -> tuple[Message, Message]:
        """The App. D.1 (system, user) messages for this item (the protocol's template, question and ``<R>``)."""
        rules = self.rules
        return rules.template(self.name).render(Q=rules.question(ctx), R=rules.shown(self.name, self.shown_steps(ctx)))

    def apply(self, ctx: InterventionContext) -> Edit:
        """Generate the new step, make it a step by the protocol's rules and place it."""
        reply = generate(ctx, self.name, self.messages(ctx), self.decoding_used())
        text, notes = self.rules.new_step(reply, seen=self.seen(ctx), multi_paragraph=self.multi_paragraph)
        return Edit(self.rules.restored(self.shown_steps(ctx) + (text,), ctx), text, notes)


@dataclass(frozen=True)
class CompleteStep(_GeneratedStep):
    """Benign: another model writes the next step, replacing R_k (greedy)."""

    name: ClassVar[str] = "complete_step"
    category: ClassVar[Category] = Category.BENIGN
    edit_kind: ClassVar[str] = "replace_last"


@dataclass(frozen=True)
class WrongContinuation(_GeneratedStep):
    """Adversarial: a plausible but wrong next step replaces R_k (T=0.7, top-p 0.9, seed 80129)."""

    name: ClassVar[str] = "wrong_continuation"
    category: ClassVar[Category] = Category.ADVERSARIAL
    edit_kind: ClassVar[str] = "replace_last"


@dataclass(frozen=True)
class HallucinatedFact(_GeneratedStep):
    """Adversarial: a fabricated mathematical statement appended after R_k (T=0.7, top-p 0.9, seed 80129)."""

    name: ClassVar[str] = "hallucinated_fact"
    category: ClassVar[Category] = Category.ADVERSARIAL
    edit_kind: ClassVar[str] = "append"


@dataclass(frozen=True)
class UnrelatedCoT(_GeneratedStep):
    """Adversarial: the opening of a chain of thought on a random Table 17 topic replaces R_k
    (T=1.0, top-p 0.9, seed 80129). The model sees only the topic; ``topics=None`` uses Table 17."""

    topics: tuple[str, ...] | None = None

    name: ClassVar[str] = "unrelated_cot"
    category: ClassVar[Category] = Category.ADVERSARIAL
    edit_kind: ClassVar[str] = "replace_last"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.topics is not None:
            object.__setattr__(self, "topics", tuple(self.topics))
            if not self.topics:
                raise ValueError("topics must not be empty")

    def topic(self, ctx: InterventionContext) -> str:
        """The item's topic (default protocol: the first draw from its private generator)."""
        return self.rules.topic(self.topics, ctx)

    def messages(self, ctx: InterventionContext) -> tuple[Message, Message]:
        return self.rules.template(self.name).render(TOPIC=self.topic(ctx))

    def seen(self, ctx: InterventionContext) -> str:
        """Nothing from the trace was shown, so there is nothing a reply could repeat."""
        return ""


@dataclass(frozen=True)
class Paraphrase(FollowsProtocol):
    """Benign: the LLM rewrites the whole prefix R_1..R_k (greedy); the reply is re-split on blank lines.

    ``Edit.inserted_text`` is the whole rewritten prefix (steps joined with the separator). ``rules``: the
    protocol's (`recovery.interventions.rules`).
    """

    decoding: Decoding | None = None
    max_new_tokens: int = PARAPHRASE_MAX_NEW_TOKENS

    name: ClassVar[str] = "paraphrase"
    category: ClassVar[Category] = Category.BENIGN
    needs_generator: ClassVar[bool] = True
    edit_kind: ClassVar[str] = "rewrite"

    def messages(self, ctx: InterventionContext) -> tuple[Message, Message]:
        """The App. D.1 paraphrase messages: the question and the full prefix (as the protocol writes them)."""
        rules = self.rules
        return rules.template(self.name).render(Q=rules.question(ctx), R=rules.shown(self.name, ctx.prefix_steps))

    def apply(self, ctx: InterventionContext) -> Edit:
        """Rewrite the prefix and re-split it into steps."""
        reply = generate(ctx, self.name, self.messages(ctx), self.rules.decoding(self))
        steps, notes = self.rules.rewritten(reply, ctx)
        return Edit(steps, join_steps(steps), notes)


LLM_INTERVENTIONS: tuple[type, ...] = (CompleteStep, Paraphrase, WrongContinuation, HallucinatedFact, UnrelatedCoT)
