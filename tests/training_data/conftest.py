"""Fixtures of the training-data tests: a small, real toy-world run directory and the tiny reasoner's tokenizer.

The run (`toy_runs.build_toy_run`, tests/toy_runs.py) holds every toy intervention at two timesteps and three
hand-made continuations per chain: the toy teacher's correct recovery (sample 0), the same with a wrong
final answer (sample 1, graded wrong) and the same with a second closing tag (sample 2, graded correct but
malformed). No model is needed to build training data.
"""

from __future__ import annotations

import pytest

from toy_runs import MODEL, ToyRun, ToyRunSpec  # tests/toy_runs.py, on sys.path through the root conftest

pytest.importorskip("datasets")
pytest.importorskip("transformers")

TOY_RUN = ToyRunSpec(
    interventions=(
        "toy/complete_step",
        "toy/paraphrase",
        "toy/random_characters",
        "toy/wikipedia_text",
        "toy/wrong_continuation",
        "toy/hallucinated_fact",
        "toy/unrelated_cot",
    ),
    variants=("teacher", "wrong_answer", "two_closes"),
)


@pytest.fixture(scope="session")
def toy_run(toy_run_for) -> ToyRun:
    return toy_run_for(TOY_RUN)


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
