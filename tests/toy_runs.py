"""Small, real toy-world run directories built by hand, for the training and training-data tests.

A run holds toy problems, their generated traces (all kept), the spec's interventions at each timestep,
and one hand-made continuation per chain and variant, graded by the real grader: ``teacher`` (the toy
teacher's correct recovery), ``wrong_answer`` (the same with another boxed answer, graded wrong) and
``two_closes`` (the same with a second closing tag, graded correct but malformed). Everything is written
with the pipeline's own record functions and column builders; no model runs.

Imported as a top-level module: pytest's default ``prepend`` import mode puts ``tests/`` (the folder of
the root conftest, which has no ``__init__.py``) on ``sys.path``. The ``toy_run_for`` fixture in
``tests/conftest.py`` builds each spec once per session.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MODEL = "tiny-reasoner"


def wrong_answer(text: str) -> str:
    """The same continuation with another boxed answer."""
    head, _, tail = text.rpartition("\\boxed{")
    return head + "\\boxed{999" + tail[tail.index("}") :]


def two_closes(text: str) -> str:
    """The same continuation with its closing tag doubled (correct answer, malformed trace)."""
    return text.replace("</think>", "</think>\n</think>", 1)


#: Continuation variants by name; a chain's sample ``i`` is the spec's ``variants[i]``.
VARIANTS: dict[str, Callable[[str], str]] = {
    "teacher": lambda text: text,
    "wrong_answer": wrong_answer,
    "two_closes": two_closes,
}


@dataclass(frozen=True)
class ToyRunSpec:
    """What a toy run holds. Hashable: runs are cached per spec for the session."""

    interventions: tuple[str, ...]
    timesteps: tuple[float, ...] = (0.3, 0.7)
    n_problems: int = 6
    variants: tuple[str, ...] = ("teacher", "wrong_answer")
    aggregate: bool = False  # also run the aggregate stage and write clean_accuracy.json (all correct)


@dataclass
class ToyRun:
    path: Path
    problems: list
    traces: list
    chains: list  # (problem, Intervened)

    def problem(self, problem_id):
        return next(p for p in self.problems if p.id == problem_id)

    def trace(self, trace_id):
        return next(t for t in self.traces if t.id == trace_id)


def build_toy_run(path: Path, spec: ToyRunSpec) -> ToyRun:
    """Write the run ``spec`` describes under ``path`` (see the module docstring)."""
    from recovery.generation import GenerationResult, Sample
    from recovery.grading import grade_response
    from recovery.interventions import intervene
    from recovery.model_config import ModelConfig
    from recovery.pipeline.aggregate import aggregate_run
    from recovery.pipeline.continuation_work import ContinuationBatch
    from recovery.pipeline.grade_workers import grade_columns
    from recovery.run_config import DatasetConfig, InterventionsConfig, RunConfig
    from recovery.run_dir import records, write_clean_accuracy, write_manifest
    from recovery.store import RunDir
    from recovery.toy import generate_problems, recovery_continuation, write_trace

    unknown = sorted(set(spec.variants) - set(VARIANTS))
    if unknown:
        raise ValueError(f"unknown continuation variant(s) {unknown}; known: {', '.join(VARIANTS)}")
    run = RunDir(path)
    run.path.mkdir(parents=True, exist_ok=True)
    config = RunConfig(
        run_dir=str(path),
        dataset=DatasetConfig(name="toy", limit=spec.n_problems),
        models=[ModelConfig(name=MODEL)],
        interventions=InterventionsConfig(names=list(spec.interventions), timesteps=list(spec.timesteps)),
    )
    write_manifest(run, config)
    problems = generate_problems(spec.n_problems, seed=0)
    traces = [write_trace(p, slip_rate=0.0).as_trace(MODEL) for p in problems]
    chains = [
        (p, intervene(p, t, name, x, seed=0))
        for p, t in zip(problems, traces, strict=True)
        for name in spec.interventions
        for x in spec.timesteps
    ]
    with run.table(records.PROBLEMS_TABLE).writer(records.PROBLEMS) as w:
        w.add_many(records.problem_row(p) for p in problems)
    with run.table(records.TRACES_TABLE).writer(records.TRACES) as w:
        w.add_many(records.trace_row(t) for t in traces)
    with run.table(records.KEPT_TABLE).writer(records.KEPT) as w:
        w.add_many(
            {"id": t.id, "model": MODEL, "problem_id": t.problem_id, "kept": True, "reason": "kept"} for t in traces
        )
    with run.table(records.CHAINS_TABLE).writer(records.CHAINS) as w:
        w.add_many(records.chain_row(c) for _, c in chains)
    continuations = ContinuationBatch(MODEL)
    grades = []
    for problem, chain in chains:
        good = recovery_continuation(problem, chain.prefix).text
        texts = [VARIANTS[variant](good) for variant in spec.variants]
        samples = tuple(Sample(text, None, "stop") for text in texts)
        continuations.add(GenerationResult(chain.id, samples, prompt_tokens=10, prefilled_tokens=10), problem.id, texts)
        grades += [grade_response(text, problem) for text in texts]
    arrays = continuations.to_arrow()
    with run.table(records.CONTINUATIONS_TABLE).writer(records.CONTINUATIONS) as w:
        w.add_columns({name: arrays.column(name) for name in records.CONTINUATIONS.names})
    with run.table(records.GRADES_TABLE).writer(records.GRADES) as w:
        ids, chain_ids = arrays.column("id").to_pylist(), arrays.column("chain_id").to_pylist()
        w.add_columns(grade_columns(ids, chain_ids, grades, [None] * len(grades), "rule"))
    if spec.aggregate:
        aggregate_run(run, n_boot=100)
        write_clean_accuracy(run, [{"model": MODEL, "domain": "toy", "n": spec.n_problems, "accuracy": 1.0}])
    return ToyRun(path, problems, traces, chains)


class ToyRunCache:
    """Toy runs by spec, each built on first request in its own temporary folder and reused after."""

    def __init__(self, tmp_path_factory) -> None:
        self._tmp = tmp_path_factory
        self._runs: dict[ToyRunSpec, ToyRun] = {}

    def __call__(self, spec: ToyRunSpec) -> ToyRun:
        if spec not in self._runs:
            self._runs[spec] = build_toy_run(self._tmp.mktemp("toy_run") / "run", spec)
        return self._runs[spec]
