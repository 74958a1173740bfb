"""Shared fixtures of the training tests: the toy tokenizer, a tiny random Llama saved like a checkpoint, and
a small toy-world benchmark run directory (problems, kept traces, chains, graded continuations, aggregates)
built by `toy_runs.build_toy_run` (tests/toy_runs.py) without running a model; and W&B in offline mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from toy_runs import ToyRunSpec  # tests/toy_runs.py, on sys.path through the root conftest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("datasets")

# Sample 0 of every chain is the teacher's correct recovery and sample 1 the same with a wrong answer, so
# "own" SFT recoveries exist and every chain recovers in K = 1 of N = 2 samples; aggregated for W&B logging.
TOY_RUN = ToyRunSpec(
    interventions=("toy/wrong_continuation", "toy/random_characters"),
    variants=("teacher", "wrong_answer"),
    aggregate=True,
)


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

    shape = TinyModelArguments(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2, intermediate_size=64
    )
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


@dataclass(frozen=True)
class TrainingRun:
    """The shared toy run as these tests read it: ``chains`` are the bare `Intervened` chains."""

    path: Path
    problems: list
    chains: list


@pytest.fixture(scope="session")
def toy_run(toy_run_for) -> TrainingRun:
    run = toy_run_for(TOY_RUN)
    return TrainingRun(run.path, run.problems, [c for _, c in run.chains])


RECIPES = Path(__file__).resolve().parents[2] / "recipes"


@pytest.fixture(scope="session")
def recipes() -> Path:
    return RECIPES


@pytest.fixture
def offline_wandb(tmp_path, monkeypatch):
    """W&B in offline mode writing under ``tmp_path`` (yielded), its process-wide state torn down before and
    after (wandb keeps its settings process-wide: each test starts from its own environment)."""
    wandb = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_PROJECT", "recovery-tests")
    wandb.teardown()
    yield tmp_path
    if wandb.run is not None:
        wandb.finish()
    wandb.teardown()
