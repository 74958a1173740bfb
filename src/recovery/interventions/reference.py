"""The authors' rules for the paper's seven interventions (``protocol: reference``, part "interventions"):
`REFERENCE_RULES`, the `recovery.interventions.rules.TextRules` an intervention is built with under that
protocol (``create(name, protocol="reference")``).

Each rule follows rllm_robustness/interventions.py of github.com/ExplainableML/RLLM-CoT-Robustness at
`recovery.protocol.reference().commit`; the prompts and topics are their constants
(``prompts/reference_interventions.yaml``). Where they differ from the default protocol:

- the prefix is restored the authors' way (`recovery.interventions.reference_text.restored_steps`);
- prompts: the question is the problem, a blank line and the authors' instruction; ``<R>`` is the shown
  steps joined with one newline (complete step, wrong continuation, hallucinated fact) or a blank line
  (paraphrase); blank lines between the template's sections; their system prompts; their decoding, and no
  option of the default protocol's (``max_new_tokens``, ``multi_paragraph``, …) applies;
- the LLM's reply is stripped and inserted whole (blank lines included), never skipped; a paraphrase is
  re-split on blank lines (nothing left: one empty step);
- random characters, Wikipedia paragraphs and Unrelated-CoT topics are drawn from the item's *batch
  position* (`InterventionContext.position`, see `reference_text.batch_positions`), not a per-item seed;
  the pool is a `ReferencePool`;
- ``Edit.inserted_text`` is the authors' ``intervention_text``: the new step, the whole mutated step for
  random characters, the raw pool paragraph for Wikipedia text, the whole rewrite for paraphrase;
- the chain: the reasoning and cut as they extract it, their "Wait" marker, no consecutive interventions,
  and ``protocol: reference`` and ``position`` recorded in its options, so its id differs from the default
  protocol's.
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any, ClassVar

import yaml

from recovery.generation import Decoding
from recovery.interventions.base import InterventionContext
from recovery.interventions.characters import insert_characters
from recovery.interventions.prompts import PromptTemplate, decoding_for
from recovery.interventions.reference_text import (
    ReferencePool,
    append_marker,
    authors_pool,
    reasoning_of,
    reference_cut,
    restored_steps,
    stripped_steps,
)
from recovery.interventions.rules import NOT_RECORDED, TextRules
from recovery.protocol import reference
from recovery.segment import join_steps, split_steps
from recovery.types import Cut, Step, Trace

STYLE = "reference"
DATA_FILE = "reference_interventions.yaml"


@cache
def _data() -> Mapping[str, Any]:
    text = resources.files("recovery").joinpath("prompts", DATA_FILE).read_text(encoding="utf-8")
    return MappingProxyType(yaml.safe_load(text))


def template(name: str) -> PromptTemplate:
    """The authors' (system, user) template of one LLM-backed intervention."""
    entry = _data()["templates"][name]
    return PromptTemplate(name, entry["authors_name"], entry["system"], entry["user"])


def authors_topics() -> tuple[str, ...]:
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


