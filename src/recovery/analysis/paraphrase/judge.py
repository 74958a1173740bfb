"""The judge's messages and reply parsing, its configuration, and the stored judgments' key and schema."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from recovery.analysis.bbm import final_answer_part
from recovery.analysis.paraphrase.constants import (
    NAME,
    PARAPHRASE_INTERVENTIONS,
    UNPARSEABLE,
)
from recovery.analysis.paraphrase.items import ParaphraseItem
from recovery.configs import from_mapping, load_yaml
from recovery.generation import Message
from recovery.ids import content_id
from recovery.model_config import ModelConfig
from recovery.report.sections_store import analysis_dir
from recovery.store import Table as StoreTable

JUDGE_PROMPT_VERSION = "paraphrase-judge-v1"  # part of every judgment's key

# The judge's instructions. The paper describes what the judge was asked (App. D.4) but does not print the
# prompt; this wording is ours.
JUDGE_SYSTEM = (
    "You compare two versions of the beginning of a solution to the same problem: the original reasoning and "
    "a rewritten one. Judge only their logical content, not their wording, style or formatting."
)
JUDGE_USER = (
    "Problem:\n{question}\n\n"
    "Original reasoning:\n<<<\n{original}\n>>>\n\n"
    "Rewritten reasoning:\n<<<\n{paraphrase}\n>>>\n\n"
    "Do both versions contain equivalent reasoning steps that are logically equivalent: the same claims, "
    "calculations, intermediate results and conclusions, with nothing essential added, dropped or changed? "
    "Answer with Yes or No only."
)


def judge_messages(item: ParaphraseItem) -> tuple[Message, Message]:
    """The judge's (system, user) messages for ``item``."""
    user = JUDGE_USER.format(
        question=item.question.strip(), original=item.original.strip(), paraphrase=item.paraphrase.strip()
    )
    return Message("system", JUDGE_SYSTEM), Message("user", user)


_FIRST_WORD = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)
_ANSWER_LINE = re.compile(r"^\W*(?:final\s+)?(?:answer|verdict)\s*\W*[:：]\W*(yes|no)\b", re.IGNORECASE | re.MULTILINE)
_BOXED = re.compile(r"\\boxed\s*\{\W*(?:\\text\s*\{)?\s*(yes|no)\b", re.IGNORECASE)


def parse_equivalence_reply(reply: Any, *, finish_reason: str | None = None) -> tuple[str, str]:
    """``(verdict, detail)``: verdict ``yes``/``no``, or ``unparseable`` with the reason in ``detail``.

    Read after the last ``</think>``: the first word, else an "Answer: Yes" line or ``\\boxed{Yes}``,
    else the first word of the last line.

    >>> parse_equivalence_reply("Yes."), parse_equivalence_reply("<think>hm</think>\\n**No**")[0]
    (('yes', 'first word'), 'no')
    >>> parse_equivalence_reply("Both are similar.")[0]
    'unparseable'
    """
    if not isinstance(reply, str):
        return UNPARSEABLE, f"reply is {type(reply).__name__}, not text"
    text, closed = final_answer_part(reply)
    if not closed and finish_reason == "length":
        return UNPARSEABLE, "truncated: hit max_new_tokens before finishing its reasoning"
    text = text.strip()
    if not text:
        return UNPARSEABLE, "empty reply"
    match = _FIRST_WORD.match(text)
    if match:
        return match.group(1).lower(), "first word"
    for pattern, where in ((_ANSWER_LINE, "answer line"), (_BOXED, "boxed")):
        found = list(pattern.finditer(text))
        if found:
            return found[-1].group(1).lower(), where
    match = _FIRST_WORD.match(text.splitlines()[-1])
    if match:
        return match.group(1).lower(), "last line"
    return UNPARSEABLE, f"neither Yes nor No: {text[:80]!r}"


@dataclass
class ParaphraseCheckConfig:
    """The judge and the sample. The judge decodes greedily (``temperature`` 0) by default."""

    judge: ModelConfig
    per_domain: int = 100  # paper App. D.4: 100 traces per domain
    seed: int = 0
    interventions: list[str] = field(default_factory=lambda: list(PARAPHRASE_INTERVENTIONS))
    temperature: float = 0.0
    max_new_tokens: int = 2048  # room for a reasoning judge; a plain judge stops after one word
    flush_every: int = 64

    def __post_init__(self) -> None:
        if self.per_domain < 1:
            raise ValueError("per_domain must be ≥ 1")
        if not self.interventions:
            raise ValueError("interventions must not be empty")


def load_paraphrase_config(path: str | Path, overrides: Mapping[str, Any] | None = None) -> ParaphraseCheckConfig:
    """A `ParaphraseCheckConfig` from YAML (``judge:`` is a model config as in the run configs)."""
    data = {**load_yaml(path), **(overrides or {})}
    return from_mapping(ParaphraseCheckConfig, data, where=str(path))


def judgment_key(item: ParaphraseItem, config: ParaphraseCheckConfig) -> str:
    """The resume key of one judgment: chain, judge, prompt version and decoding."""
    j = config.judge
    return content_id(
        "paraphrase-judgment",
        item.chain_id,
        j.name,
        j.path,
        j.spec,
        JUDGE_PROMPT_VERSION,
        config.temperature,
        config.max_new_tokens,
    )


JUDGMENTS = pa.schema(
    [
        ("id", pa.string()),
        ("chain_id", pa.string()),
        ("domain", pa.string()),
        ("model", pa.string()),
        ("intervention", pa.string()),
        ("target_t", pa.float64()),
        ("judge", pa.string()),
        ("verdict", pa.string()),
        ("detail", pa.string()),
        ("reply", pa.string()),
        ("n_tokens", pa.int64()),
        ("finish_reason", pa.string()),
    ]
)


def judgments_table(run_dir: str | Path) -> StoreTable:
    """``RUN_DIR/analysis/paraphrase/judgments``: one Parquet row per judged chain."""
    return StoreTable(analysis_dir(run_dir, NAME) / "judgments")
