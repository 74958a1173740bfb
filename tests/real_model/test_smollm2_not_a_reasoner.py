"""SmolLM2-135M-Instruct, a chat model, as the evaluated model (issue 26): none of its traces closes a think
block, so the filter keeps none. Alone, the run measured nothing and fails naming it as probably not a
reasoning model with the setting that would change that; beside a reasoning model (the tiny reasoner), the
run measures that one and warns about SmolLM2."""

from __future__ import annotations

from dataclasses import replace

import pytest

from recovery.pipeline import (
    DatasetConfig,
    FilterConfig,
    InterventionsConfig,
    ModelConfig,
    RunConfig,
    SamplingConfig,
    TracesConfig,
    run_pipeline,
)
from recovery.pipeline.outcome import NothingMeasured

pytestmark = pytest.mark.slow

STAGES = ["problems", "traces", "filter"]
NOT_A_REASONER = (
    "'SmolLM2-135M-Instruct' probably is not a reasoning model (its traces never close a think block, and its "
    "conventions 'smollm2-instruct' are a chat model's): evaluate a reasoning model, or if it is one, set "
    "models[{i}].reasoning: true or models[{i}].spec (its family)"
)


def config(path, models, *, intersect: bool = True) -> RunConfig:
    return RunConfig(
        run_dir=str(path),
        models=models,
        dataset=DatasetConfig(name="toy", limit=2, options={"seed": 21}),
        traces=TracesConfig(
            sampling=SamplingConfig(n=1, temperature=0.0, top_p=1.0, max_new_tokens=48),
            filters=FilterConfig(intersect_models=intersect),
        ),
        interventions=InterventionsConfig(names=["toy/random_characters"], timesteps=[0.5]),
    )


def test_a_chat_model_alone_fails_the_run_named_as_not_a_reasoner(tmp_path, smollm2_config, smollm2_factory):
    cfg = config(tmp_path / "run", [smollm2_config])
    with pytest.raises(NothingMeasured) as caught:
        run_pipeline(cfg, stages=STAGES, make_generator=smollm2_factory, progress=False)
    assert str(caught.value) == (
        "filter: kept 0 of 2 traces of model 'SmolLM2-135M-Instruct': 2 no_closing_think_tag — "
        + NOT_A_REASONER.format(i=0)
    )


def test_beside_a_reasoning_model_it_is_a_warning(tmp_path, smollm2_config, smollm2_factory, hf_factory):
    tiny = ModelConfig(name="tiny-reasoner")
    cfg = config(tmp_path / "run", [tiny, smollm2_config], intersect=False)
    cfg = replace(cfg, traces=replace(cfg.traces, sampling=replace(cfg.traces.sampling, max_new_tokens=200)))

    def make_generator(model):
        return smollm2_factory(model) if model.gguf_file else hf_factory(model)

    summary = run_pipeline(cfg, stages=STAGES, make_generator=make_generator, progress=False)
    assert summary.outcome is None and summary.written["filter"] > 0
    assert summary.warnings == [
        "filter: kept 0 of 2 traces of model 'SmolLM2-135M-Instruct': 2 no_closing_think_tag — "
        + NOT_A_REASONER.format(i=1)
    ]
