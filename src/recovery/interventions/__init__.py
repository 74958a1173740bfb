"""Interventions on a reasoning chain (paper §3.1, Table 2) and the machinery to apply them.

Importing this package registers the paper's seven interventions in `REGISTRY`:

=====================  ===========  ======================================================  ===========
name                   category     what changes                                            LLM-backed
=====================  ===========  ======================================================  ===========
``complete_step``      benign       R_k replaced by the next step from another model        yes
``paraphrase``         benign       R_1..R_k rewritten, re-split on blank lines              yes
``random_characters``  neutral      round(0.5·|R_k|) random characters inserted into R_k    no
``wikipedia_text``     neutral      R_k replaced by a Wikipedia paragraph (``pool=``)        no
``wrong_continuation`` adversarial  R_k replaced by a plausible but wrong next step         yes
``hallucinated_fact``  adversarial  a false mathematical statement appended after R_k       yes
``unrelated_cot``      adversarial  R_k replaced by a CoT opening on a Table 17 topic       yes
=====================  ===========  ======================================================  ===========

Use `intervene` for one item and `intervene_all` for a run (skips counted in a `SkipCounter`).
"""

from __future__ import annotations

from recovery.interventions.apply import (
    ORIGINAL_NEXT_STEP,
    TOO_FEW_STEPS,
    WAIT_TEXT,
    Skip,
    SkipCounter,
    describe_intervention,
    intervene,
    intervene_all,
    intervene_described,
    resolve,
)
from recovery.interventions.base import (
    EDIT_KINDS,
    REGISTRY,
    Edit,
    Intervention,
    InterventionContext,
    InterventionFailed,
    InterventionSpec,
    create,
    get_spec,
    register,
)
from recovery.interventions.cleaning import (
    NOTES,
    Cleaned,
    FailureReason,
    clean_rewrite_reply,
    clean_step_reply,
    strip_wrappers,
)
from recovery.interventions.llm_backed import (
    CompleteStep,
    HallucinatedFact,
    Paraphrase,
    UnrelatedCoT,
    WrongContinuation,
)
from recovery.interventions.prompts import (
    PromptTemplate,
    decoding_for,
    load_decoding_table,
    load_templates,
    load_topics,
    template_for,
)
from recovery.interventions.rule_based import RandomCharacters, WikipediaText, insert_random_characters
from recovery.interventions.wikipedia import WikipediaPool

# The paper's seven, in Table 2 order, with their Table 2 descriptions.
_PAPER = (
    (CompleteStep, "Continuation with other model: complete one reasoning step."),
    (Paraphrase, "Paraphrasing reasoning: rephrase the chain of thought."),
    (RandomCharacters, "Random character insertion at arbitrary positions in step R_k."),
    (WikipediaText, "Wikipedia text insertion: add unrelated factual content."),
    (WrongContinuation, "Incorrect reasoning continuation: add a wrong reasoning step."),
    (HallucinatedFact, "Hallucinated fact: insert a false mathematical fact."),
    (UnrelatedCoT, "Unrelated CoT: insert the start of unrelated chain of thought."),
)
PAPER_INTERVENTIONS: tuple[str, ...] = tuple(cls.name for cls, _ in _PAPER)

for _cls, _description in _PAPER:
    if _cls.name not in REGISTRY:  # idempotent if the package is reloaded
        register(
            InterventionSpec(
                name=_cls.name,
                category=_cls.category,
                factory=_cls,
                description=_description,
                needs_generator=_cls.needs_generator,
                family="paper",
            )
        )

__all__ = [
    "EDIT_KINDS",
    "NOTES",
    "ORIGINAL_NEXT_STEP",
    "PAPER_INTERVENTIONS",
    "REGISTRY",
    "TOO_FEW_STEPS",
    "WAIT_TEXT",
    "Cleaned",
    "CompleteStep",
    "Edit",
    "FailureReason",
    "HallucinatedFact",
    "Intervention",
    "InterventionContext",
    "InterventionFailed",
    "InterventionSpec",
    "Paraphrase",
    "PromptTemplate",
    "RandomCharacters",
    "Skip",
    "SkipCounter",
    "UnrelatedCoT",
    "WikipediaPool",
    "WikipediaText",
    "WrongContinuation",
    "clean_rewrite_reply",
    "clean_step_reply",
    "create",
    "decoding_for",
    "describe_intervention",
    "get_spec",
    "insert_random_characters",
    "intervene",
    "intervene_all",
    "intervene_described",
    "load_decoding_table",
    "load_templates",
    "load_topics",
    "register",
    "resolve",
    "strip_wrappers",
    "template_for",
]
