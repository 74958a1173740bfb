"""The paper's intervention prompts, decoding settings and topics, loaded from `recovery/prompts/`.

The data files are protocol data transcribed from the paper (App. D.1 templates, Table 15 decoding,
Table 17 topics); this module only reads them and fills placeholders.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from types import MappingProxyType

import yaml

from recovery.generation import Decoding, Message

TEMPLATES_FILE = "intervention_templates.yaml"
DECODING_FILE = "decoding.yaml"
TOPICS_FILE = "unrelated_topics.txt"

# App. D placeholders: <Q> question, <R> reasoning so far, <TOPIC> a Table 17 topic.
_PLACEHOLDER = re.compile(r"<(Q|R|TOPIC)>")


def _read(name: str) -> str:
    return resources.files("recovery").joinpath("prompts", name).read_text(encoding="utf-8")


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    """One App. D.1 template: a SYSTEM and a USER message with ``<Q>``/``<R>``/``<TOPIC>`` placeholders."""

    name: str
    paper_name: str
    system: str
    user: str

    def render(self, **values: str) -> tuple[Message, Message]:
        """Fill the placeholders (keys ``Q``, ``R``, ``TOPIC``) and return the (system, user) messages.

        Substitution is a single pass, so a question that itself contains ``<R>`` is left as written.

        >>> t = PromptTemplate("x", "X", "sys", "Problem:\\n<Q>\\nReasoning so far:\\n<R>")
        >>> t.render(Q="1+<R>?", R="a")[1].content
        'Problem:\\n1+<R>?\\nReasoning so far:\\na'
        """
        return Message("system", _fill(self.system, values)), Message("user", _fill(self.user, values))


def _fill(template: str, values: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise KeyError(f"placeholder <{key}> has no value (got {sorted(values)})")
        return values[key]

    return _PLACEHOLDER.sub(replace, template)


@cache
def load_templates() -> Mapping[str, PromptTemplate]:
    """The five App. D.1 templates, keyed by intervention name (``complete_step``, ``paraphrase``, …)."""
    raw = yaml.safe_load(_read(TEMPLATES_FILE))
    return MappingProxyType(
        {name: PromptTemplate(name, entry["paper_name"], entry["system"], entry["user"]) for name, entry in raw.items()}
    )


def template_for(name: str) -> PromptTemplate:
    """The App. D.1 template of one intervention, with the known names in the error."""
    templates = load_templates()
    if name not in templates:
        raise KeyError(f"no prompt template for {name!r}; known: {', '.join(sorted(templates))}")
    return templates[name]


@cache
def load_decoding_table() -> Mapping[str, Mapping[str, object]]:
    """Table 15 as written: one row per scenario, N/A as ``None``."""
    raw = yaml.safe_load(_read(DECODING_FILE))
    return MappingProxyType({key: MappingProxyType(dict(row)) for key, row in raw.items()})


def decoding_for(scenario: str, *, max_new_tokens: int | None = None) -> Decoding:
    """The Table 15 decoding for a scenario key (an intervention name, ``doubt_classification`` or
    ``continuation``). N/A top-p means no nucleus cut (1.0); N/A seed means none. ``max_new_tokens`` is not
    in the paper: ``None`` keeps the `Decoding` default.
    """
    table = load_decoding_table()
    if scenario not in table:
        raise KeyError(f"no Table 15 row for {scenario!r}; known: {', '.join(sorted(table))}")
    row = table[scenario]
    if row["temperature"] is None:
        raise ValueError(f"{scenario!r} uses no LLM (Table 15: N/A), so it has no decoding settings")
    extra = {} if max_new_tokens is None else {"max_new_tokens": max_new_tokens}
    return Decoding(
        temperature=float(row["temperature"]),
        top_p=1.0 if row["top_p"] is None else float(row["top_p"]),
        top_k=None if row["top_k"] is None else int(row["top_k"]),
        seed=None if row["seed"] is None else int(row["seed"]),
        **extra,
    )


@cache
def load_topics() -> tuple[str, ...]:
    """The 100 Table 17 topics for *Unrelated CoT*, in table order (row-major)."""
    lines = (line.strip() for line in _read(TOPICS_FILE).splitlines())
    return tuple(line for line in lines if line and not line.startswith("#"))
