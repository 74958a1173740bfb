"""BIG-Bench Mistake (Tyen et al., 2024): can a model find the first wrong step of a chain of thought?

The paper (§3, Table 1; App. A.3, Table 11) gives reasoning models a question with a step-by-step solution
written by PaLM 2 and asks for the location of the first logical mistake, zero-shot; accuracy is reported
per task. This module does the same with any model the project's backends run:

* `load_bbm` reads the benchmark from local ``<task>.jsonl`` files (as in github.com/WHGTyen/BIG-Bench-Mistake)
  or from a Hub copy named by the caller (``datasets.load_dataset``, one config per task or one table with a
  task column);
* `build_prompt` numbers the steps and asks for "Step N" or "No mistake" (the paper does not print its
  prompt, so this one is ours);
* `parse_mistake_answer` reads the reply (after ``</think>`` when the model reasoned) and `score_answer`
  compares it with the human annotation; an unreadable reply counts as wrong, with its reason kept;
* `run_bbm` asks every configured model about every item (resumable: answered items are skipped), stores
  one Parquet row per answer under ``OUT/analysis/bbm/answers`` and writes a report section with accuracy
  per model × task (Table 11 layout), counts and 95 % Wilson intervals.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
from tqdm.auto import tqdm

from recovery.analysis.sections_store import analysis_dir, save_section
from recovery.backends.base import GenerationRequest, Generator, SamplingParams, batched
from recovery.configs import from_mapping, load_yaml
from recovery.data.skips import Skips
from recovery.data.sources import (
    DataError,
    HubLoader,
    hub_dataset,
    iter_rows,
    read_file_rows,
    reject,
)
from recovery.ids import content_id, item_seed
from recovery.interventions.base import Message
from recovery.pipeline.config import ModelConfig
from recovery.report.data import Figure, Section, Table
from recovery.store import Table as StoreTable

NAME = "bbm"
BBM_TASKS: tuple[str, ...] = (
    "dyck_languages",
    "logical_deduction",
    "multistep_arithmetic",
    "tracking_shuffled_objects",
    "word_sorting",
)
#: Column titles of the paper's Tables 1 and 11.
TASK_TITLES: Mapping[str, str] = {
    "dyck_languages": "Dyck",
    "logical_deduction": "Logical Ded.",
    "multistep_arithmetic": "Multistep Arith.",
    "tracking_shuffled_objects": "Track Shuffled Obj.",
    "word_sorting": "Word Sorting",
}
#: The paper's Table 11 (accuracy in %, task order of `BBM_TASKS`), for comparison in the report.
PAPER_TABLE11: Mapping[str, tuple[float, float, float, float, float]] = {
    "R1-Distill-Qwen-1.5B": (9.4, 7.3, 55.3, 51.6, 11.8),
    "R1-Distill-Qwen-7B": (19.6, 17.5, 88.2, 72.8, 16.1),
    "R1-Distill-Llama-8B": (10.3, 14.0, 70.8, 54.7, 13.8),
    "Llama-Nemotron-8B": (18.5, 5.2, 26.8, 67.7, 1.4),
    "R1-Distill-Qwen-14B": (39.7, 30.1, 86.8, 87.8, 25.9),
    "Phi-4-reasoning (14B)": (50.7, 63.5, 90.5, 89.6, 53.8),
    "Phi-4-reasoning-plus (14B)": (56.5, 65.6, 91.4, 92.0, 59.2),
    "QwQ-32B": (66.7, 66.9, 90.3, 94.6, 53.2),
    "R1-Distill-Qwen-32B": (42.4, 31.4, 89.4, 86.3, 30.7),
    "EXAONE-Deep-32B": (52.3, 54.3, 89.5, 94.5, 54.8),
    "R1-Distill-Llama-70B": (35.8, 25.0, 78.3, 86.8, 29.2),
    "Qwen3-30B-A3B-Thinking": (38.1, 76.8, 76.4, 83.8, 50.8),
    "Qwen3-30B-A3B-Instruct": (15.2, 57.2, 76.0, 82.9, 2.8),
    "GPT-4-Turbo": (15.3, 21.3, 38.3, 39.3, 36.3),
    "GPT-4": (17.1, 40.7, 44.0, 62.3, 35.0),
    "gpt-oss-20b": (59.3, 72.0, 91.0, 93.3, 45.0),
    "gpt-oss-120b": (73.5, 78.3, 90.7, 92.0, 50.7),
    "o3": (88.7, 82.7, 91.0, 92.0, 64.3),
}
# Our model names (registry / Hub basenames) → the paper's row names.
_PAPER_ALIASES: Mapping[str, str] = {
    "deepseek-r1-distill-qwen-1.5b": "R1-Distill-Qwen-1.5B",
    "deepseek-r1-distill-qwen-7b": "R1-Distill-Qwen-7B",
    "deepseek-r1-distill-llama-8b": "R1-Distill-Llama-8B",
    "llama-3.1-nemotron-nano-8b-v1": "Llama-Nemotron-8B",
    "deepseek-r1-distill-qwen-14b": "R1-Distill-Qwen-14B",
    "phi-4-reasoning": "Phi-4-reasoning (14B)",
    "phi-4-reasoning-plus": "Phi-4-reasoning-plus (14B)",
    "deepseek-r1-distill-qwen-32b": "R1-Distill-Qwen-32B",
    "deepseek-r1-distill-llama-70b": "R1-Distill-Llama-70B",
    "qwen3-30b-a3b-thinking-2507": "Qwen3-30B-A3B-Thinking",
    "qwen3-30b-a3b-instruct-2507": "Qwen3-30B-A3B-Instruct",
}

PROMPT_VERSION = "bbm-prompt-v1"  # part of every answer's key: a new prompt never reuses old answers
Z95 = 1.959963984540054
# Where a reasoning model's final answer starts: think tags (DeepSeek/Qwen/Phi: </think>, EXAONE:
# </thought>) and gpt-oss's final channel, with and without its special tokens decoded.
FINAL_MARKERS: tuple[str, ...] = ("</think>", "</thought>", "<|channel|>final<|message|>", "assistantfinal")

# Outcomes of one answer. Only CORRECT counts as correct; the others say why not.
CORRECT = "correct"
WRONG_STEP = "wrong_step"
MISSED_MISTAKE = "missed_mistake"  # answered "no mistake" on a trace that has one
FALSE_ALARM = "false_alarm"  # named a step on a trace without a mistake
OUT_OF_RANGE = "step_out_of_range"  # named a step the solution does not have
UNPARSEABLE = "unparseable"
GENERATION_ERROR = "generation_error"  # the backend returned no reply (retried on the next run)
OUTCOMES: tuple[str, ...] = (CORRECT, WRONG_STEP, MISSED_MISTAKE, FALSE_ALARM, OUT_OF_RANGE, UNPARSEABLE,
                             GENERATION_ERROR)  # fmt: skip


# ------------------------------------------------------------------------------------------------ data


@dataclass(frozen=True)
class BBMItem:
    """One BIG-Bench Mistake trace. ``mistake_index`` is 0-based (None: the trace has no mistake)."""

    task: str
    index: int
    question: str
    steps: tuple[str, ...]
    mistake_index: int | None
    answer: str = ""
    target: str = ""

    @property
    def id(self) -> str:
        """``bbm/<task>/<index>``, the item's position in its task file (same on the Hub copy)."""
        return f"bbm/{self.task}/{self.index}"

    @property
    def gold_step(self) -> int | None:
        """The first wrong step as the prompt numbers it (1-based), or None."""
        return None if self.mistake_index is None else self.mistake_index + 1


