"""SFT recovery traces: prompt/completion pairs whose loss falls only on the recovery.

Layout of one row (TRL's *prompt-completion* format, non-conversational)::

    prompt     = <chat template + generation prompt>[<think opener if the template lacks it>]<intervened prefix>
    completion = <the continuation after the prefix, verbatim: rest of the reasoning, </think>, final answer>

``prompt + completion`` is a complete response to the problem. The intervention text sits in the prompt,
so with SFTTrainer's ``completion_only_loss`` the model is trained on the recovery only, never on producing
the disruption. The text is for reading and for the Hub; what trains is the row's token ids
(`recovery.training_data.tokens.sft_token_columns`): ``input_ids`` = the benchmark's own prompt ids, the
completion encoded after a hard boundary, then EOS, with ``completion_mask`` marking completion and EOS.
A row whose prompt exceeds ``max_prompt_tokens`` or whose ids exceed ``max_tokens`` is dropped and counted,
never truncated.

Recoveries come from two sources:

* ``own`` — rejection sampling: the model's own stored continuations whose stored grade is correct;
* ``teacher`` — a `Teacher` (the toy task generator, or a stronger model through any backend)
  continuing the same intervened prefix, graded here.

Both pass the quality filters of `recovery.training_data.quality` (shortest passing candidate per chain
and source). Clean examples (the model's own kept traces, cut at a timestep or from the start) are mixed
in at ``clean_fraction`` of the final rows; everything is decontaminated against evaluation problems
(counted per chain or clean cut removed) and deduplicated on (prompt, completion). Every drop is counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recovery.configs import ConfigError
from recovery.grading.verdict import grade_continuations
from recovery.segment import DEFAULT_MIN_STEPS, STEP_SEPARATOR
from recovery.training_data.clean import FROM_START, CleanCut, clean_count, from_start_completion
from recovery.training_data.decontam import EvalSet
from recovery.training_data.drops import Drops
from recovery.training_data.grpo import Renderers, clean_cuts, dedup_rows, renderer_for, usable_chains
from recovery.training_data.quality import Assessment, Candidate, QualityConfig, final_answer_problem, select
from recovery.training_data.source import RunData, load_run
from recovery.training_data.teachers import Teacher
from recovery.training_data.tokens import STAGE as TOKENS_STAGE
from recovery.training_data.tokens import TokenBudget, sft_token_columns
from recovery.types import Intervened, Problem

SOURCES: tuple[str, ...] = ("own", "teacher")
SFT_COLUMNS: tuple[str, ...] = (
    "prompt",
    "completion",
    "origin",
    "teacher",
    "kind",
    "problem_id",
    "chain_id",
    "trace_id",
    "model",
    "intervention",
    "category",
    "timestep",
    "domain",
    "source",
    "answer",
    "answer_type",
    "sample_index",
    "completion_chars",
    "reference_length",
    "overhead_whole_pct",
    "overhead_remaining_pct",
    "doubt",
    "input_ids",
    "completion_mask",
    "prompt_tokens",
    "completion_tokens",
)


@dataclass
class SFTConfig:
    """What goes into an SFT recovery dataset (see module doc)."""

    # Where recoveries come from: None means the model's own, plus the teacher's when a teacher is given.
    sources: list[str] | None = None
    quality: QualityConfig = field(default_factory=QualityConfig)
    interventions: list[str] | None = None
    categories: list[str] | None = None
    models: list[str] | None = None
    clean_fraction: float = 0.5
    clean_timesteps: list[float] = field(default_factory=lambda: [FROM_START, 0.1, 0.3, 0.5, 0.7, 0.9])
    # When the run has too few clean cuts for ``clean_fraction``, drop recovery rows (seeded) rather than
    # train on a mix with less clean data than asked: a smaller clean share costs clean accuracy.
    keep_clean_fraction: bool = True
    min_steps: int = DEFAULT_MIN_STEPS
    seed: int = 0
    dedup: bool = True
    # Token budgets in the policy's tokens (None: no bound): the prompt, and prompt + completion + EOS (set it
    # to the trainer's ``max_length`` so that TRL never truncates a row).
    max_prompt_tokens: int | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.sources is not None and (not self.sources or set(self.sources) - set(SOURCES)):
            raise ValueError(f"sources must be a non-empty subset of {SOURCES}, got {self.sources}")
        if not 0.0 <= self.clean_fraction < 1.0:
            raise ValueError(f"clean_fraction must lie in [0, 1), got {self.clean_fraction}")
        self.budget  # noqa: B018 - validates the budgets

    @property
    def budget(self) -> TokenBudget:
        return TokenBudget(max_prompt_tokens=self.max_prompt_tokens, max_tokens=self.max_tokens)

    def sources_with(self, teacher: object) -> list[str]:
        """The sources used with ``teacher`` (None: no teacher). A teacher given is used; one asked for but
        not given, or given while ``sources`` leaves it out, is an error rather than silently ignored."""
        if self.sources is None:
            return ["own", "teacher"] if teacher is not None else ["own"]
        if "teacher" in self.sources and teacher is None:
            raise ConfigError("SFTConfig.sources includes 'teacher' but no teacher was given")
        if "teacher" not in self.sources and teacher is not None:
            raise ConfigError(
                f"a teacher was given but SFTConfig.sources is {self.sources}; add 'teacher' or leave sources unset"
            )
        return list(self.sources)


@dataclass
class SFTResult:
    """The dataset, every drop with its reason, and summary counts (for the dataset card)."""

    dataset: Any
    drops: Drops
    counts: dict[str, Any]


def own_candidates(data: RunData, chains: Sequence[Intervened], renderers: Renderers, drops: Drops) -> list[Candidate]:
    """Rejection sampling: every stored continuation of the chains, with its stored grade."""
    out = []
    for chain in chains:
        samples = data.continuations.get(chain.id, [])
        if not samples:
            drops.add("own", "no_continuations")
        spec = renderer_for(renderers, chain.model).spec
        for sample in samples:
            correct = None if sample.verdict is None else sample.correct
            out.append(
                Candidate(
                    chain,
                    data.problems[chain.problem_id],
                    sample.text,
                    "own",
                    correct,
                    sample.sample_index,
                    spec.think_open,
                    spec.think_close,
                )
            )
    return out


def teacher_candidates(
    data: RunData,
    chains: Sequence[Intervened],
    renderers: Renderers,
    teacher: Teacher,
    drops: Drops,
    grader: Any = None,
) -> list[Candidate]:
    """Teacher continuations of the chains' prefixes, graded here."""
    problems = [data.problems[c.problem_id] for c in chains]
    texts = teacher.continue_prefixes([(p, c.prefix) for p, c in zip(problems, chains, strict=True)])
    flat: list[tuple[Intervened, Problem, int, str]] = []
    for chain, problem, outputs in zip(chains, problems, texts, strict=True):
        if not outputs:
            drops.add("teacher", "no_output")
        flat.extend((chain, problem, i, text) for i, text in enumerate(outputs))
    specs = {c.model: renderer_for(renderers, c.model).spec for c in chains}
    # The benchmark's verdict (`recovery.grading.verdict`); a recovery to train on must close its reasoning, with
    # the tags of the model whose chain it continues.
    grades: list = [None] * len(flat)
    for model, spec in specs.items():
        mine = [i for i, item in enumerate(flat) if item[0].model == model]
        graded = grade_continuations([(flat[i][3], flat[i][1]) for i in mine], grader, tags=spec.think_tags)
        for i, grade in zip(mine, graded, strict=True):
            grades[i] = grade
    out = []
    for (chain, problem, index, text), grade in zip(flat, grades, strict=True):
        spec = specs[chain.model]
        out.append(Candidate(chain, problem, text, "teacher", grade.correct, index, spec.think_open, spec.think_close))
    return out


