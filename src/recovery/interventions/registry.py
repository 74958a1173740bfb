"""Every intervention a run can name, by name: the paper's seven here, and any registered with `register`.

A new intervention is its class plus one `register` call beside it (or one line here for one of this
package). The toy world's seven live in `recovery.toy.interventions`, a layer above this package, and register
themselves when that module is imported; the pipeline, the mini-benchmark and the CLI import it, so their
names are always known there.
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
}

PAPER_INTERVENTIONS: tuple[str, ...] = tuple(name for name, spec in INTERVENTIONS.items() if spec.family == "paper")


def register(name: str, spec: InterventionSpec) -> InterventionSpec:
    """Make ``spec``'s intervention nameable as ``name`` (its class's ``name``); returns it. Registering the
    same class twice under one name is harmless (a module imported again); another class is an error."""
    if name != spec.cls.name:
        raise ValueError(f"{spec.cls.__name__} is called {spec.cls.name!r}, not {name!r}")
    known = INTERVENTIONS.get(name)
    if known is not None and known.cls is not spec.cls:
        raise ValueError(f"intervention {name!r} is already registered ({known.cls.__qualname__})")
    INTERVENTIONS[name] = spec
    return spec


def get_spec(name: str) -> InterventionSpec:
    """The entry called ``name``, with the known names in the error."""
    try:
        return INTERVENTIONS[name]
    except KeyError:
        raise KeyError(f"unknown intervention {name!r}; known: {', '.join(sorted(INTERVENTIONS))}") from None


def create(name: str, **options: Any) -> Intervention:
    """The intervention called ``name``, built with ``options`` (e.g. ``pool=`` for ``wikipedia_text``)."""
    return get_spec(name).create(**options)
