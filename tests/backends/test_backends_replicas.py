"""HF data parallelism on CPU: tiny-reasoner replicas in worker processes give the single replica's samples."""

from __future__ import annotations

import pytest

from recovery.backends.registry import make_generator
from recovery.generation import GenerationRequest, Message, SamplingParams
from recovery.model_config import ModelConfig


def _requests() -> list[GenerationRequest]:
    questions = [f"Start with {i}. Step A: add 3. Step B: subtract 1. What is the final number?" for i in range(6)]
    return [
        GenerationRequest(
            f"r{i}",
            sampling=SamplingParams(n=3, temperature=0.6, top_p=0.95, seed=100 + i, max_new_tokens=40),
            messages=(Message("user", q),),
            prefill="Okay.",
        )
        for i, q in enumerate(questions)
    ]


@pytest.fixture(scope="module")
def replicated():
    generator = make_generator(ModelConfig(name="tiny-reasoner", settings={"data_parallel_size": 2}), seed=3)
    yield generator
    generator.close()


def test_replicas_match_one_process_sample_for_sample(replicated):
    single = make_generator(ModelConfig(name="tiny-reasoner"), seed=3)
    expected = {r.request_id: [s.text for s in r.samples] for r in single.generate(_requests())}
    got = [(r.request_id, [s.text for s in r.samples]) for r in replicated.generate(_requests())]
    assert [rid for rid, _ in got] == [f"r{i}" for i in range(6)]  # request order kept across replicas
    assert dict(got) == expected
    assert all(len(texts) == 3 for _, texts in got)


def test_replicas_expose_the_model_conventions_and_close(replicated):
    assert replicated.spec is not None and replicated.spec.name == "tiny-reasoner"
    assert replicated.name == "tiny-reasoner"
    assert list(replicated.generate([])) == []


def test_a_closed_generator_refuses_work():
    generator = make_generator(ModelConfig(name="tiny-reasoner", settings={"data_parallel_size": 2}))
    generator.close()
    with pytest.raises(RuntimeError, match="closed"):
        list(generator.generate(_requests()))


def test_a_replica_started_while_its_parent_draws_no_bars_loads_its_model_without_one(capfd):
    """`recovery run --no-progress` turns the libraries' bars off (`library_bars_off`); a replica process it
    starts loads its model without transformers' "Loading weights" bar on the shared stderr either."""
    from recovery.backends.replicas import ReplicatedGenerator
    from recovery.library_bars import library_bars_off

    capfd.readouterr()
    with library_bars_off():
        generator = ReplicatedGenerator(make_generator, (ModelConfig(name="tiny-reasoner"),), replicas=1)
        generator.close()  # started: it answered for its spec, after loading its model
    assert "Loading weights" not in capfd.readouterr().err
