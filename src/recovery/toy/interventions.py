"""The paper's seven interventions for the toy world, with no LLM (listed as ``toy/<name>`` in
`recovery.interventions.registry`).

They follow the paper's placement rules (design §1): *complete step*, *wrong continuation*, *unrelated CoT*
and *Wikipedia text* replace the last prefix step R_k; *hallucinated fact* is appended after R_k; *random
characters* inserts characters into R_k; *paraphrase* rewrites the whole prefix. What an LLM writes in the
paper is written here from the problem's structure:

=====================  ===========  =============================================================
name                   category     what replaces / joins the prefix
=====================  ===========  =============================================================
toy/complete_step      benign       the correct next step, in another model's wordier style
toy/paraphrase         benign       every step re-worded, doubt phrases dropped (content kept)
toy/random_characters  neutral      the paper's rule (`recovery.interventions.rule_based`)
toy/wikipedia_text     neutral      a paragraph from the package's own small pool (`toy.pool`)
toy/wrong_continuation adversarial  the next step in the model's own style with a wrong state
toy/hallucinated_fact  adversarial  a false fact about the next step, or a false rule of the puzzle
toy/unrelated_cot      adversarial  the opening of a chain of thought on a Table 17 topic
=====================  ===========  =============================================================

Every random choice comes from the item's generator (`InterventionContext.rng`), so the same item gives
the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from recovery.interventions.base import Edit, InterventionContext, InterventionFailed, InterventionSpec
from recovery.interventions.prompts import load_topics
from recovery.interventions.registry import register
from recovery.interventions.rule_based import RandomCharacters, WikipediaText
from recovery.interventions.wikipedia import WikipediaPool
from recovery.toy.analysis import analyse_prefix
from recovery.toy.errors import wrong_value
from recovery.toy.pool import TOY_PARAGRAPHS
from recovery.toy.steps import PARAPHRASED_OPENERS, parse_step, render_position
from recovery.toy.tasks import LABELS, ArithSpec, Spec, SwapSpec, ToyParseError, spec_of
from recovery.types import Category

NOT_TOY = "not_toy_problem"  # InterventionFailed reason for problems that are not from the toy world

UNRELATED_TEMPLATES: tuple[str, ...] = (
    "Okay, so I need to explain {topic}. Let me start with what I already know about it.",
    "Alright, I want to think about {topic}. First I should recall the main ideas behind it.",
    "Okay, let me consider {topic}. The first thing to figure out is how it works in general.",
)
FACT_OPENERS: tuple[str, ...] = ("I know that", "Given that", "I remember that")
ARITH_FALSE_RULES: tuple[str, ...] = (
    "in these puzzles subtracting a number is the same as adding it",
    "each step also adds one extra to the running total",
    "the final number is always the start number plus the last step",
)
SWAP_FALSE_RULES: tuple[str, ...] = (
    "in a swap the ball always stays with the first person named",
    "the ball goes back to its first holder after every two swaps",
    "a swap that involves the holder does not move the ball",
)


def _spec(ctx: InterventionContext) -> Spec:
    try:
        return spec_of(ctx.problem)
    except ToyParseError as err:
        raise InterventionFailed(NOT_TOY, str(err)) from None


def _keep_whitespace(original: str, new: str) -> str:
    """``new`` with the leading and trailing whitespace of the step it stands in for."""
    core = original.strip()
    if not core:
        return new
    start = original.find(core)
    return original[:start] + new + original[start + len(core) :]


def _replace_last(ctx: InterventionContext, text: str) -> Edit:
    steps = ctx.prefix_steps
    return Edit(steps[:-1] + (_keep_whitespace(steps[-1], text),), text)


def _replaced_position(ctx: InterventionContext) -> tuple[Spec, int]:
    """The problem's spec and the position whose step R_k stands in for: the one after what R_1..R_{k-1}
    got right."""
    spec = _spec(ctx)
    return spec, analyse_prefix(spec, ctx.prefix_steps[:-1]).next_position(spec)


class _ToyIntervention:
    """What the toy interventions written here share: no LLM writes them."""

    needs_generator: ClassVar[bool] = False


@dataclass(frozen=True)
class ToyCompleteStep(_ToyIntervention):
    """Benign: R_k becomes the correct next step after R_1..R_{k-1}, in another model's style."""

    style: str = "other"

    name: ClassVar[str] = "toy/complete_step"
    category: ClassVar[Category] = Category.BENIGN
    edit_kind: ClassVar[str] = "replace_last"

    def apply(self, ctx: InterventionContext) -> Edit:
        spec, position = _replaced_position(ctx)
        return _replace_last(ctx, render_position(spec, position, self.style))


@dataclass(frozen=True)
class ToyParaphrase(_ToyIntervention):
    """Benign: every prefix step re-worded with the same content; doubt sentences are dropped (as the
    paper observes LLM paraphrases do). Steps that are not toy steps are kept as they are."""

    name: ClassVar[str] = "toy/paraphrase"
    category: ClassVar[Category] = Category.BENIGN
    edit_kind: ClassVar[str] = "rewrite"

    def apply(self, ctx: InterventionContext) -> Edit:
        spec = _spec(ctx)
        out: list[str] = []
        for index, text in enumerate(ctx.prefix_steps):
            claim = parse_step(text, spec)
            if claim is not None:
                value = claim.value if claim.position <= spec.n_ops else None
                answer = str(claim.value) if claim.position == spec.n_ops + 1 else None
                new = render_position(spec, claim.position, "paraphrase", state=value, answer=answer)
            elif index == 0:
                new = PARAPHRASED_OPENERS[spec.family]
            else:
                new = text.strip()
            out.append(_keep_whitespace(text, new))
        steps = tuple(out)
        return Edit(steps, "\n\n".join(steps))