def bbm_item(task: str, index: int, where: str, row: Mapping[str, Any], skips: Skips | None = None,
             strict: bool = False) -> BBMItem | None:  # fmt: skip
    """Validate one row (fields ``input``, ``steps``, ``mistake_index``; ``answer``/``target`` optional).

    A bad row is counted in ``skips`` under a reason (``missing_field:steps``, ``bad_mistake_index``, …)
    and None is returned; with ``strict`` it raises `recovery.data.sources.RowError` naming the row.
    """
    question = row.get("input")
    if not isinstance(question, str) or not question.strip():
        reject("missing_field:input", where, skips, strict)
        return None
    steps = row.get("steps")
    if isinstance(steps, str):  # some Hub exports store lists as JSON text
        try:
            steps = json.loads(steps)
        except json.JSONDecodeError:
            steps = None
    if not isinstance(steps, (list, tuple)) or not steps or not all(isinstance(s, str) for s in steps):
        reject("missing_field:steps", where, skips, strict)
        return None
    if "mistake_index" not in row:
        reject("missing_field:mistake_index", where, skips, strict)
        return None
    mistake = row["mistake_index"]
    if isinstance(mistake, float) and mistake.is_integer():  # Parquet/pandas turn nullable ints into floats
        mistake = int(mistake)
    if mistake is not None and (isinstance(mistake, bool) or not isinstance(mistake, int) or not 0 <= mistake < len(steps)):
        reject("bad_mistake_index", f"{where} (mistake_index={mistake!r}, {len(steps)} steps)", skips, strict)
        return None
    return BBMItem(task, index, question, tuple(steps), mistake, str(row.get("answer") or ""),
                   str(row.get("target") or ""))  # fmt: skip


def _task_file(path: Path, task: str) -> Path:
    if path.is_file():
        return path
    for candidate in (path / f"{task}.jsonl", path / f"{task}.json", path / f"{task}.parquet"):
        if candidate.is_file():
            return candidate
    raise DataError(f"{path}: no {task}.jsonl for BIG-Bench Mistake task {task!r}")