class ReferenceRules(TextRules):
    """The authors' text handling (module docstring); each method overrides the default protocol's."""

    name: ClassVar[str] = STYLE
    consecutive: ClassVar[bool] = False
    reads_datasets_pool: ClassVar[bool] = True

    @property
    def batch_size(self) -> int:  # type: ignore[override]
        """The authors' batch of traces (``reference_protocol.yaml``), by whose positions items draw."""
        return int(reference()["batch_size"])

    def check(self, impl: Any) -> None:
        """Refuse every setting but a pool: the authors' settings are fixed."""
        changed = [
            f.name
            for f in dataclasses.fields(impl)
            if f.name != "pool" and not f.metadata.get(NOT_RECORDED) and getattr(impl, f.name) != f.default
        ]
        if changed:
            raise ValueError(
                f"interventions.options.{impl.name}: {sorted(changed)} do not apply under protocol: reference (the "
                "authors' settings are fixed); set protocol_parts: {interventions: default} to use them"
            )

    def pool(self, pool: Any) -> ReferencePool:
        """The authors' pool: one already read, or a path or ``datasets:`` source read their way (`authors_pool`)."""
        if pool is None:
            return super().pool(pool)  # the error that says how to give one
        if isinstance(pool, (str, os.PathLike)):
            return authors_pool(pool)
        if not isinstance(pool, ReferencePool):
            raise TypeError(f"wikipedia_text (protocol: reference) needs a ReferencePool, got {type(pool)}")
        return pool

    def template(self, name: str) -> PromptTemplate:
        return template(name)

    def question(self, ctx: InterventionContext) -> str:
        return question_of(ctx)

    def shown(self, name: str, steps: Sequence[str]) -> str:
        """One newline between shown steps; a blank line for paraphrase (build_rewrite_prompts)."""
        return ("\n\n" if name == "paraphrase" else "\n").join(steps)

    def decoding(self, impl: Any) -> Decoding:
        return decoding(impl.name)

    def topic(self, topics: Sequence[str] | None, ctx: InterventionContext) -> str:
        """Draw number *position* of ``random.Random(topic_seed).choices(topics)`` (build_unrelated_prompts
        draws one per item of the batch; each draw is one ``random()``, so draw *p* does not depend on the
        batch's size)."""
        position = _position(ctx, "unrelated_cot")
        return random.Random(int(reference()["topic_seed"])).choices(authors_topics(), k=position + 1)[position]

    def new_step(self, reply: str, *, seen: str, multi_paragraph: str) -> tuple[str, tuple[str, ...]]:
        """The reply stripped (the authors' runner strips it, and the batch function again), whole."""
        return str(reply).strip(), ()

    def rewritten(self, reply: str, ctx: InterventionContext) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The reply's blank-line pieces, stripped (``skip_metadata=True``)."""
        return stripped_steps(str(reply).strip()), ()

    def mutated(self, impl: Any, ctx: InterventionContext) -> tuple[str, str]:
        """Characters inserted with ``random.Random(random_seed + position)``; the inserted text is the whole
        mutated step (apply_neutral_intervention_batch). An empty R_k stays as it is (no skip)."""
        rng = random.Random(int(reference()["random_seed"]) + _position(ctx, impl.name))
        mutated = insert_characters(ctx.prefix_steps[-1], rng)
        return mutated, mutated

    def paragraph(self, pool: Any, ctx: InterventionContext) -> str:
        """``pool[position % len(pool)]``, the paragraph as the pool holds it."""
        return pool.at(_position(ctx, "wikipedia_text"))

    def restored(self, edited: tuple[str, ...], ctx: InterventionContext) -> tuple[str, ...]:
        return restored_steps(edited, [step.text for step in ctx.steps])

    def steps(self, trace: Trace, steps: tuple[Step, ...]) -> tuple[Step, ...]:
        """The reasoning as the authors extract it (the same text but for stray tags)."""
        reasoning = reasoning_of(trace.text)
        return steps if reasoning == trace.reasoning else split_steps(reasoning)

    def cut(self, steps: Sequence[Step], t: float, *, min_steps: int) -> Cut:
        return reference_cut(steps, t, min_steps=min_steps)

    def finished(self, prefix_steps: tuple[str, ...], pieces: list[str], wait: str | None) -> tuple[str, str]:
        """The steps joined, the last round's inserted text, the authors' marker (`append_marker`)."""
        prefix, inserted = join_steps(prefix_steps), pieces[-1]
        if wait is not None:
            prefix, inserted = append_marker(prefix, inserted, wait)
        return prefix, inserted

    def reasoning_chars(self, trace: Trace, steps: Sequence[Step]) -> int:
        """The length of the reasoning as the authors extract it (to the end of its last step)."""
        return steps[-1].end

    def recorded(self, position: int | None) -> dict[str, Any]:
        return {"protocol": STYLE, "position": position}


REFERENCE_RULES = ReferenceRules()
