"""Training prompts, teacher requests, between-steps requests and probe prompts show what the run's continuation
requests showed, under the project's protocol and the authors' (issue 38, "the user turn once": these built the
project's user turn by hand, so under ``protocol: reference`` they dropped the authors' system message, user
turn and prompt style).

A tiny toy run with model paragraphs between two interventions is made by the real pipeline with the tiny
reasoner; every request it sends is recorded by a generator that wraps the real backend."""

from __future__ import annotations

import pytest

from recording import Recording  # tests/recording.py
from recovery.analysis.activation_probes.dataset import ProbeExample, probe_prompts
from recovery.generation import SamplingParams
from recovery.model_config import ModelConfig
from recovery.pipeline import run_pipeline
from recovery.prompt_building import AuthorsPrompts, request_prompt_ids
from recovery.protocol import reference
from recovery.run_config import (
    DatasetConfig,
    FilterConfig,
    InterventionsConfig,
    RunConfig,
    SamplingConfig,
    TracesConfig,
)
from recovery.run_dir import open_run
from recovery.training_data import GeneratorTeacher, PromptRenderer, run_prompts
from recovery.training_data.tokens import trainer_prompt_ids


@pytest.mark.parametrize("protocol", ["default", "reference"])
def test_training_teacher_between_and_probe_prompts_are_the_runs_continuation_prompts(tmp_path, hf_factory, protocol):
    model = ModelConfig(name="tiny-reasoner")
    config = RunConfig(
        run_dir=str(tmp_path / "run"),
        protocol=protocol,
        dataset=DatasetConfig(name="toy", limit=3),
        models=[model],
        traces=TracesConfig(
            sampling=SamplingConfig(n=1, temperature=0.6, max_new_tokens=320),
            filters=FilterConfig(require_correct=False, require_closed=False, drop_longest_fraction=0.0),
        ),
        interventions=InterventionsConfig(
            names=["toy/random_characters"], timesteps=[0.3], repeats=2, between="model", between_max_new_tokens=16
        ),
        continuation=SamplingConfig(n=1, temperature=0.6, top_p=0.95, max_new_tokens=4, seed=3),
        cpu_workers=1,
    )
    sent: list = []
    stages = ["problems", "traces", "filter", "chains", "continuations"]
    run_pipeline(config, stages=stages, make_generator=lambda m: Recording(hf_factory(m), sent), progress=False)
    run = open_run(config.run_dir)
    problems = run.problems()
    chains = {row["id"]: row for row in run.chain_rows()}
    continued = {r.request_id: r for r in sent if r.request_id in chains}
    between = [r for r in sent if r.request_id.startswith("between-")]
    assert continued and between

    generator = hf_factory(model)
    tokenizer, spec = generator.tokenizer, generator.spec
    renderer = PromptRenderer.for_run(tokenizer, spec, run.config)
    asked: list = []
    teacher = GeneratorTeacher(
        Recording(generator, asked),
        sampling=SamplingParams(n=1, max_new_tokens=2, seed=1),
        chat=run_prompts(run.config),
    )
    items = [(problems[chains[chain_id]["problem_id"]], chains[chain_id]["prefix"]) for chain_id in continued]
    teacher.continue_prefixes(items)
    examples = [
        ProbeExample(chain_id, "x", 1, model.name, "", chains[chain_id]["problem_id"], chain_id, 0, prefix)
        for chain_id, (_, prefix) in zip(continued, items, strict=True)
    ]
    probes = probe_prompts(examples, tokenizer, spec, run.config, problems)

    for (chain_id, request), (problem, prefix), teacher_request, probe_ids in zip(
        continued.items(), items, asked, probes, strict=True
    ):
        ids = request_prompt_ids(tokenizer, spec, request)  # what the run's model was fed
        # The SFT rows' ids, and the GRPO prompt as the trainer tokenizes it
        assert renderer.prompt_ids(problem, prefix) == ids, chain_id
        assert trainer_prompt_ids(tokenizer, renderer.render(problem, prefix)) == ids, chain_id
        assert request_prompt_ids(tokenizer, spec, teacher_request) == ids, chain_id
        assert (teacher_request.messages, teacher_request.rendering) == (request.messages, request.rendering)
        assert probe_ids == ids, chain_id
    chats = {(r.messages, r.rendering) for r in continued.values()}
    assert all((r.messages, r.rendering) in chats for r in between)
    if protocol == "reference":  # the authors' system message and user turn
        for request in [*continued.values(), *between]:
            system, user = request.messages
            assert isinstance(request.rendering, AuthorsPrompts) and system.role == "system"
            assert system.content == reference()["system_prompt"]
            assert user.content.endswith(f"\n\n{reference()['instruction']}")