def load_bbm(
    tasks: str | Sequence[str] = BBM_TASKS,
    *,
    path: str | Path | None = None,
    hub_id: str | None = None,
    split: str = "train",
    task_column: str | None = None,
    revision: str | None = None,
    limit: int | None = None,
    loader: HubLoader | None = None,
    skips: Skips | None = None,
    strict: bool = False,
) -> list[BBMItem]:
    """BIG-Bench Mistake items, task by task in the order given (at most ``limit`` per task, file order).

    ``path``: a folder of ``<task>.jsonl`` files (or one file when one task is asked for). Otherwise the Hub
    copy ``hub_id`` through ``loader`` (default ``datasets.load_dataset``): one config per task, or, with
    ``task_column``, one table whose column names the task. Bad rows are counted in ``skips``.
    """
    task_list = [tasks] if isinstance(tasks, str) else list(tasks)
    if not task_list:
        raise DataError("no BIG-Bench Mistake task asked for")
    if (path is None) == (hub_id is None):
        raise DataError("give exactly one of path (local <task>.jsonl files) and hub_id (a Hub dataset)")
    if path is not None and Path(path).is_file() and len(task_list) != 1:
        raise DataError(f"{path} is a single file but {len(task_list)} tasks were asked for")
    shared_rows: list[Any] | None = None
    items: list[BBMItem] = []
    for task in task_list:
        if path is not None:
            rows: Iterable = read_file_rows(_task_file(Path(path).expanduser(), task), skips=skips, strict=strict)
        elif task_column:
            if shared_rows is None:
                shared_rows = list(hub_dataset(hub_id, split=split, revision=revision, loader=loader))
            mine = [r for r in shared_rows if isinstance(r, Mapping) and r.get(task_column) == task]
            rows = iter_rows(mine, label=f"{hub_id}[{split}] {task_column}={task}", skips=skips, strict=strict)
        else:
            dataset = hub_dataset(hub_id, name=task, split=split, revision=revision, loader=loader)
            rows = iter_rows(dataset, label=f"{hub_id}/{task}[{split}]", skips=skips, strict=strict)
        count = 0
        for index, where, row in rows:
            if limit is not None and count >= limit:
                break
            item = bbm_item(task, index, where, row, skips, strict)
            if item is not None:
                items.append(item)
                count += 1
    return items


# ---------------------------------------------------------------------------------------------- prompt


def build_prompt(item: BBMItem) -> str:
    """The zero-shot user turn: the question, the numbered steps, and the requested answer format.

    The paper evaluated reasoning models zero-shot but does not print its prompt; this wording is ours.
    Steps are numbered from 1, so the expected answer is ``mistake_index + 1``.
    """
    steps = "\n".join(f"Step {i}: {text.strip()}" for i, text in enumerate(item.steps, start=1))
    return (
        "Below is a question followed by a step-by-step solution with numbered steps. A step contains a "
        "mistake if its reasoning or calculation is wrong, given the question and the steps before it. "
        "Some solutions contain no mistake.\n\n"
        f"Question:\n{item.question.strip()}\n\n"
        f"Solution:\n{steps}\n\n"
        "Which step contains the FIRST mistake? If every step is correct, say that there is no mistake. "
        'End your reply with one line of the form "Answer: Step N", where N is the number of the first '
        'incorrect step, or "Answer: No mistake".'
    )


# ---------------------------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class ParsedAnswer:
    """What a reply says: ``kind`` is ``step`` (with ``step``), ``no_mistake`` or ``unparseable``;
    ``detail`` tells where it was found, or why nothing was."""

    kind: Literal["step", "no_mistake", "unparseable"]
    step: int | None = None
    detail: str = ""


_STEP_REF = re.compile(r"\bstep\s*(?:#|no\.?|number)?\s*(\d+)\b", re.IGNORECASE)
# "no mistake" and its variants, but not "no mistake in step 2" (a claim about one step only).
_NO_MISTAKE = re.compile(
    r"\b(?:no\s+(?:logical\s+)?(?:mistakes?|errors?|incorrect\s+steps?|wrong\s+steps?|flaws?)|none|"
    r"(?:mistake|error)[- ]free|all\s+(?:of\s+)?(?:the\s+)?steps\s+are\s+correct|every\s+step\s+is\s+correct|"
    r"does\s+not\s+contain\s+any\s+(?:mistakes?|errors?))\b"
    r"(?!\s+(?:in|at|until|before|up\s+to|through)\s+step)",
    re.IGNORECASE,
)
_BOXED = re.compile(r"\\boxed\s*\{((?:[^{}]|\{[^{}]*\})*)\}")
_ANSWER_LINE = re.compile(r"^\W*(?:final\s+)?answer\s*\W*[:：]\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_FIRST_THEN_STEP = re.compile(
    r"\b(?:first|earliest)\s+(?:\w+\s+){0,2}?(?:mistake|error|incorrect|wrong|flaw)\w*\b[^.\n]{0,80}?"
    r"\bstep\s*(?:#|no\.?|number)?\s*(\d+)\b",
    re.IGNORECASE,
)
_STEP_THEN_FIRST = re.compile(
    r"\bstep\s*(?:#|no\.?|number)?\s*(\d+)\b[^.\n]{0,60}?\b(?:first|earliest)\s+(?:\w+\s+)?(?:mistake|error)", re.IGNORECASE
)
_BARE_NUMBER = re.compile(r"^\W*#?\s*(\d+)\s*\W*$")


def final_answer_part(reply: str, markers: Sequence[str] = FINAL_MARKERS) -> tuple[str, bool]:
    """The text after the last end-of-reasoning marker (``</think>`` …) and whether one was found."""
    end = -1
    for marker in markers:
        pos = reply.rfind(marker)
        if pos >= 0:
            end = max(end, pos + len(marker))
    return (reply[end:], True) if end >= 0 else (reply, False)


def _clean_span(text: str) -> str:
    text = re.sub(r"\\text(?:bf)?\s*\{([^{}]*)\}", r"\1", text)
    return text.replace("*", "").replace("`", "").strip().strip("\"'").strip()


def _parse_span(text: str) -> ParsedAnswer | None:
    """A short answer (boxed content, "Answer:" line): a step number or "no mistake", else None."""
    span = _clean_span(text)
    steps = {int(m.group(1)) for m in _STEP_REF.finditer(span)}
    if _NO_MISTAKE.search(span) and not steps:
        return ParsedAnswer("no_mistake")
    if len(steps) == 1:
        return ParsedAnswer("step", steps.pop())
    bare = _BARE_NUMBER.match(span)
    if bare and not steps:
        return ParsedAnswer("step", int(bare.group(1)))
    return None


