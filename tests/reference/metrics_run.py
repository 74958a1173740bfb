"""A run directory holding what the authors' scripts produced for the metric pieces (``data/metrics.json``,
written by ``make_metrics.py``): their traces, their intervened chains (prefix and intervention text as
their code wrote them) and the fixed continuations, so that this project's stages and analyses run on the
same texts. Grades, when asked for, are the authors' judge replies read by this project's reference judge.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path
from typing import Any

from recovery.grading.judge import reference_prompt
from recovery.ids import content_id
from recovery.model_config import ModelConfig
from recovery.run_config import DatasetConfig, GradingConfig, InterventionsConfig, RunConfig
from recovery.run_dir import records, write_manifest
from recovery.store import RunDir
from recovery.types import Continuation, Intervened, Problem, Trace
from reference.inputs import load
from run_rows import add_grades, continuation_row

CATEGORY = {
    "complete_step": "benign",
    "paraphrase": "benign",
    "wikipedia_text": "neutral",
    "random_characters": "neutral",
    "wrong_continuation": "adversarial",
    "hallucinated_fact": "adversarial",
    "unrelated_cot": "adversarial",
}


def sha(text: str) -> str:
    """The SHA-256 hex digest ``make_metrics.py`` stores for a text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@cache
def data() -> dict[str, Any]:
    """The stored outputs of the authors' scripts."""
    return load("metrics")


def continuation_texts(chain: dict) -> list[str]:
    """The continuations of one stored chain, as their runner returned them (stripped)."""
    return [data()["continuation_texts"][digest] for digest in chain["continuations"]]


def problem_of(trace: dict) -> Problem:
    """The trace's problem as this project stores it: the bare question (the instruction is the prompt's)."""
    return Problem("math", trace["raw_question"], trace["answer"], "numeric", "reference-fixture", id=trace["id"])


def trace_of(trace: dict) -> Trace:
    text = trace["answer_content"]
    reasoning, _, answer = text.removeprefix("<think>").partition("</think>")
    return Trace(trace["id"], data()["model"], text, reasoning, answer, True, id=f"trace-{trace['id']}")


def intervened(chain: dict, trace: dict) -> Intervened:
    """One of their chains as this project's record: the prefix and inserted text as their code wrote them
    (what the reference interventions produce), the original lengths from the trace's reasoning."""
    reasoning = trace_of(trace).reasoning
    kept_steps = "\n\n".join(reasoning.split("\n\n")[: chain["cutoff_index"] + 1])
    return Intervened(
        trace_id=f"trace-{trace['id']}",
        problem_id=trace["id"],
        model=data()["model"],
        intervention=chain["intervention"],
        category=CATEGORY[chain["intervention"]],
        target_t=chain["target_t"],
        actual_t=chain["target_t"],
        cut_index=chain["cutoff_index"],
        n_steps=len(reasoning.split("\n\n")),
        prefix=chain["prefix"],
        inserted_text=chain["intervention_text"],
        original_prefix_chars=len(kept_steps),
        original_reasoning_chars=len(reasoning),
        id=content_id("reference-chain", trace["id"], chain["intervention"], chain["target_t"]),
    )


def run_config(path: Path, protocol: str, *, judge: bool = False, parts: dict[str, str] | None = None) -> RunConfig:
    grading = GradingConfig(judge=ModelConfig(name="judge")) if judge else GradingConfig()
    return RunConfig(
        run_dir=str(path),
        dataset=DatasetConfig(name="toy"),
        models=[ModelConfig(name=data()["model"])],
        interventions=InterventionsConfig(names=list(CATEGORY), timesteps=[0.1, 0.3, 0.5, 0.7, 0.9]),
        grading=grading,
        cpu_workers=1,
        protocol=protocol,
        protocol_parts=dict(parts or {}),
    )


def build_run(path: Path, protocol: str = "reference", *, grades: bool = True, manifest: bool = True) -> RunDir:
    """Write the run directory: problems, traces, chains, continuations (the stored texts), and the grades the
    authors' judge replies give under this project's reference judge (``grades``)."""
    run = RunDir(path)
    path.mkdir(parents=True, exist_ok=True)
    if manifest:
        write_manifest(run, run_config(path, protocol))
    traces = {t["id"]: t for t in data()["traces"]}
    with run.table(records.PROBLEMS_TABLE).writer(records.PROBLEMS) as w:
        w.add_many(records.problem_row(problem_of(t)) for t in traces.values())
    with run.table(records.TRACES_TABLE).writer(records.TRACES) as w:
        w.add_many(records.trace_row(trace_of(t)) for t in traces.values())
    chains = [(c, intervened(c, traces[c["trace_id"]])) for c in data()["chains"]]
    with run.table(records.CHAINS_TABLE).writer(records.CHAINS) as w:
        w.add_many(records.chain_row(iv) for _, iv in chains)
    with run.table(records.CONTINUATIONS_TABLE).writer(records.CONTINUATIONS) as w:
        for chain, iv in chains:
            for i, text in enumerate(continuation_texts(chain)):
                w.add(continuation_row(Continuation(iv.id, i, text, None, "stop", iv.model), iv.problem_id))
    if grades:
        parse = reference_prompt().parse
        with run.table(records.GRADES_TABLE).writer(records.GRADES) as w:
            for chain, iv in chains:
                ids = [Continuation(iv.id, i, "").id for i in range(len(chain["completions"]))]
                add_grades(w, ids, [iv.id] * len(ids), [parse(c["judge_reply"]) for c in chain["completions"]])
    return run
