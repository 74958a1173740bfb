"""Every intervention a run can name, by name: the paper's seven here, and any registered with `register`.

`INTERVENTIONS` is a `recovery.registry.Registry` of `InterventionSpec`. A new intervention is its class plus
one `register` call (or ``INTERVENTIONS[name] = InterventionSpec(...)``) beside it, in this package, a user's
module or a plug-in (`recovery.registry`). The toy world's seven live in `recovery.toy.interventions`, a layer
above this package, and register themselves when that module is imported; the pipeline, the mini-benchmark
and the CLI import it, so their names are always known there.
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
from recovery.registry import Registry

# The paper's seven, in Table 2 order, with their Table 2 descriptions.
_PAPER: dict[str, InterventionSpec] = {
    "complete_step": InterventionSpec(
        CompleteStep, "Continuation with other model: complete one reasoning step.", "paper"
    ),
    "paraphrase": InterventionSpec(Paraphrase, "Paraphrasing reasoning: rephrase the chain of thought.", "paper"),
    "random_characters": InterventionSpec(
        RandomCharacters, "Random character insertion at arbitrary positions in step R_k.", "paper"
    ),
    "wikipedia_text": InterventionSpec(
        WikipediaText, "Wikipedia text insertion: add unrelated factual content.", "paper"
    ),
    "wrong_continuation": InterventionSpec(
        WrongContinuation, "Incorrect reasoning continuation: add a wrong reasoning step.", "paper"
    ),
    "hallucinated_fact": InterventionSpec(
        HallucinatedFact, "Hallucinated fact: insert a false mathematical fact.", "paper"
    ),
    "unrelated_cot": InterventionSpec(
        UnrelatedCoT, "Unrelated CoT: insert the start of unrelated chain of thought.", "paper"
    ),
}

INTERVENTIONS: Registry[InterventionSpec] = Registry("intervention", _PAPER, error=KeyError)

PAPER_INTERVENTIONS: tuple[str, ...] = tuple(_PAPER)


def register(name: str, spec: InterventionSpec) -> InterventionSpec:
    """Make ``spec``'s intervention nameable as ``name`` (its class's ``name``); returns it. Registering the
    same class twice under one name is harmless (a module imported again); another class is an error."""
    if name != spec.cls.name:
        raise ValueError(f"{spec.cls.__name__} is called {spec.cls.name!r}, not {name!r}")
    return INTERVENTIONS.register(name, spec)


def get_spec(name: str) -> InterventionSpec:
    """The entry called ``name``, with the known names in the error."""
    return INTERVENTIONS.lookup(name)


def create(name: str, **options: Any) -> Intervention:
    """The intervention called ``name``, built with ``options`` (e.g. ``pool=`` for ``wikipedia_text``)."""
    return get_spec(name).create(**options)