def parse_mistake_answer(reply: str, *, finish_reason: str | None = None,
                         markers: Sequence[str] = FINAL_MARKERS) -> ParsedAnswer:  # fmt: skip
    """Read a reply: a 1-based step number, "no mistake", or unparseable with the reason.

    Looked at, in order, in the text after the last ``</think>`` (the whole reply if there is none):
    the last ``\\boxed{…}``, the last "Answer: …" line, a "first mistake … step N" phrase (or "step N
    … first error"), then the whole text — one distinct "step N" mention, a bare number, or a
    "no mistake" phrase with no step named. Several steps and no marker is ambiguous, hence unparseable.

    >>> parse_mistake_answer("<think>Step 2 looks odd.</think>The first mistake is in step 3.").step
    3
    >>> parse_mistake_answer("There are no mistakes.").kind
    'no_mistake'
    """
    if not isinstance(reply, str):
        return ParsedAnswer("unparseable", detail=f"reply is {type(reply).__name__}, not text")
    text, closed = final_answer_part(reply, markers)
    if not closed and finish_reason == "length":
        return ParsedAnswer("unparseable", detail="truncated: hit max_new_tokens before finishing its reasoning")
    if not text.strip():
        return ParsedAnswer("unparseable", detail="empty final answer" if closed else "empty reply")
    for pattern, where in ((_BOXED, "boxed"), (_ANSWER_LINE, "answer line")):
        found = list(pattern.finditer(text))
        if found:
            parsed = _parse_span(found[-1].group(1))
            if parsed is not None:
                return ParsedAnswer(parsed.kind, parsed.step, where)
    for pattern in (_FIRST_THEN_STEP, _STEP_THEN_FIRST):
        match = pattern.search(text)
        if match:
            return ParsedAnswer("step", int(match.group(1)), "first-mistake phrase")
    steps = sorted({int(m.group(1)) for m in _STEP_REF.finditer(text)})
    no_mistake = _NO_MISTAKE.search(text) is not None
    if len(steps) == 1 and not no_mistake:
        return ParsedAnswer("step", steps[0], "only step named")
    if not steps and no_mistake:
        return ParsedAnswer("no_mistake", None, "no-mistake phrase")
    if not steps:
        bare = _BARE_NUMBER.match(_clean_span(text))
        if bare:
            return ParsedAnswer("step", int(bare.group(1)), "bare number")
        return ParsedAnswer("unparseable", detail="names no step and does not say 'no mistake'")
    named = ", ".join(map(str, steps))
    extra = " and says 'no mistake'" if no_mistake else ""
    return ParsedAnswer("unparseable", detail=f"ambiguous: names steps {named}{extra}")


def score_answer(item: BBMItem, parsed: ParsedAnswer) -> str:
    """The outcome (one of `OUTCOMES`) of ``parsed`` on ``item``; only `CORRECT` counts as correct."""
    if parsed.kind == "unparseable":
        return UNPARSEABLE
    if parsed.kind == "no_mistake":
        return CORRECT if item.gold_step is None else MISSED_MISTAKE
    if parsed.step is None or not 1 <= parsed.step <= len(item.steps):
        return OUT_OF_RANGE
    if item.gold_step is None:
        return FALSE_ALARM
    return CORRECT if parsed.step == item.gold_step else WRONG_STEP


# ---------------------------------------------------------------------------------------------- metrics


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``k / n`` (NaN, NaN when ``n`` is 0).

    >>> [round(x, 4) for x in wilson_interval(2, 4)]
    [0.15, 0.85]
    """
    if not 0 <= k <= n:
        raise ValueError(f"need 0 ≤ k ≤ n, got k={k}, n={n}")
    if n == 0:
        return math.nan, math.nan
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class TaskAccuracy:
    """Accuracy of one model on one task (``task="all"``: pooled), with a 95 % Wilson interval.

    ``n`` counts every answered item; unparseable replies and generation errors are in ``n`` as wrong.
    ``with_mistake``/``without_mistake`` split the items by whether the trace has a mistake.
    """

    model: str
    task: str
    n: int
    correct: int
    ci_low: float
    ci_high: float
    n_with_mistake: int
    correct_with_mistake: int
    n_without_mistake: int
    correct_without_mistake: int
    outcomes: Mapping[str, int]

    @property
    def accuracy(self) -> float:
        return self.correct / self.n if self.n else math.nan


def accuracy_table(rows: Iterable[Mapping[str, Any]], *, pooled: bool = True) -> list[TaskAccuracy]:
    """Per (model, task) accuracy from answer rows (``model``, ``task``, ``gold_step``, ``outcome``);
    with ``pooled`` also one ``task="all"`` entry per model. Order: models as first seen, tasks in
    `BBM_TASKS` order (others after, sorted)."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    models: list[str] = []
    for row in rows:
        if row["model"] not in models:
            models.append(row["model"])
        groups[(row["model"], row["task"])].append(row)
        if pooled:
            groups[(row["model"], "all")].append(row)
    tasks = sorted({t for _, t in groups if t != "all"}, key=_task_order)
    out = []
    for model in models:
        for task in [*tasks, *(["all"] if pooled else [])]:
            group = groups.get((model, task))
            if group:
                out.append(_accuracy(model, task, group))
    return out


