"""Which protocol a run follows: the project's own (``default``) or the authors' (``reference``).

The paper's authors published their pipeline (`REFERENCE_REPO` at `REFERENCE_COMMIT`). The project's defaults
differ from it on purpose in places (proper chat conventions, cleaned interventions, per-item seeds), and a
user who wants the paper's published numbers sets one key, ``protocol: reference``, to follow the authors'
code wherever the two differ. The differences fall into *parts*; a run may mix them with
``protocol_parts`` (e.g. the authors' prompts with the project's interventions). A run's config is resolved
once into its plan (`recovery.plan`), which picks what each part runs; no other code asks for a style. The authors' fixed values live in
``prompts/reference_protocol.yaml`` (each cited to the file that sets it) and are read by `reference`.

A style is an object registered in `STYLES` under its name: the project's (``default``) and the authors'
(``reference``) are modules of `recovery.plan.styles`, which the package declares as its own plug-ins
(pyproject.toml), so the first read of the registry loads them; a lab's own style is one module and one
`STYLES.register` call (`recovery.plan.styles.Style`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any

import yaml

from recovery.registry import Registry

#: Every protocol style by name (`recovery.plan.styles.Style`; filled by the styles' modules as plug-ins).
STYLES: Registry[Any] = Registry("protocol style", error=ValueError)

#: The style a run follows when it names none (`recovery.run_config.RunConfig.protocol`).
DEFAULT_STYLE = "default"

# What `protocol: reference` changes, part by part (docs/reproducing.md lists each difference):
PARTS: Mapping[str, str] = MappingProxyType(
    {
        "prompts": "continuation and trace prompts: the authors' system prompt, no think opener, the intervened "
        "reasoning appended as they restore it, outputs stripped",
        "interventions": "intervention texts: the authors' templates, <R> joins, whole stripped replies, no "
        "skipped replies, their random characters, Wikipedia pool and topic draws; a response read as they read "
        "it (either family's think tags)",
        "selection": "problem and trace selection: reference-solved filter, intersection on correctness, then "
        "per model closed, longest (whole response) and answer cap, then the draw",
        "length": "length overhead over the whole response, less the intervention's text",
        "grading": "the answer judge sees the question with its instruction and the whole response",
        "doubt": "doubt windows: spaCy sentences of the continuation, 1,000-character units, newlines "
        "flattened, an unparsable reply counted as No",
        "budget": "one 32,768-token window for prompt and output",
    }
)


def check_protocol(protocol: str, parts: Mapping[str, str] | None = None) -> None:
    """Raise `ValueError` for an unknown protocol, part or part style (the styles are `STYLES`' names)."""
    if protocol not in STYLES:
        raise ValueError(f"protocol: {STYLES.unknown(protocol)}")
    for part, style in (parts or {}).items():
        if part not in PARTS:
            raise ValueError(f"protocol_parts: unknown part {part!r}; known: {', '.join(PARTS)}")
        if style not in STYLES:
            raise ValueError(f"protocol_parts.{part}: {STYLES.unknown(style)}")


def part_style(protocol: str, parts: Mapping[str, str] | None, part: str) -> str:
    """The style ``part`` runs in: its entry in ``parts``, else the run's ``protocol``.

    >>> part_style("reference", {"interventions": "default"}, "interventions"), part_style("reference", {}, "length")
    ('default', 'reference')
    """
    if part not in PARTS:
        raise KeyError(f"unknown protocol part {part!r}; known: {', '.join(PARTS)}")
    return (parts or {}).get(part, protocol)


@dataclass(frozen=True)
class ReferenceProtocol:
    """The authors' fixed values (``prompts/reference_protocol.yaml``), read once."""

    repo: str
    commit: str
    values: Mapping[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def short_commit(self) -> str:
        return self.commit[:7]


@cache
def reference() -> ReferenceProtocol:
    """The authors' protocol values (see the YAML file for the source of each)."""
    text = resources.files("recovery").joinpath("prompts", "reference_protocol.yaml").read_text(encoding="utf-8")
    raw = yaml.safe_load(text)
    return ReferenceProtocol(raw["repo"], raw["commit"], MappingProxyType(raw))
