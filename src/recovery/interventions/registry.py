"""Every intervention a run can name, by name: the paper's seven here, and any registered with `register`.

One class per intervention: the paper's seven follow the run's protocol (``create(name, protocol=...)``
builds them with that protocol's `TextRules`: its style's, `recovery.protocol.STYLES`); every other keeps its
own behaviour under any protocol.

`INTERVENTIONS` is a `recovery.registry.Registry` of `InterventionSpec`. A new intervention is its class plus
one `register` call (or ``INTERVENTIONS[name] = InterventionSpec(...)``) beside it, in this package, a user's
module or a plug-in (`recovery.registry`). The toy world's seven live in `recovery.toy.interventions`, a layer
above this package, which the package declares as its own plug-in (pyproject.toml): the first read of the
registry loads it, so their names are known wherever a name is looked up, with no import for its side effect.
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
from recovery.interventions.rules import DEFAULT_RULES, TextRules
from recovery.protocol import STYLES
from recovery.registry import Registry

# The paper's seven, in Table 2 order, with their Table 2 descriptions; each follows the run's protocol.
_TABLE_2: tuple[tuple[type, str], ...] = (
    (CompleteStep, "Continuation with other model: complete one reasoning step."),
    (Paraphrase, "Paraphrasing reasoning: rephrase the chain of thought."),
    (RandomCharacters, "Random character insertion at arbitrary positions in step R_k."),
    (WikipediaText, "Wikipedia text insertion: add unrelated factual content."),
    (WrongContinuation, "Incorrect reasoning continuation: add a wrong reasoning step."),
    (HallucinatedFact, "Hallucinated fact: insert a false mathematical fact."),
    (UnrelatedCoT, "Unrelated CoT: insert the start of unrelated chain of thought."),
)
_PAPER = {cls.name: InterventionSpec(cls, doc, "paper", follows_protocol=True) for cls, doc in _TABLE_2}

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


def rules_for(protocol: str | TextRules) -> TextRules:
    """The interventions' `TextRules` of ``protocol``: the rules themselves, or the name of a registered style
    (`recovery.protocol.STYLES`), whose rules they are; `ValueError` naming the known styles for another."""
    if isinstance(protocol, TextRules):
        return protocol
    return STYLES.lookup(protocol).interventions()


def create(name: str, *, protocol: str | TextRules = DEFAULT_RULES, **options: Any) -> Intervention:
    """The intervention called ``name``, built with ``options`` (e.g. ``pool=`` for ``wikipedia_text``)
    under ``protocol`` (``"reference"``: the authors' rules for the paper's seven; the others keep theirs)."""
    return get_spec(name).create(rules=rules_for(protocol), **options)
