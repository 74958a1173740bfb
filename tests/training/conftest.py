"""Shared fixtures of the training tests: the toy tokenizer, a tiny random Llama saved like a checkpoint, and
a small toy-world benchmark run directory (problems, kept traces, chains, graded continuations, aggregates).

The run is written with the pipeline's own record functions; its continuations are the toy teacher's
correct recovery (sample 0) and the same with a wrong final answer (sample 1), so "own" SFT recoveries
exist without running a model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("datasets")

INTERVENTIONS = ("toy/wrong_continuation", "toy/random_characters")
TIMESTEPS = (0.3, 0.7)
MODEL = "tiny-reasoner"


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    """One torch thread: on a busy 2-core machine two OpenMP threads slow these tiny models down a lot."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def toy_tokenizer():
    from recovery.toy.dataset import tokenizer_corpus, training_traces
    from recovery.toy.interventions import intervention_corpus
    from recovery.toy.tokenizer import train_tokenizer

    return train_tokenizer(tokenizer_corpus(training_traces(200, seed=0), extra=intervention_corpus()))


def tiny_llama(tokenizer, seed: int = 0):
    from recovery.toy.model import TinyModelArguments, build_model

    shape = TinyModelArguments(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                               intermediate_size=64)  # fmt: skip
    return build_model(tokenizer, shape, seed=seed)


@pytest.fixture
def tiny_model(toy_tokenizer):
    return tiny_llama(toy_tokenizer)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, toy_tokenizer) -> Path:
    """A tiny random Llama with the toy tokenizer, saved as a checkpoint folder (loadable by path)."""
    path = tmp_path_factory.mktemp("tiny_model")
    model = tiny_llama(toy_tokenizer)
    model.save_pretrained(str(path))
    toy_tokenizer.save_pretrained(str(path))
    return path


def wrong_answer(text: str) -> str:
    head, _, tail = text.rpartition("\\boxed{")
    return head + "\\boxed{999" + tail[tail.index("}") :]


@dataclass
class ToyRun:
    path: Path
    problems: list
    chains: list


def build_toy_run(path: Path, n_problems: int = 6) -> ToyRun:
    from recovery.configs import to_mapping
    from recovery.grading import grade_response
    from recovery.interventions import intervene
    from recovery.pipeline import records
    from recovery.pipeline.aggregate import stage_aggregate
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
        for i, text in enumerate((good, wrong_answer(good))):
            cont = Continuation(chain.id, i, text, None, "stop", MODEL)
            conts.append(records.continuation_row(cont, problem.id, 10, 10))
            grades.append(records.grade_row(cont.id, chain.id, grade_response(text, problem)))
    with run.table("continuations").writer(records.CONTINUATIONS) as w:
        w.add_many(conts)
    with run.table("grades").writer(records.GRADES) as w:
        w.add_many(grades)
    stage_aggregate(run, n_boot=100)
    clean = [{"model": MODEL, "domain": "toy", "n": n_problems, "accuracy": 1.0}]
    run.file("clean_accuracy.json").write_text(json.dumps(clean))
    return ToyRun(path, problems, [c for _, c in chains])


@pytest.fixture(scope="session")
def toy_run(tmp_path_factory) -> ToyRun:
    return build_toy_run(tmp_path_factory.mktemp("toy_run") / "run")


RECIPES = Path(__file__).resolve().parents[2] / "recipes"


@pytest.fixture(scope="session")
def recipes() -> Path:
    return RECIPES
