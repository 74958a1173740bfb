"""Prompt rendering for TRL: BOS de-duplication, think opener only when missing, clean from-start rows."""

from __future__ import annotations

from recovery.models import ModelSpec, get_spec
from recovery.prompt_building import ProjectPrompts
from recovery.run_config import DatasetConfig, RunConfig
from recovery.segment import parse_trace
from recovery.training_data import PromptRenderer, clean_cut, run_prompts, tokenizer_adds_bos
from recovery.training_data.clean import from_start_completion
from recovery.types import Problem


class BosTokenizer:
    """Character-level stand-in for an R1-Distill-like tokenizer: it adds BOS by itself and its template
    writes ``{{ bos_token }}`` too, and the generation prompt does not open the think block."""

    bos_token, bos_token_id = "<s>", 1

    def __call__(self, text, add_special_tokens=True):
        ids = [ord(c) + 10 for c in text]
        return {"input_ids": ([self.bos_token_id] if add_special_tokens else []) + ids}

    def encode(self, text, add_special_tokens=True):
        return self(text, add_special_tokens)["input_ids"]

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True, **kwargs):
        body = "".join(f"<|{m['role']}|>{m['content']}" for m in messages)
        return self.bos_token + body + ("<|assistant|>" if add_generation_prompt else "")


SPEC = ModelSpec(name="bos-model", hub_id=None, family="test", template_opens_think=False)
PROBLEM = Problem("math", "What is 2 + 3?", "5", "numeric", "unit")


def test_bos_written_once_for_trl():
    tok = BosTokenizer()
    assert tokenizer_adds_bos(tok)
    renderer = PromptRenderer(tok, SPEC)
    prompt = renderer.render(PROBLEM, "First, 2 + 3.\n\nWait, 6?")
    assert not prompt.startswith("<s>")
    # what GRPOTrainer / SFTTrainer do with a string prompt: tokenizer(text) — exactly one BOS
    assert tok(prompt)["input_ids"].count(tok.bos_token_id) == 1
    assert prompt.endswith("<|assistant|><think>\nFirst, 2 + 3.\n\nWait, 6?")
    assert PromptRenderer(tok, SPEC, strip_bos=False).render(PROBLEM, "x").startswith("<s>")


def test_user_turn_follows_the_run_config():
    def user(chat):
        (message,) = chat.continuation_messages(PROBLEM)
        assert message.role == "user" and not chat.text_prefill
        return message.content

    default = user(run_prompts(None))
    assert default.startswith(PROBLEM.question) and "\\boxed{}" in default
    assert user(run_prompts(RunConfig(run_dir="r", dataset=DatasetConfig(name="gsm8k")))) == default
    custom = run_prompts(RunConfig(run_dir="r", dataset=DatasetConfig(name="gsm8k", prompt_template="Q: {question}")))
    assert user(custom) == "Q: What is 2 + 3?"
    assert user(ProjectPrompts("Q: {question}")) == "Q: What is 2 + 3?"


def test_opener_only_when_template_lacks_it(toy_tokenizer):
    toy = PromptRenderer(toy_tokenizer, get_spec("tiny-reasoner"))
    assert toy.render(PROBLEM, "A.\n\nB.").count("<think>") == 1
    bare = PromptRenderer(BosTokenizer(), SPEC)
    # a prefix that starts with the newline the model wrote after its own tag gets the bare tag
    assert bare.render(PROBLEM, "\nA.\n\nB.").endswith("<|assistant|><think>\nA.\n\nB.")


def test_from_start_clean_row_reproduces_the_model_bytes():
    trace = parse_trace(PROBLEM.id, "m", "<think>\nA.\n\nB.\n\nC.\n</think>\n\nThe answer is \\boxed{5}.")
    renderer = PromptRenderer(BosTokenizer(), SPEC)
    cut = clean_cut(trace, 0.0)
    completion = from_start_completion(cut, renderer.tail(PROBLEM, ""))
    assert renderer.render(PROBLEM, "") + completion == renderer.head(PROBLEM) + trace.text
    mid = clean_cut(trace, 0.5)
    assert renderer.render(PROBLEM, mid.prefix) + mid.completion == renderer.head(PROBLEM) + trace.text