def _recovery_row(candidate: Candidate, result: Assessment, renderers: Renderers, teacher_name: str) -> dict[str, Any]:
    chain, problem = candidate.chain, candidate.problem
    overhead = result.overhead
    return {
        "prompt": renderer_for(renderers, chain.model).render(problem, chain.prefix),
        "completion": candidate.completion,
        "origin": candidate.origin,
        "teacher": teacher_name if candidate.origin == "teacher" else "",
        "kind": "recovery",
        "problem_id": problem.id,
        "chain_id": chain.id,
        "trace_id": chain.trace_id,
        "model": chain.model,
        "intervention": chain.intervention,
        "category": str(chain.category),
        "timestep": float(chain.target_t),
        "domain": problem.domain,
        "source": problem.source,
        "answer": problem.answer,
        "answer_type": str(problem.answer_type),
        "sample_index": candidate.sample_index,
        "completion_chars": len(candidate.completion),
        "reference_length": chain.original_reasoning_chars - chain.original_prefix_chars,
        "overhead_whole_pct": overhead.whole_pct if overhead else None,
        "overhead_remaining_pct": overhead.remaining_pct if overhead else None,
        "doubt": result.doubt or "",
    }


def _clean_row(cut: CleanCut, problem: Problem, prompt: str, completion: str) -> dict[str, Any]:
    trace = cut.trace
    return {
        "prompt": prompt,
        "completion": completion,
        "origin": "clean",
        "teacher": "",
        "kind": "clean",
        "problem_id": problem.id,
        "chain_id": cut.id,
        "trace_id": trace.id,
        "model": trace.model,
        "intervention": "none",
        "category": "clean",
        "timestep": float(cut.target_t),
        "domain": problem.domain,
        "source": problem.source,
        "answer": problem.answer,
        "answer_type": str(problem.answer_type),
        "sample_index": 0,
        "completion_chars": len(completion),
        "reference_length": cut.reference_length,
        "overhead_whole_pct": 0.0,
        "overhead_remaining_pct": 0.0,
        "doubt": "",
    }


