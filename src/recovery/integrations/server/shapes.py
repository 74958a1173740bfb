"""What the reward server's endpoints accept (pydantic models), and the one rule for text: every string of a
request, however deep, must be valid Unicode text (JSON can carry a lone surrogate, ``"\\ud800"``, which no
UTF-8 encoder takes); a request holding one gets 422 naming the field, before any row is scored."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from recovery.types import AnswerType

__all__ = ["OpenRLHFRequest", "ScoreRequest", "ScoreRow", "VerlRequest", "field_name"]

_ANSWER_TYPES = sorted(t.value for t in AnswerType)


def _bad_text(value: Any, where: str = "") -> Iterator[str]:
    """Where in ``value`` (a JSON value) a string is not valid Unicode text (``""``: the value itself)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:
            yield f"{where or 'the value'}: character {err.start} is a lone surrogate ({value[err.start]!a})"
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _bad_text(key, f"{where}[{key!a}] (the key)")
            yield from _bad_text(item, f"{where}[{key!r}]")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _bad_text(item, f"{where}[{i}]")


def _valid_text(value: Any) -> Any:
    for problem in _bad_text(value):
        raise ValueError(f"invalid text: {problem}")
    return value


Text = Annotated[str, AfterValidator(_valid_text)]
JSONValue = Annotated[Any, AfterValidator(_valid_text)]


class ScoreRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    completion: Text
    answer: Text | int | float
    answer_type: Text
    domain: Text | None = None
    source: Text | None = None
    question: Text | None = None
    rel_tol: float | None = Field(default=None, ge=0)
    abs_tol: float | None = Field(default=None, ge=0)
    intervention: Text | None = None
    category: Text | None = None
    reference_length: float | None = None
    id: Text | int | None = None

    @field_validator("answer_type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        if value.strip().lower() not in _ANSWER_TYPES:
            raise ValueError(f"must be one of {', '.join(_ANSWER_TYPES)}")
        return value


class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rows: list[ScoreRow] = Field(min_length=1)


class OpenRLHFRequest(BaseModel):
    query: list[Text] = Field(min_length=1)
    prompts: list[Text]
    labels: list[JSONValue]

    @model_validator(mode="after")
    def _same_length(self) -> OpenRLHFRequest:
        if not len(self.query) == len(self.prompts) == len(self.labels):
            raise ValueError(
                f"query, prompts and labels differ in length ({len(self.query)}, {len(self.prompts)}, {len(self.labels)})"
            )
        return self


class VerlRequest(BaseModel):
    data_sources: list[JSONValue]
    solution_strs: list[Text] = Field(min_length=1)
    ground_truths: list[JSONValue]
    extra_infos: list[Annotated[dict[str, Any] | None, AfterValidator(_valid_text)]]

    @model_validator(mode="after")
    def _same_length(self) -> VerlRequest:
        lengths = {len(self.data_sources), len(self.solution_strs), len(self.ground_truths), len(self.extra_infos)}
        if len(lengths) != 1:
            raise ValueError("data_sources, solution_strs, ground_truths and extra_infos differ in length")
        return self


def field_name(loc: tuple) -> str:
    """A pydantic error location as the request's field (``rows[3].answer_type``)."""
    out = ""
    for part in loc[1:] if loc and loc[0] == "body" else loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("str", "int", "float", "function-after[_valid_text(), str]"):
            continue  # the branch of a union pydantic tried, not a field
        else:
            out += f".{part}" if out else str(part)
    return out or "body"