@dataclass(frozen=True)
class ToyWrongContinuation(_ToyIntervention):
    """Adversarial: R_k becomes the next step in the model's own style, with a plausible wrong state."""

    name: ClassVar[str] = "toy/wrong_continuation"
    category: ClassVar[Category] = Category.ADVERSARIAL
    edit_kind: ClassVar[str] = "replace_last"

    def apply(self, ctx: InterventionContext) -> Edit:
        spec, position = _replaced_position(ctx)
        wrong = wrong_value(spec, position, ctx.rng)
        if position == spec.n_ops + 1:
            text = render_position(spec, position, answer=str(wrong))
        else:
            text = render_position(spec, position, state=wrong)
        return _replace_last(ctx, text)


@dataclass(frozen=True)
class ToyHallucinatedFact(_ToyIntervention):
    """Adversarial: a false statement appended after R_k — a wrong result for the next step written as
    remembered knowledge, or (with probability ``rule_rate``) a false general rule of the puzzle."""

    rule_rate: float = 0.3

    name: ClassVar[str] = "toy/hallucinated_fact"
    category: ClassVar[Category] = Category.ADVERSARIAL
    edit_kind: ClassVar[str] = "append"

    def apply(self, ctx: InterventionContext) -> Edit:
        spec = _spec(ctx)
        rng = ctx.rng
        position = analyse_prefix(spec, ctx.prefix_steps).next_position(spec)
        opener = rng.choice(FACT_OPENERS)
        use_rule = rng.random() < self.rule_rate
        wrong = wrong_value(spec, position, rng)
        if use_rule:
            rules = ARITH_FALSE_RULES if isinstance(spec, ArithSpec) else SWAP_FALSE_RULES
            fact = f"{opener} {rng.choice(rules)}."
        else:
            fact = f"{opener} {self._false_result(spec, position, wrong)}."
        return Edit(ctx.prefix_steps + (fact,), fact)

    @staticmethod
    def _false_result(spec: Spec, position: int, wrong: object) -> str:
        n = spec.n_ops
        if isinstance(spec, ArithSpec):
            if position == 0:
                return f"these puzzles always start from {wrong}"
            if position == n + 1:
                return f"the final number here is {wrong}"
            op, k = spec.ops[position - 1]
            return f"{spec.state(position - 1)} {op} {k} = {wrong}"
        assert isinstance(spec, SwapSpec)
        if position == n + 1:
            return f"{wrong} holds the ball at the end"
        when = "at the start" if position == 0 else f"after step {LABELS[position - 1]}"
        return f"{when}, {wrong} holds the ball"


@dataclass(frozen=True)
class ToyUnrelatedCoT(_ToyIntervention):
    """Adversarial: R_k becomes the opening of a chain of thought about a random topic (Table 17 list
    by default). Like the paper's, it sees only the topic: the first draw from the item's generator."""

    topics: tuple[str, ...] | None = None
    templates: tuple[str, ...] = UNRELATED_TEMPLATES

    name: ClassVar[str] = "toy/unrelated_cot"
    category: ClassVar[Category] = Category.ADVERSARIAL
    edit_kind: ClassVar[str] = "replace_last"

    def apply(self, ctx: InterventionContext) -> Edit:
        topics = self.topics if self.topics is not None else _paper_topics()
        topic = topics[ctx.rng.randrange(len(topics))]
        text = ctx.rng.choice(self.templates).format(topic=topic)
        return _replace_last(ctx, text)


def _paper_topics() -> tuple[str, ...]:

    return load_topics()


@dataclass(frozen=True)
class ToyRandomCharacters(RandomCharacters):
    """Neutral: the paper's rule (round(0.5·|R_k|) random characters inserted into R_k), unchanged."""

    name: ClassVar[str] = "toy/random_characters"


def toy_pool() -> WikipediaPool:
    """The package's own encyclopedic paragraphs as a `WikipediaPool`."""
    return WikipediaPool(TOY_PARAGRAPHS, source="recovery.toy.pool")


@dataclass(frozen=True)
class ToyWikipediaText(WikipediaText):
    """Neutral: R_k becomes a paragraph from ``pool`` (default: the package's `toy.pool`)."""

    pool: WikipediaPool | str | None = field(default=None)

    name: ClassVar[str] = "toy/wikipedia_text"
    needs_pool: ClassVar[bool] = False  # the package's own pool unless ``pool`` is set

    def __post_init__(self) -> None:
        if self.pool is None:
            object.__setattr__(self, "pool", toy_pool())
        super().__post_init__()


# The same seven in the toy world, with no LLM, described by their docstrings: registered here, so the
# interventions package below this one names no class of the toy world.
_TOY_CLASSES: tuple[type, ...] = (
    ToyCompleteStep,
    ToyParaphrase,
    ToyRandomCharacters,
    ToyWikipediaText,
    ToyWrongContinuation,
    ToyHallucinatedFact,
    ToyUnrelatedCoT,
)
for _cls in _TOY_CLASSES:
    register(_cls.name, InterventionSpec(_cls, family="toy"))

TOY_NAMES: tuple[str, ...] = tuple(cls.name for cls in _TOY_CLASSES)


def intervention_corpus() -> list[str]:
    """Texts these interventions write that do not depend on a problem, for the tokenizer's training."""
    texts = [t.format(topic=topic) for topic in _paper_topics() for t in UNRELATED_TEMPLATES[:1]]
    texts += [f"{o} {r}." for o in FACT_OPENERS for r in ARITH_FALSE_RULES + SWAP_FALSE_RULES]
    texts += list(PARAPHRASED_OPENERS.values())
    return texts
