"""A small, real toy-world run directory built by hand, and the tiny reasoner's tokenizer.

The run holds toy problems, their generated traces (all kept), every toy intervention at two timesteps,
and three hand-made continuations per chain: the toy teacher's correct recovery (sample 0), the same with
a wrong final answer (sample 1, graded wrong) and the same with a second closing tag (sample 2, graded
correct but malformed). No model is needed to build training data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("datasets")
pytest.importorskip("transformers")

INTERVENTIONS = (
    "toy/complete_step", "toy/paraphrase", "toy/random_characters", "toy/wikipedia_text",
    "toy/wrong_continuation", "toy/hallucinated_fact", "toy/unrelated_cot",
)  # fmt: skip
TIMESTEPS = (0.3, 0.7)
N_PROBLEMS = 6
MODEL = "tiny-reasoner"


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


def wrong_answer(text: str) -> str:
    """The same continuation with another boxed answer."""
    head, _, tail = text.rpartition("\\boxed{")
    return head + "\\boxed{" + "999" + tail[tail.index("}") :]


def build_toy_run(path: Path, n_problems: int = N_PROBLEMS) -> ToyRun:
    from recovery.configs import to_mapping
    from recovery.grading import grade_response
    from recovery.interventions import intervene
    from recovery.pipeline import records
    from recovery.pipeline.config import DatasetConfig, InterventionsConfig, ModelConfig, RunConfig
    from recovery.store import RunDir
    from recovery.toy import generate_problems, recovery_continuation, write_trace
    from recovery.types import Continuation

    run = RunDir(path)
    run.path.mkdir(parents=True, exist_ok=True)
    config = RunConfig(
        run_dir=str(path), dataset=DatasetConfig(name="toy", limit=n_problems), models=[ModelConfig(name=MODEL)],
        interventions=InterventionsConfig(names=list(INTERVENTIONS), timesteps=list(TIMESTEPS)),
    )  # fmt: skip
    run.file("config.json").write_text(json.dumps(to_mapping(config), indent=2, sort_keys=True, default=str))
    problems = generate_problems(n_problems, seed=0)
    traces = [write_trace(p, slip_rate=0.0).as_trace(MODEL) for p in problems]
    chains = [(p, intervene(p, t, name, x, seed=0)) for p, t in zip(problems, traces, strict=True)
              for name in INTERVENTIONS for x in TIMESTEPS]  # fmt: skip
    with run.table("problems").writer(records.PROBLEMS) as w:
        w.add_many(records.problem_row(p) for p in problems)
    with run.table("traces").writer(records.TRACES) as w:
        w.add_many(records.trace_row(t) for t in traces)
    with run.table("kept").writer(records.KEPT) as w:
        w.add_many({"id": t.id, "model": MODEL, "problem_id": t.problem_id, "kept": True, "reason": "kept"}
                   for t in traces)  # fmt: skip
    with run.table("chains").writer(records.CHAINS) as w:
        w.add_many(records.chain_row(c) for _, c in chains)
    conts, grades = [], []
    for problem, chain in chains:
        good = recovery_continuation(problem, chain.prefix).text
        two_closes = good.replace("</think>", "</think>\n</think>", 1)
        for i, text in enumerate((good, wrong_answer(good), two_closes)):
            cont = Continuation(chain.id, i, text, None, "stop", MODEL)
            conts.append(records.continuation_row(cont, problem.id, 10, 10))
            grades.append(records.grade_row(cont.id, chain.id, grade_response(text, problem)))
    with run.table("continuations").writer(records.CONTINUATIONS) as w:
        w.add_many(conts)
    with run.table("grades").writer(records.GRADES) as w:
        w.add_many(grades)
    return ToyRun(path, problems, traces, chains)


@pytest.fixture(scope="session")
def toy_run(tmp_path_factory) -> ToyRun:
    return build_toy_run(tmp_path_factory.mktemp("toy_run") / "run")


@pytest.fixture(scope="session")
def toy_tokenizer():
    """The shipped tiny reasoner's tokenizer, or one trained here the same way (≈1 s)."""
    from recovery.toy import checkpoint_dir, has_checkpoint

    if has_checkpoint():
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(checkpoint_dir()))
    from recovery.toy.dataset import tokenizer_corpus, training_traces
    from recovery.toy.interventions import intervention_corpus
    from recovery.toy.tokenizer import train_tokenizer

    return train_tokenizer(tokenizer_corpus(training_traces(200, seed=0), extra=intervention_corpus()))


@pytest.fixture(scope="session")
def renderer(toy_tokenizer):
    from recovery.models import get_spec
    from recovery.training_data import PromptRenderer

    return PromptRenderer(toy_tokenizer, get_spec(MODEL))
