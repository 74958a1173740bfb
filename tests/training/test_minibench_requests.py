"""The mini-benchmark on a run's own chains sends exactly the requests the run's continuations stage sent
(messages, prefill, prompt style, sampling, seed, window), under the project's protocol and the authors'
(issue 38: the callback's mini-benchmark on a ``protocol: reference`` run dropped the authors' system prompt
and prompt style, so its step-0 figures were not the run's).

A tiny toy run is made by the real pipeline with the tiny reasoner; the continuations stage's requests are
recorded by a generator that wraps the real backend and keeps what it is asked."""

from __future__ import annotations

import dataclasses
import json

import pytest

from recording import Recording  # tests/recording.py
from recovery.model_config import ModelConfig
from recovery.pipeline import run_pipeline
from recovery.plan import plan_for
from recovery.run_config import (
    DatasetConfig,
    FilterConfig,
    InterventionsConfig,
    RunConfig,
    SamplingConfig,
    TracesConfig,
)
from recovery.training.minibench import MiniBench, MiniBenchConfig


def as_bytes(request) -> bytes:
    return json.dumps(dataclasses.asdict(request), sort_keys=True, ensure_ascii=False).encode()


@pytest.mark.parametrize("protocol", ["default", "reference"])
def test_minibench_on_a_runs_chains_sends_the_runs_continuation_requests(tmp_path, hf_factory, protocol):
    config = RunConfig(
        run_dir=str(tmp_path / "run"),
        protocol=protocol,
        dataset=DatasetConfig(name="toy", limit=3),
        models=[ModelConfig(name="tiny-reasoner")],
        traces=TracesConfig(
            sampling=SamplingConfig(n=1, temperature=0.6, max_new_tokens=320),
            filters=FilterConfig(require_correct=False, require_closed=False, drop_longest_fraction=0.0),
        ),
        interventions=InterventionsConfig(names=["toy/random_characters"], timesteps=[0.5]),
        continuation=SamplingConfig(n=2, temperature=0.6, top_p=0.95, max_new_tokens=16, seed=3),
        cpu_workers=1,
    )
    sent: list = []
    stages = ["problems", "traces", "filter", "chains", "continuations"]
    run_pipeline(config, stages=stages, make_generator=lambda m: Recording(hf_factory(m), sent), progress=False)
    pipeline = {r.request_id: as_bytes(r) for r in sent if r.prefill}  # the continuations stage's
    assert pipeline

    bench = MiniBench(MiniBenchConfig(source="run", run_dir=config.run_dir, n_problems=100))
    mine = {r.request_id: as_bytes(r) for r in bench.requests() if r.request_id in pipeline}
    assert set(mine) == set(pipeline)
    for request_id, sent_bytes in pipeline.items():
        assert mine[request_id] == sent_bytes, request_id
    clean = [r for r in bench.requests() if r.request_id.startswith("clean:")]
    assert clean and all(r.rendering == plan_for(config).prompts and not r.prefill for r in clean)
    if protocol == "reference":  # the authors' system message, as the run sent it
        assert all(r.messages[0].role == "system" for r in bench.requests())
