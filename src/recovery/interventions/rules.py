"""What the paper's seven interventions do differently under each protocol, chosen once: a `TextRules`.

An intervention class (`recovery.interventions.llm_backed`, `.rule_based`) owns what it does: which steps it
shows the LLM, where its text goes. Its ``rules`` (a `TextRules`, set when it is built) own the protocol's
text handling around that, and the loop (`recovery.interventions.apply`) asks the same object how to cut
and finish a chain:

- the prompt: the question, the template, how the shown steps become ``<R>``, the decoding;
- the reply: cleaned into one step (or re-split into a prefix), or taken whole, stripped;
- where draws come from: the item's private generator, or the trace's batch position;
- ``Edit.inserted_text``, and how the edited prefix is written back (verbatim, or restored);
- the chain: its steps and cut, the appended "Wait", and what the chain records about its protocol.

`DEFAULT_RULES` are the project's own protocol (``protocol: default``); the authors' are
`recovery.interventions.reference.REFERENCE_RULES`. An intervention that is not one of the paper's seven
has no ``rules`` and follows the default protocol's chain (`rules_of`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from recovery.generation import Decoding
from recovery.interventions.base import InterventionContext, InterventionFailed
from recovery.interventions.characters import insert_random_characters
from recovery.interventions.cleaning import TRUNCATED_STEP, FailureReason, clean_rewrite_reply, clean_step_reply
from recovery.interventions.prompts import PromptTemplate, decoding_for, load_topics, template_for
from recovery.interventions.wikipedia import WikipediaPool
from recovery.segment import STEP_SEPARATOR, cut_at, join_steps
from recovery.types import Cut, Step, Trace

# Field metadata of an intervention setting that is not recorded in chain ids (`describe_intervention`).
NOT_RECORDED = "not_recorded"


class TextRules:
    """The default protocol's rules; `recovery.interventions.reference.ReferenceRules` overrides each one.

    Stateless: one instance per protocol, shared by every intervention built under it.
    """

    name: ClassVar[str] = "default"
    consecutive: ClassVar[bool] = True  # whether k consecutive interventions (``repeats > 1``) exist
    # Traces per batch when items draw by their position in a batch (the authors' runner); None: per-item seeds.
    batch_size: ClassVar[int | None] = None
    # Whether a Wikipedia pool may come from a `datasets` source (``datasets:<name>:<config>``), not only a file.
    reads_datasets_pool: ClassVar[bool] = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    # --- building --------------------------------------------------------------------------------------

    def check(self, impl: Any) -> None:
        """Refuse settings of ``impl`` this protocol has no version of (the default protocol has them all)."""

    def pool(self, pool: Any) -> Any:
        """A *Wikipedia text* pool as this protocol reads one: a `WikipediaPool` (a path is loaded)."""
        if pool is None:
            raise ValueError(
                "wikipedia_text needs a paragraph pool: pass pool=WikipediaPool.from_jsonl(...) (or "
                ".from_text / .from_datasets), or pool='path/to/paragraphs.jsonl'"
            )
        return pool if isinstance(pool, WikipediaPool) else WikipediaPool.from_path(pool)

    # --- the intervention LLM's prompt -----------------------------------------------------------------

    def template(self, name: str) -> PromptTemplate:
        """The (system, user) template of the LLM-backed intervention ``name``: App. D.1."""
        return template_for(name)

    def question(self, ctx: InterventionContext) -> str:
        """``<Q>``: the problem's question."""
        return ctx.problem.question

    def shown(self, name: str, steps: Sequence[str]) -> str:
        """``<R>``: the shown steps joined with the step separator."""
        return join_steps(steps)

    def decoding(self, impl: Any) -> Decoding:
        """The decoding sent to the LLM: the intervention's ``decoding``, else its Table 15 row with its
        ``max_new_tokens``."""
        return impl.decoding or decoding_for(impl.name, max_new_tokens=impl.max_new_tokens)

    def topic(self, topics: Sequence[str] | None, ctx: InterventionContext) -> str:
        """The item's Unrelated-CoT topic: the first draw of its private generator among ``topics``
        (None: Table 17)."""
        topics = topics if topics is not None else load_topics()
        return topics[ctx.rng.randrange(len(topics))]

    # --- the reply and the edit ------------------------------------------------------------------------

    def new_step(self, reply: str, *, seen: str, multi_paragraph: str) -> tuple[str, tuple[str, ...]]:
        """The step an LLM reply becomes, and its notes: cleaned (`clean_step_reply`; ``seen`` is the text the
        LLM was shown), `TRUNCATED_STEP` noted when the reply was cut at ``max_new_tokens``."""
        cleaned = clean_step_reply(reply, seen=seen, multi_paragraph=multi_paragraph)
        notes = (*cleaned.notes, TRUNCATED_STEP) if getattr(reply, "truncated", False) else cleaned.notes
        return cleaned.text, notes

    def rewritten(self, reply: str, ctx: InterventionContext) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The prefix a paraphrase reply becomes, and its notes (`clean_rewrite_reply`)."""
        return clean_rewrite_reply(reply, original=join_steps(ctx.prefix_steps))

    def mutated(self, impl: Any, ctx: InterventionContext) -> tuple[str, str]:
        """R_k with random characters inserted, and the inserted text: the characters only, drawn from the
        item's generator; none to insert is `InterventionFailed` (``step_too_short``)."""
        last = ctx.prefix_steps[-1]
        new_last, inserted = insert_random_characters(last, ctx.rng, ratio=impl.ratio, alphabet=impl.alphabet)
        if not inserted:
            raise InterventionFailed(
                FailureReason.STEP_TOO_SHORT, f"step {ctx.cut.index} has {len(last)} chars, nothing to insert"
            )
        return new_last, inserted

    def paragraph(self, pool: Any, ctx: InterventionContext) -> str:
        """The item's Wikipedia paragraph: drawn uniformly with its private generator."""
        return pool.choice(ctx.rng)

    def restored(self, edited: tuple[str, ...], ctx: InterventionContext) -> tuple[str, ...]:
        """The edited prefix steps as the chain holds them: verbatim."""
        return edited

    # --- the chain (`recovery.interventions.apply`) ----------------------------------------------------

    def steps(self, trace: Trace, steps: tuple[Step, ...]) -> tuple[Step, ...]:
        """The steps this protocol cuts: the trace's reasoning split on blank lines, as given."""
        return steps

    def cut(self, steps: Sequence[Step], t: float, *, min_steps: int) -> Cut:
        """Where the chain is cut at target timestep ``t`` (`recovery.segment.cut_at`)."""
        return cut_at(steps, t, min_steps=min_steps)

    def finished(self, prefix_steps: tuple[str, ...], pieces: list[str], wait: str | None) -> tuple[str, str]:
        """The chain's (prefix, inserted text): the steps and each round's inserted text joined with the step
        separator, "Wait" (``wait``) as a last step of both with ``append_wait``."""
        if wait is not None:
            prefix_steps = prefix_steps + (wait,)
            pieces = [*pieces, wait]
        return join_steps(prefix_steps), STEP_SEPARATOR.join(pieces)

    def reasoning_chars(self, trace: Trace, steps: Sequence[Step]) -> int:
        """The length of the whole original reasoning."""
        return len(trace.reasoning)

    def recorded(self, position: int | None) -> dict[str, Any]:
        """What a chain records about its protocol in its options (hence its id): nothing by default."""
        return {}


DEFAULT_RULES = TextRules()


@dataclass(frozen=True)
class FollowsProtocol:
    """Base of the paper's seven: ``rules``, the protocol's `TextRules` (keyword-only, `DEFAULT_RULES` unless
    given, never recorded in chain ids: a chain records its protocol itself, `TextRules.recorded`), checked
    against the intervention's settings when built (a subclass's ``__post_init__`` calls this one last)."""

    rules: TextRules = field(default=DEFAULT_RULES, kw_only=True, metadata={NOT_RECORDED: True})

    def __post_init__(self) -> None:
        self.rules.check(self)


def rules_of(impl: Any) -> TextRules:
    """The rules ``impl`` was built with; `DEFAULT_RULES` for an intervention without any."""
    rules = getattr(impl, "rules", None)
    return rules if isinstance(rules, TextRules) else DEFAULT_RULES