def _task_order(task: str) -> tuple[int, str]:
    return (BBM_TASKS.index(task) if task in BBM_TASKS else len(BBM_TASKS), task)


def _accuracy(model: str, task: str, group: Sequence[Mapping[str, Any]]) -> TaskAccuracy:
    ok = [r["outcome"] == CORRECT for r in group]
    has = [r["gold_step"] is not None for r in group]
    low, high = wilson_interval(sum(ok), len(ok))
    return TaskAccuracy(
        model=model, task=task, n=len(ok), correct=sum(ok), ci_low=low, ci_high=high,
        n_with_mistake=sum(has), correct_with_mistake=sum(o for o, h in zip(ok, has) if h),
        n_without_mistake=len(has) - sum(has), correct_without_mistake=sum(o for o, h in zip(ok, has) if not h),
        outcomes=dict(Counter(r["outcome"] for r in group)),
    )  # fmt: skip


def paper_row_name(model: str) -> str | None:
    """The paper's Table 11 row for a model name or path (``deepseek-ai/DeepSeek-R1-Distill-Qwen-7B`` →
    ``R1-Distill-Qwen-7B``), or None when the paper did not evaluate it."""
    base = model.rstrip("/").rsplit("/", 1)[-1]
    if base in PAPER_TABLE11:
        return base
    return _PAPER_ALIASES.get(base.lower())


# ------------------------------------------------------------------------------------------- the run


@dataclass
class BBMDataConfig:
    """Where the items come from: local files (``path``) or a Hub copy (``hub_id``), which tasks, how many."""

    path: str | None = None
    hub_id: str | None = None
    split: str = "train"
    task_column: str | None = None
    revision: str | None = None
    tasks: list[str] = field(default_factory=lambda: list(BBM_TASKS))
    limit: int | None = None  # items per task (the first ones of each file)

    def __post_init__(self) -> None:
        if (self.path is None) == (self.hub_id is None):
            raise ValueError("data: set exactly one of path (local <task>.jsonl files) and hub_id")
        if self.limit is not None and self.limit < 1:
            raise ValueError("data.limit must be ≥ 1")
        if not self.tasks:
            raise ValueError("data.tasks must not be empty")


@dataclass
class BBMSamplingConfig:
    """Decoding of the answers: ``greedy``; ``recommended`` (the model's card, `recovery.models`, with the
    `ModelConfig`'s own temperature/top_p/top_k winning); or ``custom`` (the values below)."""

    mode: Literal["greedy", "recommended", "custom"] = "recommended"
    temperature: float = 0.6
    top_p: float = 0.95
    top_k: int | None = None
    max_new_tokens: int = 32768
    seed: int = 0


@dataclass
class BBMConfig:
    """A BIG-Bench Mistake evaluation: items, models, decoding and where results go."""

    out: str
    data: BBMDataConfig
    models: list[ModelConfig] = field(default_factory=lambda: [ModelConfig(name="tiny-reasoner")])
    sampling: BBMSamplingConfig = field(default_factory=BBMSamplingConfig)
    flush_every: int = 64  # answers per committed shard (a kill loses at most this many)
    title: str = "BIG-Bench Mistake"

    def __post_init__(self) -> None:
        names = [m.name for m in self.models]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"models must be a non-empty list of unique names, got {names}")
        if self.flush_every < 1:
            raise ValueError("flush_every must be ≥ 1")


def load_bbm_config(path: str | Path, overrides: Mapping[str, Any] | None = None) -> BBMConfig:
    """Load a BBM config from YAML; ``overrides`` replace top-level keys (``out``) or, for ``data``, its
    keys (``{"data": {"limit": 3}}``)."""
    data = load_yaml(path)
    for key, value in (overrides or {}).items():
        if key == "data" and isinstance(value, Mapping):
            data["data"] = {**(data.get("data") or {}), **value}
        else:
            data[key] = value
    return from_mapping(BBMConfig, data, where=str(path))


def sampling_for(model: ModelConfig, cfg: BBMSamplingConfig, *, seed: int | None = None) -> SamplingParams:
    """One answer's decoding for ``model`` under ``cfg`` (n = 1)."""
    if cfg.mode == "greedy":
        return SamplingParams(n=1, temperature=0.0, top_p=1.0, top_k=None, seed=seed, max_new_tokens=cfg.max_new_tokens)
    if cfg.mode == "custom":
        t, p, k = cfg.temperature, cfg.top_p, cfg.top_k
    else:
        from recovery.models import get_spec, spec_for

        spec = get_spec(model.spec) if model.spec else spec_for(model.path or model.name)
        t, p, k = spec.decoding.temperature, spec.decoding.top_p, spec.decoding.top_k
    t = model.temperature if model.temperature is not None else t
    p = model.top_p if model.top_p is not None else p
    k = model.top_k if model.top_k is not None else k
    return SamplingParams(n=1, temperature=t, top_p=p, top_k=k, seed=seed, max_new_tokens=cfg.max_new_tokens)


def answer_key(model: ModelConfig, item: BBMItem, cfg: BBMSamplingConfig) -> str:
    """The resume key of one answer: model, item, prompt version and decoding (any change → new answers)."""
    return content_id("bbm-answer", model.name, model.path, model.spec, item.id, PROMPT_VERSION, asdict(cfg),
                      [model.temperature, model.top_p, model.top_k])  # fmt: skip


