"""Import existing reasoning traces (JSONL / JSON / Parquet / Hub / in-memory rows) as `Trace` objects.

A `TraceFields` mapping says which column holds what. Each row becomes a ``(Problem, Trace)`` pair:

* the problem is either looked up by id in ``problems=`` (e.g. the output of `load_problems`, to attach
  traces generated elsewhere for BBH, SciBench …), or built from the row's question and gold-answer
  columns (answer type numeric when `recovery.grading.parse_number` reads the gold as one number, else
  expression — unless ``answer_type=`` says otherwise);
* the trace is `recovery.segment.parse_trace` of the response. ``strip_prompt=True`` first cuts away
  everything before the first opening think tag, for dumps whose response column holds the raw prompt
  too (the real DeepSeek-R1-Distill traces in ``shared/data/real_traces``: ``solution`` = prompt +
  ``<think>`` + reasoning + ``</think>`` + answer).

Bad rows never crash an import: they are counted in ``result.skips`` by reason (``missing_field:<f>``,
``bad_type:<f>``, ``no_think_tag``, ``unknown_problem``, ``conflicting_problem``, ``duplicate_trace``,
``bad_json`` …). With ``strict=True`` the first bad row raises `RowError` naming the file and row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recovery.data.common import MISSING, DatasetSpec, in_folder, reject, text_field
from recovery.data.skips import Skips
from recovery.data.sources import (
    DataError,
    HubLoader,
    Row,
    hub_dataset,
    is_local_path,
    iter_rows,
    read_file_rows,
)
from recovery.grading import parse_number
from recovery.plan.parts import TraceReading
from recovery.run_config import ThinkTagsOf
from recovery.segment import SegmentationError, ThinkTags
from recovery.types import AnswerType, Problem, Trace

__all__ = [
    "TraceFields",
    "TraceImport",
    "import_traces",
    "REAL_TRACES_FIELDS",
    "REAL_TRACES_MODEL",
    "REAL_TRACES_FILE",
    "load_real_traces",
]


@dataclass(frozen=True)
class TraceFields:
    """Column names of a trace dump. ``model``/``question``/``answer`` may be None when absent
    (then pass ``model=`` / ``problems=`` to `import_traces`). ``metadata`` columns are copied into
    `Problem.metadata` of problems built from rows."""

    problem_id: str = "problem_id"
    response: str = "response"
    model: str | None = "model"
    question: str | None = "problem"
    answer: str | None = "answer"
    metadata: tuple[str, ...] = ()


@dataclass
class TraceImport:
    """The result of an import: ``pairs`` in row order, the rows skipped, counted by reason, and every problem
    built from a row (``row_problems``, by id in order of first appearance), whatever became of its trace."""

    pairs: list[tuple[Problem, Trace]] = field(default_factory=list)
    skips: Skips = field(default_factory=Skips)
    row_problems: dict[str, Problem] = field(default_factory=dict)

    @property
    def traces(self) -> list[Trace]:
        return [trace for _, trace in self.pairs]

    @property
    def problems(self) -> list[Problem]:
        """Distinct problems, in order of first appearance."""
        seen: dict[str, Problem] = {}
        for problem, _ in self.pairs:
            seen.setdefault(problem.id, problem)
        return list(seen.values())

    def __len__(self) -> int:
        return len(self.pairs)


def _rows(
    source: Any,
    *,
    split: str,
    name: str | None,
    revision: str | None,
    loader: HubLoader | None,
    skips: Skips,
    strict: bool,
) -> tuple[str, Iterable[tuple[int, str, Row]]]:
    if is_local_path(source):
        path = Path(source).expanduser()
        if path.is_dir():
            raise DataError(f"{path}: is a folder; pass a .jsonl, .json or .parquet file")
        return str(path), read_file_rows(path, skips=skips, strict=strict)
    if isinstance(source, Path) or (isinstance(source, str) and source.endswith((".jsonl", ".json", ".parquet"))):
        raise DataError(f"{source}: no such file")
    if isinstance(source, str):
        if source.count("/") != 1:
            raise DataError(f"{source!r} is neither an existing file nor a Hub dataset id (owner/name)")
        dataset = hub_dataset(source, name=name, split=split, revision=revision, loader=loader)
        label = f"{source}[{split}]"
        return label, iter_rows(dataset, label=label, skips=skips, strict=strict)
    return "rows", iter_rows(source, label="rows", skips=skips, strict=strict)


def import_traces(
    source: Any,
    *,
    fields: TraceFields = TraceFields(),
    model: str | None = None,
    strip_prompt: bool = False,
    problems: Mapping[str, Problem] | Iterable[Problem] | None = None,
    id_prefix: str = "",
    domain: str = "math",
    problem_source: str = "imported",
    answer_type: AnswerType | str | None = None,
    think_tags: Callable[[str], ThinkTags] | None = None,
    reading: TraceReading | None = None,
    split: str = "train",
    name: str | None = None,
    revision: str | None = None,
    loader: HubLoader | None = None,
    strict: bool = False,
    skips: Skips | None = None,
) -> TraceImport:
    """Import traces from ``source``: a local ``.jsonl``/``.json``/``.parquet`` file, a Hub dataset id
    (``owner/name``, read with ``loader``, default ``datasets.load_dataset``, config ``name``, ``split``),
    or rows in memory (a ``datasets.Dataset``, a list of dicts).

    ``model`` names the generating model for every row (it wins over the ``fields.model`` column);
    ``think_tags(model)`` gives the think tags its responses are read with (default: what the model's name
    says, `recovery.run_config.ThinkTagsOf`), and ``reading`` how (a run's plan's `recovery.plan.TraceReading`;
    default: the project's, by those tags alone).
    Problem ids are ``f"{id_prefix}/{row id}"`` (just the row id without a prefix); with ``problems=``
    they must match the ids there. ``skips`` collects the skipped rows (default: a `Skips` keeping a few
    locations per reason). See the module docstring for the rest.
    """
    if model is None and fields.model is None:
        raise ValueError("say which model wrote the traces: pass model=... or fields.model=<column>")
    if problems is not None and not isinstance(problems, Mapping):
        problems = {p.id: p for p in problems}
    if problems is None and (fields.question is None or fields.answer is None):
        raise ValueError("without problems=..., fields.question and fields.answer must name columns")
    fixed_type = AnswerType(answer_type) if answer_type is not None else None
    tags_of = think_tags or ThinkTagsOf()  # by what each model's name says
    read = TraceReading() if reading is None else reading

    result = TraceImport() if skips is None else TraceImport(skips=skips)
    skips = result.skips
    _, rows = _rows(source, split=split, name=name, revision=revision, loader=loader, skips=skips, strict=strict)
    built = result.row_problems
    trace_ids: set[str] = set()
    for _, where, row in rows:
        raw_id = text_field(row, fields.problem_id, where, skips, strict, numbers=True)
        response = text_field(row, fields.response, where, skips, strict, allow_empty=True)
        author = model if model is not None else text_field(row, fields.model, where, skips, strict)
        if MISSING in (raw_id, response, author):
            continue
        problem_id = f"{id_prefix}/{raw_id.strip()}" if id_prefix else raw_id.strip()

        if problems is not None:
            problem = problems.get(problem_id)
            if problem is None:
                reject("unknown_problem", where, skips, strict)
                continue
        else:
            problem = _problem_from_row(
                row, problem_id, fields, fixed_type, domain, problem_source, where, skips, strict
            )
            if problem is None:
                continue
            earlier = built.setdefault(problem_id, problem)
            if (earlier.question, earlier.answer) != (problem.question, problem.answer):
                reject("conflicting_problem", where, skips, strict)
                continue
            problem = earlier

        tags = tags_of(author)
        if strip_prompt:
            stripped = read.without_prompt(response, tags)
            if stripped is None:
                reject("no_think_tag", where, skips, strict)
                continue
            response = stripped
        try:
            trace = read.trace(problem.id, author, response, tags=tags)
        except SegmentationError:
            reject("no_think_tag", where, skips, strict)
            continue
        if trace.id in trace_ids:
            reject("duplicate_trace", where, skips, strict=False)  # the same trace twice is not an error
            continue
        trace_ids.add(trace.id)
        result.pairs.append((problem, trace))
    return result


def _problem_from_row(
    row: Row,
    problem_id: str,
    fields: TraceFields,
    fixed_type: AnswerType | None,
    domain: str,
    problem_source: str,
    where: str,
    skips: Skips,
    strict: bool,
) -> Problem | None:
    assert fields.question is not None and fields.answer is not None
    question = text_field(row, fields.question, where, skips, strict)
    answer = text_field(row, fields.answer, where, skips, strict, numbers=True)
    if question is MISSING or answer is MISSING:
        return None
    answer = answer.strip()
    if fixed_type is not None:
        kind = fixed_type
    else:
        kind = AnswerType.NUMERIC if parse_number(answer) is not None else AnswerType.EXPRESSION
    metadata = {key: row[key] for key in fields.metadata if key in row}
    return Problem(
        domain=domain,
        question=question,
        answer=answer,
        answer_type=kind,
        source=problem_source,
        metadata=metadata,
        id=problem_id,
    )


# ---------------------------------------------------------------------------------------------- real traces

#: ``shared/data/real_traces``: 153 DeepSeek-R1-Distill traces on MATH problems (Thought Anchors data).
REAL_TRACES_FILE = "thought_anchors_math_cots.jsonl"
REAL_TRACES_FIELDS = TraceFields(
    problem_id="problem_id",
    response="solution",
    model=None,
    question="problem",
    answer="gt_answer",
    metadata=("level", "type", "id", "is_correct", "answer"),
)
#: The generating model is not recorded in the data; its README names this one as most likely (unverified).
REAL_TRACES_MODEL = "deepseek-ai/DeepSeek-R1-Distill-Llama-8B"


def load_real_traces(
    path: str | Path, *, model: str = REAL_TRACES_MODEL, strip_prompt: bool = True, strict: bool = False
) -> TraceImport:
    """The real traces of ``shared/data/real_traces`` (a folder holding `REAL_TRACES_FILE`, or the file).

    Problems: ``thought_anchors_math/problem_<N>``, domain math, gold ``gt_answer`` (numeric when it
    parses as one number, else expression); traces start at ``<think>`` (the raw prompt is stripped).
    """
    file = Path(path).expanduser()
    if file.is_dir():
        file = file / REAL_TRACES_FILE
    return import_traces(
        file,
        fields=REAL_TRACES_FIELDS,
        model=model,
        strip_prompt=strip_prompt,
        id_prefix="thought_anchors_math",
        domain="math",
        problem_source="thought_anchors_math",
        strict=strict,
    )


def _load_real_problems(
    path: str | Path | None, sub: str | None, limit: int | None, *, skips: Skips | None = None, **options: Any
) -> list[Problem]:
    if path is None:
        raise DataError("real_traces has no Hub copy: pass path= (shared/data or shared/data/real_traces)")
    imported = load_real_traces(in_folder(path, "real_traces"), **options)
    if skips is not None:
        skips.update(imported.skips)
    # Every row's problem, also one whose response its model's tags do not read: the run's traces stage reads
    # the responses as its plan does (the authors' reading takes either family's tags).
    return list(imported.row_problems.values())[:limit]


REAL_TRACES = DatasetSpec(
    "problems of the real DeepSeek-R1-Distill traces in shared/data/real_traces (needs path)",
    _load_real_problems,
    options_of=(load_real_traces,),
)
