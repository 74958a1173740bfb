"""Every intervention a run can name, by name: the paper's seven and the toy world's seven.

A new intervention is its class (in its own module, or beside its kind) plus one line here. The toy
world's classes live in `recovery.toy.interventions`, a layer above this package, so their entries name
them by dotted path: nothing here imports the toy world until one of them is used, and no import is
needed to find them.
"""

from __future__ import annotations

from typing import Any

from recovery.interventions.base import Intervention, InterventionSpec
from recovery.interventions.llm_backed import (
    CompleteStep,
    HallucinatedFact,
    Paraphrase,
    UnrelatedCoT,
    WrongContinuation,
)
from recovery.interventions.rule_based import RandomCharacters, WikipediaText

_TOY = "recovery.toy.interventions:"

INTERVENTIONS: dict[str, InterventionSpec] = {
    # The paper's seven, in Table 2 order, with their Table 2 descriptions.
    "complete_step": InterventionSpec(CompleteStep, "Continuation with other model: complete one reasoning step."),
    "paraphrase": InterventionSpec(Paraphrase, "Paraphrasing reasoning: rephrase the chain of thought."),
    "random_characters": InterventionSpec(
        RandomCharacters, "Random character insertion at arbitrary positions in step R_k."
    ),
    "wikipedia_text": InterventionSpec(WikipediaText, "Wikipedia text insertion: add unrelated factual content."),
    "wrong_continuation": InterventionSpec(
        WrongContinuation, "Incorrect reasoning continuation: add a wrong reasoning step."
    ),
    "hallucinated_fact": InterventionSpec(HallucinatedFact, "Hallucinated fact: insert a false mathematical fact."),
    "unrelated_cot": InterventionSpec(UnrelatedCoT, "Unrelated CoT: insert the start of unrelated chain of thought."),
    # The same seven in the toy world, with no LLM, described by their docstrings.
    "toy/complete_step": InterventionSpec(_TOY + "ToyCompleteStep", family="toy"),
    "toy/paraphrase": InterventionSpec(_TOY + "ToyParaphrase", family="toy"),
    "toy/random_characters": InterventionSpec(_TOY + "ToyRandomCharacters", family="toy"),
    "toy/wikipedia_text": InterventionSpec(_TOY + "ToyWikipediaText", family="toy"),
    "toy/wrong_continuation": InterventionSpec(_TOY + "ToyWrongContinuation", family="toy"),
    "toy/hallucinated_fact": InterventionSpec(_TOY + "ToyHallucinatedFact", family="toy"),
    "toy/unrelated_cot": InterventionSpec(_TOY + "ToyUnrelatedCoT", family="toy"),
}

PAPER_INTERVENTIONS: tuple[str, ...] = tuple(name for name, spec in INTERVENTIONS.items() if spec.family == "paper")


def get_spec(name: str) -> InterventionSpec:
    """The entry called ``name``, with the known names in the error."""
    try:
        return INTERVENTIONS[name]
    except KeyError:
        raise KeyError(f"unknown intervention {name!r}; known: {', '.join(sorted(INTERVENTIONS))}") from None


def create(name: str, **options: Any) -> Intervention:
    """The intervention called ``name``, built with ``options`` (e.g. ``pool=`` for ``wikipedia_text``)."""
    return get_spec(name).create(**options)
