"""Differential test: the continuation and trace prompts under ``protocol: reference`` equal the authors'
(stored by make_prompts.py from their code), byte for byte, on real R1-distill traces with the real
DeepSeek-R1-Distill tokenizer in both template revisions; the project's default prompt differs."""

from __future__ import annotations

import pytest

from recovery.generation import GenerationRequest
from recovery.model_config import ModelConfig
from recovery.models import spec_for
from recovery.plan import plan_for
from recovery.prompt_building import (
    AuthorsPrompts,
    build_prompt_text,
    reference_prompt_ids,
    reference_prompt_text,
    request_prompt_text,
    trace_system_prompt,
)
from recovery.run_config import DatasetConfig, RunConfig
from recovery.types import Problem
from reference.inputs import MODEL, load, trace_rows

STORED = load("prompts")


def _config(protocol: str) -> RunConfig:
    return RunConfig(run_dir="unused", dataset=DatasetConfig(name="real_traces"), protocol=protocol)


def _problems() -> dict[str, Problem]:
    return {
        row["id"]: Problem("math", row["raw_question"], row["reference_answer"], "numeric", "fixture", id=row["id"])
        for row in trace_rows()
    }


@pytest.fixture(scope="module")
def tokenizers(r1_tokenizer, r1_tokenizer_opener):
    return {"first_revision": r1_tokenizer, "later_revision": r1_tokenizer_opener}


def test_stored_outputs_name_their_command_and_commit():
    assert STORED["commit"].startswith("f3ec899")
    assert STORED["command"].startswith("python tests/reference/make_prompts.py --authors ")
    assert len(STORED["chains"]) == 120  # 4 traces x 5 timesteps x 6 interventions


@pytest.mark.parametrize("revision", ["first_revision", "later_revision"])
def test_continuation_prompt_text_equals_the_authors(tokenizers, revision):
    tokenizer, problems, config = tokenizers[revision], _problems(), _config("reference")
    for chain in STORED["chains"]:
        messages = plan_for(config).prompts.continuation_messages(problems[chain["problem_id"]])
        ours = reference_prompt_text(tokenizer, messages, chain["mutated_answer_content"])
        assert ours == chain["prompts"][revision], (chain["problem_id"], chain["intervention"], chain["target_t"])


def test_the_request_a_backend_builds_is_the_reference_prompt(r1_tokenizer):
    chain = STORED["chains"][7]
    messages = plan_for(_config("reference")).prompts.continuation_messages(_problems()[chain["problem_id"]])
    request = GenerationRequest(
        "c", messages=messages, prefill=chain["mutated_answer_content"], rendering=AuthorsPrompts()
    )
    spec = spec_for(MODEL, r1_tokenizer)
    assert request_prompt_text(r1_tokenizer, spec, request) == chain["prompts"]["first_revision"]
    # Tokenized whole with the tokenizer's special tokens, as vLLM tokenizes a text prompt: the template's BOS
    # and the tokenizer's own make two.
    ids = reference_prompt_ids(r1_tokenizer, chain["prompts"]["first_revision"])
    assert ids[:2] == [r1_tokenizer.bos_token_id] * 2
    assert r1_tokenizer.decode(ids[1:]) == chain["prompts"]["first_revision"]


def test_the_default_protocol_prompts_differently(r1_tokenizer):
    chain = STORED["chains"][0]
    problem = _problems()[chain["problem_id"]]
    spec = spec_for(MODEL, r1_tokenizer)
    default = build_prompt_text(
        r1_tokenizer, spec, plan_for(_config("default")).prompts.continuation_messages(problem), "x"
    )
    assert "You are a helpful AI assistant." not in default and default.endswith("<think>\nx")


def test_trace_prompt_and_system_prompts_equal_the_authors(tokenizers):
    config, problems = _config("reference"), _problems()
    for revision, prompts in STORED["trace_prompts"].items():
        for problem_id, theirs in prompts.items():
            model = ModelConfig(name="m", path=MODEL)
            messages = plan_for(config).prompts.trace_messages(model, problems[problem_id])
            assert reference_prompt_text(tokenizers[revision], messages, "") == theirs
    for hub_id, theirs in STORED["trace_system_prompts"].items():
        assert trace_system_prompt(ModelConfig(name=hub_id.split("/")[-1], path=hub_id)) == theirs, hub_id