ANSWERS = pa.schema([
    ("id", pa.string()), ("model", pa.string()), ("task", pa.string()), ("item_id", pa.string()),
    ("item_index", pa.int64()), ("n_steps", pa.int64()), ("gold_step", pa.int64()), ("predicted", pa.string()),
    ("predicted_step", pa.int64()), ("correct", pa.bool_()), ("outcome", pa.string()), ("detail", pa.string()),
    ("reply", pa.string()), ("n_tokens", pa.int64()), ("finish_reason", pa.string()), ("prompt_tokens", pa.int64()),
])  # fmt: skip


def answers_table(out: str | Path) -> StoreTable:
    """``OUT/analysis/bbm/answers``: one Parquet row per (model, item) answer."""
    return StoreTable(analysis_dir(out, NAME) / "answers")


def answer_row(key: str, model: str, item: BBMItem, reply: str | None, *, n_tokens: int | None = None,
               finish_reason: str | None = None, prompt_tokens: int | None = None,
               error: str | None = None) -> dict[str, Any]:  # fmt: skip
    """The stored row of one answer (a generation error is stored too, with its message, and retried)."""
    if error is not None or reply is None:
        parsed, outcome, detail = ParsedAnswer("unparseable"), GENERATION_ERROR, (error or "no reply")[:500]
    else:
        parsed = parse_mistake_answer(reply, finish_reason=finish_reason)
        outcome, detail = score_answer(item, parsed), parsed.detail
    return {
        "id": key, "model": model, "task": item.task, "item_id": item.id, "item_index": item.index,
        "n_steps": len(item.steps), "gold_step": item.gold_step, "predicted": parsed.kind,
        "predicted_step": parsed.step, "correct": outcome == CORRECT, "outcome": outcome, "detail": detail,
        "reply": reply, "n_tokens": n_tokens, "finish_reason": finish_reason, "prompt_tokens": prompt_tokens,
    }  # fmt: skip