def _clean_rows(
    data: RunData,
    renderers: Renderers,
    config: SFTConfig,
    eval_set,
    drops: Drops,
    n: int,
    taken: set[str],
    teacher: Teacher | None = None,
) -> list[dict[str, Any]]:
    """Clean rows cut from the run's traces: the model's own bytes after the cut, or, for a teacher that
    writes the clean examples too (``writes_clean``: its style is not the model's), the teacher's
    continuation of the same prefix (from the start: of the trace's opening paragraph)."""
    rows: list[dict[str, Any]] = []
    rewrite = teacher if getattr(teacher, "writes_clean", False) else None

    def accept(cut: CleanCut) -> bool:
        problem = data.problems[cut.trace.problem_id]
        renderer = renderer_for(renderers, cut.trace.model)
        trace = cut.trace
        # The same structural checks as recoveries: a clean example must not teach another format.
        if not trace.closed:
            drops.add("clean", "unclosed_trace")
            return False
        if config.quality.single_think_close and trace.text.count(trace.think_close) != 1:
            drops.add("clean", "think_close_count")
            return False
        if config.quality.final_answer_at_end and (reason := final_answer_problem(trace.answer_text)):
            drops.add("clean", reason)
            return False
        prompt = renderer.render(problem, cut.prefix)
        completion = cut.completion
        if cut.target_t == FROM_START:
            completion = from_start_completion(cut, renderer.tail(problem, ""))
            if completion is None:
                drops.add("clean", "opener_mismatch")
                return False
        if rewrite is not None:
            opening = completion.split(STEP_SEPARATOR, 1)[0] if cut.target_t == FROM_START else ""
            completion = opening + rewrite(problem, cut.prefix or opening)
        key = prompt + "\x00" + completion
        if config.dedup and key in taken:
            drops.add("dedup", "duplicate")
            return False
        tokens = sft_token_columns(renderer, problem, cut.prefix, completion, config.budget)
        if isinstance(tokens, str):
            drops.add(TOKENS_STAGE, tokens)
            return False
        taken.add(key)
        rows.append(_clean_row(cut, problem, prompt, completion) | tokens)
        return True

    clean_cuts(data, renderers, config, eval_set, drops, n, accept)
    return rows


