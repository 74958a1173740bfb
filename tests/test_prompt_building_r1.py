"""Continuation prompts under the real DeepSeek-R1-Distill-Qwen tokenizer and both revisions of its chat
template (generation prompt ``<｜Assistant｜>``, and later ``<｜Assistant｜><think>\\n``): one BOS, one opener, and
the same token ids in both, whether the reasoning kept the newline after a tag the model wrote or not."""

from __future__ import annotations

import pytest

from recovery.generation import Message
from recovery.models import get_spec
from recovery.prompt_building import ProjectPrompts, build_prompt_ids, build_prompt_text
from recovery.training_data import PromptRenderer
from recovery.training_data.tokens import trainer_prompt_ids
from recovery.types import Problem

SPEC = get_spec("DeepSeek-R1-Distill-Qwen-7B")
QUESTION = "What is $2 + 3$? Put your final answer in \\boxed{}."
MESSAGES = (Message("user", QUESTION),)
REASONING = "Okay, so I need to add 2 and 3.\n\nThat gives 5."
# Reasoning as stored: split from a response whose model wrote "<think>\n" itself (first revision), from one
# whose template wrote it (later revision), and nothing yet.
PREFILLS = {"own_newline": "\n" + REASONING, "bare": REASONING, "empty": ""}


@pytest.fixture(scope="module", params=["first", "opener"])
def revision(request, r1_tokenizer, r1_tokenizer_opener):
    return request.param, r1_tokenizer if request.param == "first" else r1_tokenizer_opener


def test_the_two_revisions_differ_only_in_the_generation_prompt(r1_tokenizer, r1_tokenizer_opener):
    chat = [{"role": "user", "content": QUESTION}]
    first = r1_tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    later = r1_tokenizer_opener.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert first == f"<｜begin▁of▁sentence｜><｜User｜>{QUESTION}<｜Assistant｜>"
    assert later == first + "<think>\n"


@pytest.mark.parametrize("prefill", sorted(PREFILLS))
def test_one_bos_one_opener_and_the_same_ids_in_both_revisions(revision, prefill, r1_tokenizer):
    name, tokenizer = revision
    ids = build_prompt_ids(tokenizer, SPEC, MESSAGES, PREFILLS[prefill])
    opener = tokenizer.convert_tokens_to_ids(SPEC.think_open)
    assert ids[0] == tokenizer.bos_token_id and ids.count(tokenizer.bos_token_id) == 1
    assert ids.count(opener) == 1
    expected = (
        f"<｜begin▁of▁sentence｜><｜User｜>{QUESTION}<｜Assistant｜><think>\n{REASONING if PREFILLS[prefill] else ''}"
    )
    assert tokenizer.decode(ids) == expected
    assert build_prompt_text(tokenizer, SPEC, MESSAGES, PREFILLS[prefill]) == expected
    # The ids of the first revision, where the opener is the benchmark's own: the model sees one sequence.
    assert ids == build_prompt_ids(r1_tokenizer, SPEC, MESSAGES, PREFILLS[prefill])


@pytest.mark.parametrize("prefill", sorted(PREFILLS))
def test_training_prompts_are_the_benchmark_ids_in_both_revisions(revision, prefill):
    """The GRPO prompt text (BOS string dropped: the tokenizer adds BOS) tokenizes as GRPOTrainer does it to
    exactly the benchmark's ids."""
    _, tokenizer = revision
    renderer = PromptRenderer(tokenizer, SPEC, ProjectPrompts("{question}"))
    problem = Problem(domain="math", question=QUESTION, answer="5", answer_type="numeric", source="test", id="p1")
    assert renderer.strip_bos
    ids = renderer.prompt_ids(problem, PREFILLS[prefill])
    assert ids == build_prompt_ids(tokenizer, SPEC, MESSAGES, PREFILLS[prefill])
    assert trainer_prompt_ids(tokenizer, renderer.render(problem, PREFILLS[prefill])) == ids
