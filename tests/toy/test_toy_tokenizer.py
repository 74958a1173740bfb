"""The locally trained tokenizer: loads with AutoTokenizer, has a chat template, is deterministic."""

from __future__ import annotations

import json

import pytest

from recovery.toy.dataset import tokenizer_corpus, training_traces
from recovery.toy.interventions import intervention_corpus
from recovery.toy.steps import DOUBT_PHRASES
from recovery.toy.tokenizer import prompt_text, train_tokenizer

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def corpus():
    return tokenizer_corpus(training_traces(600, seed=0), extra=intervention_corpus())


@pytest.fixture(scope="module")
def saved(corpus, tmp_path_factory):
    directory = tmp_path_factory.mktemp("tok")
    train_tokenizer(corpus).save_pretrained(str(directory))
    return directory


def test_reloads_with_autotokenizer_and_same_ids(saved, corpus):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(saved))
    fresh = train_tokenizer(corpus)
    text = prompt_text(tok, "Start with 7. Step A: add 5. What is the final number?") + corpus[1]
    assert tok(text)["input_ids"] == fresh(text)["input_ids"]
    assert tok.decode(tok(text)["input_ids"]) == text
    assert tok.padding_side == "left" and tok.eos_token == "<|end|>" and tok.pad_token == "<|pad|>"
    assert json.loads((saved / "tokenizer.json").read_text())["model"]["type"] == "BPE"


def test_deterministic(corpus):
    assert train_tokenizer(corpus).get_vocab() == train_tokenizer(corpus).get_vocab()


def test_chat_template_opens_think_and_tokens_are_cheap(saved):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(saved))
    prompt = prompt_text(tok, "Q?")
    assert prompt == "<|user|>\nQ?\n<|assistant|>\n<think>\n"
    full = tok.apply_chat_template(
        [{"role": "user", "content": "Q?"}, {"role": "assistant", "content": "<think>\nA\n</think>\n\nB"}],
        tokenize=False,
    )
    assert full.startswith("<|user|>\nQ?\n<|assistant|>\n") and full.endswith("B<|end|>\n")
    # whole numbers and think tags are single tokens; think tags survive skip_special_tokens
    for n in range(64):
        assert len(tok.tokenize(f" {n}")) == 1 and len(tok.tokenize(f"{n}")) == 1
    ids = tok("x</think>\n\n<|end|>", add_special_tokens=False)["input_ids"]
    assert "</think>" in tok.decode(ids, skip_special_tokens=True)
    assert "<|end|>" not in tok.decode(ids, skip_special_tokens=True)
    for phrase in DOUBT_PHRASES:
        assert len(tok.tokenize(phrase)) <= 8
    # any text can be encoded (byte-level): random characters round-trip
    odd = "Step B: 1~2 -é 3 = 9.}{\\"
    assert tok.decode(tok(odd, add_special_tokens=False)["input_ids"]) == odd
