"""Interventions on a reasoning chain (paper §3.1, Table 2) and the machinery to apply them.

`INTERVENTIONS` (in `recovery.interventions.registry`) names every built-in one; the paper's seven:

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

One class each, under either protocol: built with ``protocol="reference"`` (``create(name,
protocol=...)``, ``ChainSettings.from_names(..., style=...)``) one follows the authors' text rules
(`recovery.interventions.reference.REFERENCE_RULES`) instead of the default protocol's (`TextRules`,
`recovery.interventions.rules`).

Use `intervene` for one item and `intervene_traces` for the loop over trace × intervention × timestep
(its settings in a `ChainSettings`; items that cannot be intervened on come out as `Skip`).
"""

from __future__ import annotations

from recovery.interventions.apply import (
    ORIGINAL_NEXT_STEP,
    TOO_FEW_STEPS,
    WAIT_TEXT,
    ChainSettings,
    Produced,
    Skip,
    TraceJob,
    describe_intervention,
    intervene,
    intervene_traces,
)
from recovery.interventions.base import (
    EDIT_KINDS,
    Edit,
    Intervention,
    InterventionContext,
    InterventionFailed,
    InterventionSpec,
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
from recovery.interventions.reference import REFERENCE_RULES
from recovery.interventions.reference_text import ReferencePool
from recovery.interventions.registry import INTERVENTIONS, PAPER_INTERVENTIONS, create, get_spec, rules_for
from recovery.interventions.rule_based import RandomCharacters, WikipediaText, insert_random_characters
from recovery.interventions.rules import DEFAULT_RULES, TextRules
from recovery.interventions.wikipedia import WikipediaPool

__all__ = [
    "DEFAULT_RULES",
    "EDIT_KINDS",
    "INTERVENTIONS",
    "NOTES",
    "ORIGINAL_NEXT_STEP",
    "PAPER_INTERVENTIONS",
    "TOO_FEW_STEPS",
    "WAIT_TEXT",
    "ChainSettings",
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
    "Produced",
    "PromptTemplate",
    "REFERENCE_RULES",
    "RandomCharacters",
    "ReferencePool",
    "Skip",
    "TextRules",
    "TraceJob",
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
    "intervene_traces",
    "load_decoding_table",
    "load_templates",
    "load_topics",
    "rules_for",
    "strip_wrappers",
    "template_for",
]
