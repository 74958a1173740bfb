"""The shipped tiny reasoner: loads like a Hub model, fast, and solves held-out toy problems."""

from __future__ import annotations

import json

import pytest

from recovery.toy.dataset import heldout_problems
from recovery.toy.model import (
    CHECKPOINT_FILES,
    TOKENIZER_FILES,
    checkpoint_dir,
    has_checkpoint,
)

pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = pytest.mark.skipif(not has_checkpoint(), reason="no shipped tiny-reasoner checkpoint")

HELDOUT_N = 200  # the fixed held-out set of the accuracy check


@pytest.fixture(scope="module")
def reasoner():
    import torch

    from recovery.toy import load_tiny_reasoner

    torch.set_num_threads(2)
    return load_tiny_reasoner()


def test_checkpoint_is_small_and_plain_llama():
    directory = checkpoint_dir()
    size = sum((directory / name).stat().st_size for name in CHECKPOINT_FILES + TOKENIZER_FILES)
    assert size < 8 * 2**20
    config = json.loads((directory / "config.json").read_text())
    assert config["model_type"] == "llama"
    tok_config = json.loads((directory / "tokenizer_config.json").read_text())
    assert tok_config["padding_side"] == "left"


def test_loads_with_auto_classes():
    # Load time (target ≤ 2 s) is measured by bench/train_tiny_reasoner.py, not asserted here: test
    # machines are shared and noisy.
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from recovery.toy import load_tiny_reasoner

    model, tok = load_tiny_reasoner()
    # the same directory loads with the plain Auto classes, like any Hub model
    plain_tok = AutoTokenizer.from_pretrained(str(checkpoint_dir()))
    plain = AutoModelForCausalLM.from_pretrained(str(checkpoint_dir()))
    assert plain.config.model_type == "llama" and plain_tok.chat_template == tok.chat_template
    assert plain_tok("Step A: add 5.")["input_ids"] == tok("Step A: add 5.")["input_ids"]
    assert model.generation_config.eos_token_id == tok.eos_token_id
    assert tok.apply_chat_template(
        [{"role": "user", "content": "q"}], add_generation_prompt=True, tokenize=False
    ).endswith("<think>\n")


def test_heldout_accuracy_greedy_and_sampled(reasoner):
    """Issue checks: ≥99% greedy (issue 18) and ≥95% with the paper's sampling (T=0.6, top_p=0.95); the
    shipped checkpoint measured 100 % and 98.5 %."""
    from recovery.toy.generate import GREEDY, PAPER_SAMPLING, accuracy

    model, tok = reasoner
    problems = heldout_problems(HELDOUT_N)
    greedy = accuracy(model, tok, problems, sampling=GREEDY, batch_size=100)
    sampled = accuracy(model, tok, problems, sampling=PAPER_SAMPLING, seed=0, batch_size=100)
    assert greedy >= 0.99, f"greedy accuracy {greedy:.3f}"
    assert sampled >= 0.95, f"sampled accuracy {sampled:.3f}"


def test_wrong_continuation_hurts_and_the_model_checks_the_wrong_step(reasoner):
    """Issue check: continuing from adversarially intervened prefixes, accuracy drops measurably. The
    model's next paragraph is its check of the wrong step; the base model redoes it right only now and then
    (it mostly copies the written result, measured 11 of 40), and what to do when a check disagrees is left
    to recovery training (the recipe puts no loss on the reaction), which teaches both."""
    from recovery.interventions import intervene
    from recovery.toy.generate import GREEDY, generate
    from recovery.toy.probe import original_traces, probe
    from recovery.toy.steps import check_is_correct, is_check
    from recovery.toy.tasks import spec_of
    from recovery.toy.tokenizer import prompt_text

    model, tok = reasoner
    traces = original_traces(model, tok, heldout_problems(40))
    rows = {
        r.intervention: r
        for r in probe(model, tok, traces, ["none", "toy/wrong_continuation"], [0.5], n=1, sampling=GREEDY)
    }
    assert rows["none"].sample_accuracy >= 0.9
    assert rows["toy/wrong_continuation"].sample_accuracy <= rows["none"].sample_accuracy - 0.2

    items = [(problem, intervene(problem, trace, "toy/wrong_continuation", 0.5)) for problem, trace in traces]
    prompts = [prompt_text(tok, problem.question) + item.prefix for problem, item in items]
    outputs = generate(model, tok, prompts, sampling=GREEDY)
    first = [out[0].strip().split("\n\n")[0] for out in outputs]
    assert sum(is_check(text) for text in first) / len(items) >= 0.9, first
    honest = sum(is_check(text) and check_is_correct(text, spec_of(p)) for (p, _), text in zip(items, first))
    assert honest >= 4, first


def test_generation_is_seeded(reasoner):
    from recovery.toy.generate import PAPER_SAMPLING, solve

    model, tok = reasoner
    problems = heldout_problems(4)
    a = solve(model, tok, problems, sampling=PAPER_SAMPLING, num_samples=2, seed=3)
    b = solve(model, tok, problems, sampling=PAPER_SAMPLING, num_samples=2, seed=3)
    assert a == b


def test_reads_the_question_by_content_not_by_position(reasoner):
    """Stage 2 of the recipe (varied layouts): instruction sentences after the question, or a longer
    opener prefilled before the first step, must not throw the model off — with sentences it never saw in
    training. (The stage-1 model fell from 100 % to 15 % and 11 % greedy on these layouts.)"""
    from recovery.toy.generate import GREEDY, generate
    from recovery.toy.layouts import OPENER_SENTENCES, QUESTION_FILLERS
    from recovery.toy.steps import OPENERS
    from recovery.toy.tasks import spec_of
    from recovery.toy.tokenizer import prompt_text
    from recovery.toy.verify import grade_toy

    unseen_instructions = "Please think it over before you answer. Keep the numbers exact."
    unseen_opener = "Hmm, a classic puzzle. I will be careful with every number."
    assert not any(s in f"{unseen_instructions} {unseen_opener}" for s in (*QUESTION_FILLERS, *OPENER_SENTENCES))
    model, tok = reasoner
    problems = heldout_problems(50)
    openers = [f"{OPENERS[spec_of(p).family][0]} {unseen_opener}\n\n" for p in problems]
    padded = [(prompt_text(tok, f"{p.question} {unseen_instructions}"), "") for p in problems]
    prefilled = [(prompt_text(tok, p.question) + opener, opener) for p, opener in zip(problems, openers)]
    for layout in (padded, prefilled):
        outputs = generate(model, tok, [prompt for prompt, _ in layout], sampling=GREEDY)
        correct = sum(
            grade_toy(prefix + out[0], p).correct for p, (_, prefix), out in zip(problems, layout, outputs, strict=True)
        )
        assert correct / len(problems) >= 0.85, f"{correct}/{len(problems)} with {layout[0][0]!r}"