def sft_rows(
    run: str | Path | RunData,
    renderers: Renderers,
    config: SFTConfig | None = None,
    *,
    teacher: Teacher | None = None,
    eval_set: EvalSet | None = None,
    grader: Any = None,
) -> tuple[list[dict[str, Any]], Drops, dict[str, Any]]:
    """The rows, drops and counts of `build_sft_dataset`."""
    config = config or SFTConfig()
    sources = config.sources_with(teacher)
    data = load_run(run)
    drops = Drops()
    chains = usable_chains(data, renderers, config, eval_set, drops)
    candidates: list[Candidate] = []
    if "own" in sources:
        candidates += own_candidates(data, chains, renderers, drops)
    if "teacher" in sources:
        candidates += teacher_candidates(data, chains, renderers, teacher, drops, grader)
    teacher_name = getattr(teacher, "name", "") if teacher is not None else ""
    selected = select(candidates, config.quality, drops)
    rows = [_recovery_row(c, r, renderers, teacher_name) for c, r in selected]
    if config.dedup:
        rows = dedup_rows(rows, ("prompt", "completion"), drops)
    rows = _tokenized(rows, data, renderers, config.budget, drops)
    n_recovery = len(rows)
    wanted_clean = clean_count(n_recovery, config.clean_fraction)
    taken = {r["prompt"] + "\x00" + r["completion"] for r in rows}
    clean = _clean_rows(data, renderers, config, eval_set, drops, wanted_clean, taken, teacher)
    if config.keep_clean_fraction and 0 < len(clean) < wanted_clean:
        rows = _trim_to_fraction(rows, len(clean), config, drops)
        n_recovery = len(rows)
    rows += clean
    counts = {
        "chains": len(chains),
        "candidates": len(candidates),
        "recovery_rows": n_recovery,
        "clean_rows": len(rows) - n_recovery,
        "clean_wanted": wanted_clean,
        "rows": len(rows),
        "by_origin": dict(sorted(Counter(r["origin"] for r in rows).items())),
        "by_intervention": dict(sorted(Counter(r["intervention"] for r in rows).items())),
        "candidates_by_origin": dict(sorted(Counter(c.origin for c in candidates).items())),
    }
    return rows, drops, counts


def _tokenized(rows: list[dict[str, Any]], data: RunData, renderers: Renderers, budget: TokenBudget, drops: Drops):
    """The recovery ``rows`` with their token columns; rows over ``budget`` dropped and counted."""
    chains = {c.id: c for c in data.chains}
    out = []
    for row in rows:
        chain = chains[row["chain_id"]]
        renderer = renderer_for(renderers, chain.model)
        tokens = sft_token_columns(renderer, data.problems[chain.problem_id], chain.prefix, row["completion"], budget)
        if isinstance(tokens, str):
            drops.add(TOKENS_STAGE, tokens)
        else:
            out.append(row | tokens)
    return out


def _trim_to_fraction(
    rows: list[dict[str, Any]], n_clean: int, config: SFTConfig, drops: Drops
) -> list[dict[str, Any]]:
    """A seeded subset of the recovery ``rows`` that makes ``n_clean`` clean rows ``clean_fraction`` of the
    whole; kept rows stay in their original order, dropped ones are counted."""
    import random

    keep = max(1, round(n_clean * (1.0 - config.clean_fraction) / config.clean_fraction))
    if keep >= len(rows):
        return rows
    chosen = sorted(random.Random(config.seed).sample(range(len(rows)), keep))
    drops.add("mix", "over_clean_fraction", len(rows) - keep)
    return [rows[i] for i in chosen]


def build_sft_dataset(
    run: str | Path | RunData, renderers: Renderers, config: SFTConfig | None = None, **options: Any
) -> SFTResult:
    """SFT recovery traces from a run directory (see module doc for the row layout): `sft_rows` as a dataset.

    ``renderers``: the student's `PromptRenderer` (or one per model name). ``options``: those of `sft_rows`
    — ``teacher`` (used when given, `SFTConfig.sources_with`), ``eval_set`` (problems kept out) and
    ``grader`` (anything with ``grade_parts([(answer part, problem)])``, e.g. `recovery.grading.Grader`, for teacher
    outputs; default grades in-process). Returns an `SFTResult`.
    """
    from datasets import Dataset

    rows, drops, counts = sft_rows(run, renderers, config, **options)
    dataset = Dataset.from_list(rows) if rows else Dataset.from_dict({c: [] for c in SFT_COLUMNS})
    return SFTResult(dataset, drops, counts)