def read_answers(table: StoreTable, keys: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Stored answers (only ``keys`` when given), one per key: a real answer wins over a generation error
    stored before it was retried."""
    wanted = None if keys is None else set(keys)
    best: dict[str, dict[str, Any]] = {}
    for row in table.iter_rows():
        if wanted is not None and row["id"] not in wanted:
            continue
        held = best.get(row["id"])
        if held is None or held["outcome"] == GENERATION_ERROR:
            best[row["id"]] = row
    return list(best.values())


@dataclass
class BBMResult:
    """What `run_bbm` did: answers written now, all current answers, accuracies, the report paths."""

    out: Path
    written: int
    rows: list[dict[str, Any]]
    accuracies: list[TaskAccuracy]
    skips: Skips
    report_html: Path
    section: Section


def run_bbm(
    config: BBMConfig,
    *,
    make_generator: Callable[[ModelConfig], Generator] | None = None,
    progress: bool = True,
    run_dir: str | Path | None = None,
    loader: HubLoader | None = None,
) -> BBMResult:
    """Ask every model of ``config`` to locate the first mistake of every item; store, score and report.

    Resumable: answers already stored under the same key are not asked again (generation errors are).
    Writes ``OUT/analysis/bbm/`` (answers + section) and ``OUT/report/``; with ``run_dir`` the section is
    also stored in that pipeline run directory and its report re-rendered.
    """
    if run_dir is not None:  # refuse a wrong --run-dir before hours of generation, not after
        from recovery.pipeline.run import load_run_config_from_dir

        load_run_config_from_dir(run_dir)
    skips = Skips()
    d = config.data
    items = load_bbm(d.tasks, path=d.path, hub_id=d.hub_id, split=d.split, task_column=d.task_column,
                     revision=d.revision, limit=d.limit, loader=loader, skips=skips)  # fmt: skip
    if not items:
        raise DataError(f"no usable BIG-Bench Mistake items for tasks {d.tasks} ({skips.summary() or 'empty source'})")
    if make_generator is None:
        from recovery.pipeline.backend import make_generator as default_factory

        def make_generator(model: ModelConfig) -> Generator:
            return default_factory(model, seed=config.sampling.seed)

    table = answers_table(config.out)
    table.clean_stale()
    done = {r["id"] for r in table.iter_rows(["id", "outcome"]) if r["outcome"] != GENERATION_ERROR}
    all_keys: list[str] = []
    written = 0
    for model in config.models:
        keyed = [(answer_key(model, item, config.sampling), item) for item in items]
        all_keys.extend(k for k, _ in keyed)
        todo = [(k, item) for k, item in keyed if k not in done]
        if todo:
            written += _answer(model, todo, config, make_generator, progress, table)
    rows = read_answers(table, all_keys)
    accuracies = accuracy_table(rows)
    section = bbm_section(rows, config=config, skips=skips)
    save_section(config.out, NAME, section)
    report_html = _write_reports(config, section, run_dir)
    return BBMResult(Path(config.out), written, rows, accuracies, skips, report_html, section)


def _answer(model: ModelConfig, todo: list[tuple[str, BBMItem]], config: BBMConfig,
            make_generator: Callable[[ModelConfig], Generator], progress: bool, table: StoreTable) -> int:  # fmt: skip
    generator = make_generator(model)
    written = 0
    bar = tqdm(total=len(todo), desc=f"bbm [{model.name}]", unit="item", disable=not progress, dynamic_ncols=True)
    try:
        with table.writer(ANSWERS) as writer:
            for batch in batched(todo, config.flush_every):
                by_key = dict(batch)
                requests = [
                    GenerationRequest(
                        request_id=key,
                        sampling=sampling_for(model, config.sampling,
                                              seed=item_seed(config.sampling.seed, "bbm", model.name, item.id) & 0x7FFFFFFF),
                        messages=(Message("user", build_prompt(item)),),
                    )
                    for key, item in batch
                ]  # fmt: skip
                for result in generator.generate(requests):
                    item = by_key[result.request_id]
                    if result.error or not result.samples:
                        row = answer_row(result.request_id, model.name, item, None, prompt_tokens=result.prompt_tokens,
                                         error=result.error or "no samples returned")  # fmt: skip
                    else:
                        sample = result.samples[0]
                        row = answer_row(result.request_id, model.name, item, sample.text, n_tokens=sample.n_tokens,
                                         finish_reason=sample.finish_reason, prompt_tokens=result.prompt_tokens)  # fmt: skip
                    writer.add(row)
                    written += 1
                writer.flush()  # one committed shard per batch: a kill loses at most one batch
                bar.update(len(batch))
    finally:
        bar.close()
        generator.close()
    return written


def _write_reports(config: BBMConfig, section: Section, run_dir: str | Path | None) -> Path:
    from recovery.report import ReportData, write_report

    meta = {"models": ", ".join(m.name for m in config.models), "tasks": ", ".join(config.data.tasks)}
    paths = write_report(ReportData(meta=meta, sections=(section,), title=config.title, standard=False),
                         Path(config.out) / "report")  # fmt: skip
    if run_dir is not None:
        store_in_run(run_dir, section)
    return Path(paths.html)


def store_in_run(run_dir: str | Path, section: Section, name: str = NAME) -> Path:
    """Store ``section`` as analysis ``name`` of a pipeline run directory and re-render its report."""
    from recovery.pipeline.run import (
        load_run_config_from_dir,
        summary_skips,
        write_run_report,
    )
    from recovery.store import RunDir

    config = load_run_config_from_dir(run_dir)  # refuses a folder that is not a run directory
    save_section(run_dir, name, section)
    run = RunDir(run_dir)
    return write_run_report(run, config, summary_skips(run, Counter()))


# ---------------------------------------------------------------------------------------------- report


def _pct(value: float) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{100 * value:.1f}"


def _frac(k: int, n: int) -> str:
    return f"{k}/{n} ({_pct(k / n)} %)" if n else "–"


def bbm_section(rows: Sequence[Mapping[str, Any]], *, config: BBMConfig | None = None,
                skips: Skips | None = None) -> Section:  # fmt: skip
    """The report section: accuracy per model × task (Table 11 layout), counts and intervals, the reasons
    replies were not usable, the paper's numbers for the same models, and a bar chart."""
    accs = accuracy_table(rows)
    models = list(dict.fromkeys(a.model for a in accs))
    tasks = [t for t in dict.fromkeys(a.task for a in accs) if t != "all"]
    by = {(a.model, a.task): a for a in accs}
    columns = ["Model", *(TASK_TITLES.get(t, t) for t in tasks), "All"]
    main = Table(
        "Error-localisation accuracy (%)",
        columns,
        [(m, *(_pct(by[(m, t)].accuracy) if (m, t) in by else "–" for t in [*tasks, "all"])) for m in models],
        align=["l", *["r"] * (len(columns) - 1)],
        caption="Share of traces whose first mistake (or its absence) the model located; layout of the paper's "
        "Table 11. Unparseable replies and generation errors count as wrong.",
    )
    detail = Table(
        "Counts and 95 % intervals",
        ["Model", "Task", "n", "Correct", "Accuracy (%)", "95 % CI (%)", "Traces with a mistake",
         "Traces without", "Unparseable", "Gen. errors"],
        [
            (a.model, TASK_TITLES.get(a.task, a.task), a.n, a.correct, _pct(a.accuracy),
             f"[{_pct(a.ci_low)}, {_pct(a.ci_high)}]", _frac(a.correct_with_mistake, a.n_with_mistake),
             _frac(a.correct_without_mistake, a.n_without_mistake), a.outcomes.get(UNPARSEABLE, 0),
             a.outcomes.get(GENERATION_ERROR, 0))
            for a in accs
        ],
        align=["l", "l", "r", "r", "r", "r", "r", "r", "r", "r"],
        caption="Wilson score intervals. 'Traces with a mistake': correct step found; 'without': 'no mistake' "
        "answered.",
    )  # fmt: skip
    tables: list[Table] = [main, detail, _outcome_table(rows, models)]
    reasons = _reason_table(rows)
    if reasons is not None:
        tables.append(reasons)
    paper = _paper_table(models, tasks)
    if paper is not None:
        tables.append(paper)
    if skips is not None and skips.total:
        tables.append(Table("Rows left out of the data", ["Reason", "Count", "Examples"],
                            [(r, c, "; ".join(skips.examples.get(r, []))) for r, c in sorted(skips.counts.items())]))  # fmt: skip
    figure = accuracy_figure(accs)
    return Section(
        "BIG-Bench Mistake",
        _prose(rows, config),
        figures=(figure,) if figure is not None else (),
        tables=tuple(tables),
    )


def _prose(rows: Sequence[Mapping[str, Any]], config: BBMConfig | None) -> str:
    sampling = ""
    if config is not None:
        s = config.sampling
        sampling = {
            "greedy": "greedy decoding",
            "recommended": "each model's recommended sampling (model card; per-model overrides applied)",
            "custom": f"T={s.temperature}, top_p={s.top_p}, top_k={s.top_k}",
        }[s.mode] + f", at most {s.max_new_tokens} new tokens, seed {s.seed}"
    return (
        "Each model sees a BIG-Bench Mistake question (Tyen et al., 2024) with its PaLM 2 solution, steps "
        "numbered from 1, and is asked zero-shot for the first incorrect step or 'No mistake' (paper §3, "
        "App. A.3). The paper does not print its prompt; ours is in `recovery.analysis.bbm.build_prompt`. "
        "The final answer is read after the closing think tag: a `\\boxed{}` answer, an 'Answer:' line, a "
        "'first mistake … step N' phrase, or a single step named; anything else is unparseable and counted "
        f"as wrong. {len(rows)} answers"
        + (f"; decoding: {sampling}." if sampling else ".")
    )


def _outcome_table(rows: Sequence[Mapping[str, Any]], models: Sequence[str]) -> Table:
    counts = Counter((r["model"], r["outcome"]) for r in rows)
    present = [o for o in OUTCOMES if any(counts[(m, o)] for m in models)]
    return Table(
        "Outcomes",
        ["Model", *present],
        [(m, *(counts[(m, o)] for o in present)) for m in models],
        align=["l", *["r"] * len(present)],
        caption="missed_mistake: said 'no mistake' on a trace with one; false_alarm: named a step on a trace "
        "without one; step_out_of_range: named a step the solution does not have.",
    )


def _reason_table(rows: Sequence[Mapping[str, Any]]) -> Table | None:
    bad = [r for r in rows if r["outcome"] in (UNPARSEABLE, GENERATION_ERROR)]
    if not bad:
        return None
    groups: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for r in bad:
        # Details carry numbers (step numbers, prompt lengths); without them equal reasons group together.
        reason = re.sub(r"\d+", "N", r["detail"] or "")[:160]
        groups[(r["model"], r["outcome"], reason)].append(r["item_id"])
    return Table(
        "Replies not counted as an answer",
        ["Model", "Outcome", "Reason", "Count", "Example items"],
        [(m, o, reason, len(ids), ", ".join(sorted(ids)[:3])) for (m, o, reason), ids in sorted(groups.items())],
        align=["l", "l", "l", "r", "l"],
        collapsed=True,
    )


def _paper_table(models: Sequence[str], tasks: Sequence[str]) -> Table | None:
    matched = [(m, paper_row_name(m)) for m in models]
    matched = [(m, p) for m, p in matched if p is not None]
    if not matched:
        return None
    return Table(
        "The paper's Table 11 for the same models (%)",
        ["Model", "Paper row", *(TASK_TITLES.get(t, t) for t in tasks)],
        [(m, p, *(f"{PAPER_TABLE11[p][BBM_TASKS.index(t)]:.1f}" if t in BBM_TASKS else "–" for t in tasks))
         for m, p in matched],
        align=["l", "l", *["r"] * len(tasks)],
        caption="Reference only: the paper's prompt, decoding and item subset may differ from this run's.",
    )  # fmt: skip


def accuracy_figure(accs: Sequence[TaskAccuracy]) -> Figure | None:
    """Grouped bars: accuracy per task (and pooled), one bar per model, with 95 % interval whiskers."""
    from recovery.report import figures as rf

    if not accs:
        return None
    models = list(dict.fromkeys(a.model for a in accs))
    tasks = list(dict.fromkeys(a.task for a in accs))
    by = {(a.model, a.task): a for a in accs}
    colors = rf.model_colors(models)
    width = 0.8 / len(models)
    with rf._style():  # the report's fixed rc settings, so every figure looks alike and renders the same
        fig = rf.new_figure(figsize=(max(5.0, 1.1 * len(tasks) + 0.25 * len(models) * len(tasks)), 3.4))
        ax = fig.add_subplot(1, 1, 1)
        for j, model in enumerate(models):
            xs, ys, lo, hi = [], [], [], []
            for i, task in enumerate(tasks):
                a = by.get((model, task))
                if a is None or not a.n:
                    continue
                xs.append(i - 0.4 + width * (j + 0.5))
                ys.append(100 * a.accuracy)
                lo.append(100 * (a.accuracy - a.ci_low))
                hi.append(100 * (a.ci_high - a.accuracy))
            ax.bar(xs, ys, width=width * 0.92, color=colors[model], label=model, yerr=[lo, hi],
                   error_kw={"elinewidth": 0.8, "capsize": 2})  # fmt: skip
        ax.set_xticks(range(len(tasks)))
        ax.set_xticklabels([TASK_TITLES.get(t, "All" if t == "all" else t) for t in tasks])
        ax.set_ylim(0, 100)
        ax.set_ylabel("accuracy (%)")
        ax.set_title("BIG-Bench Mistake: first-mistake localisation")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
        fig.tight_layout()
        png = rf.to_png(fig)
    return Figure("bbm_accuracy", png, "Accuracy per task with 95 % Wilson intervals.")
