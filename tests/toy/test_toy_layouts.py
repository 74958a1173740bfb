"""Varied layouts for the tiny reasoner's training examples, and the masked examples built from them."""

from __future__ import annotations

import random

import pytest

from recovery.toy.dataset import laid_out, sft_records, training_examples, training_traces
from recovery.toy.layouts import OPENER_SENTENCES, QUESTION_FILLERS, Layout, vary_layout
from recovery.toy.tasks import generate_problems
from recovery.toy.traces import write_trace
from recovery.toy.verify import grade_toy


@pytest.fixture(scope="module")
def traces():
    return training_traces(60, seed=3, slip_rate=0.5)


@pytest.fixture(scope="module")
def toy_tokenizer(tiny_reasoner):
    return tiny_reasoner[1]  # the shipped tokenizer: the one stage 2 of the recipe continues with


def sentences(text: str) -> list[str]:
    return [s.strip() + "." for s in text.split(".") if s.strip()]


def test_vary_layout_keeps_every_step_in_order_and_only_adds_content_free_text(traces):
    kinds = set()
    for i, trace in enumerate(traces):
        layout = vary_layout(trace.problem.question, trace.steps, random.Random(i))
        assert layout.question.startswith(trace.problem.question)
        added = layout.question[len(trace.problem.question) :].strip()
        assert set(sentences(added)) <= set(QUESTION_FILLERS)
        steps = list(layout.steps)
        if layout.inserted_step is not None:
            inserted = steps.pop(layout.inserted_step)
            assert set(sentences(inserted)) <= set(OPENER_SENTENCES) and sentences(inserted)
        assert steps[0].startswith(trace.steps[0]) and steps[1:] == list(trace.steps[1:])
        assert set(sentences(steps[0][len(trace.steps[0]) :])) <= set(OPENER_SENTENCES)
        for index in range(len(trace.steps)):
            if index:  # the opener may be extended; every other step is where `moved` says
                assert layout.steps[layout.moved(index)] == trace.steps[index]
        kinds.add((bool(added), layout.steps != tuple(trace.steps)))
    assert kinds == {(True, False), (False, True), (True, True)}  # question only, opener only, both


def test_vary_layout_is_a_function_of_the_generator():
    steps = ("Okay, step by step.", "Start with 7.", "Step A: add 5. 7 + 5 = 12.")
    first = vary_layout("Q?", steps, random.Random(5))
    assert first == vary_layout("Q?", steps, random.Random(5))
    with pytest.raises(ValueError, match="opener"):
        vary_layout("Q?", (), random.Random(0))


def test_layout_rate_zero_gives_the_plain_records(traces, toy_tokenizer):
    assert training_examples(traces, toy_tokenizer) == sft_records(traces, toy_tokenizer)
    assert all(laid_out(t, layout_rate=0.0, seed=0) == Layout(t.problem.question, t.steps) for t in traces)
    with pytest.raises(ValueError, match="layout_rate"):
        laid_out(traces[0], layout_rate=1.5, seed=0)


def test_laid_out_examples_still_solve_their_problem(traces, toy_tokenizer):
    plain = sft_records(traces, toy_tokenizer)
    varied = training_examples(traces, toy_tokenizer, layout_rate=1.0, seed=0)
    assert all(v != p for v, p in zip(varied, plain, strict=True))
    for trace, example in zip(traces, varied, strict=True):
        assert grade_toy(example["completion"], trace.problem).correct
    # the share follows layout_rate, and the same seed gives the same examples
    half = training_examples(traces, toy_tokenizer, layout_rate=0.5, seed=0)
    assert 15 <= sum(h != p for h, p in zip(half, plain, strict=True)) <= 45
    assert half == training_examples(traces, toy_tokenizer, layout_rate=0.5, seed=0)


def test_masked_slips_leave_out_exactly_the_wrong_step(traces, toy_tokenizer):
    examples = training_examples(traces, toy_tokenizer, layout_rate=0.5, mask_slips=True, seed=0)
    slipped = 0
    for trace, example in zip(traces, examples, strict=True):
        ids, mask = example["input_ids"], example["completion_mask"]
        assert len(ids) == len(mask) and ids[-1] == toy_tokenizer.eos_token_id and mask[-1] == 1
        first = mask.index(1)
        assert toy_tokenizer.decode(ids[:first]).endswith("<think>\n")  # the prompt carries no loss
        unlearnt = toy_tokenizer.decode([t for t, m in zip(ids[first:], mask[first:], strict=True) if not m])
        if trace.slip_position is None:
            assert unlearnt == ""
            continue
        slipped += 1
        wrong_step = trace.steps[trace.slip_step]
        assert unlearnt.strip() == wrong_step  # the wrong step, and nothing else
        learnt = toy_tokenizer.decode([t for t, m in zip(ids[first:], mask[first:], strict=True) if m])
        assert wrong_step not in learnt and "Wait" in learnt  # the doubt and the redone step are learnt
    assert slipped >= 15


@pytest.mark.slow
def test_trl_masks_the_wrong_step_in_its_labels(traces, toy_tokenizer, tmp_path):
    pytest.importorskip("trl")
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from recovery.toy.model import TinyModelArguments, build_model

    model = build_model(
        toy_tokenizer,
        TinyModelArguments(
            hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2, intermediate_size=64
        ),
    )
    rows = training_examples(traces[:8], toy_tokenizer, mask_slips=True, seed=0)
    args = SFTConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=4,
        use_cpu=True,
        bf16=False,
        report_to=[],
        save_strategy="no",
        completion_only_loss=True,
    )
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=toy_tokenizer)
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(len(rows))])
    for row, labels in zip(rows, batch["labels"].tolist(), strict=True):
        expected = [t if m else -100 for t, m in zip(row["input_ids"], row["completion_mask"], strict=True)]
        assert labels[: len(expected)] == expected
    assert trainer.train().global_step == 1


def test_masked_reactions_leave_the_check_learnt_and_the_doubt_unlearnt(toy_tokenizer):
    """``mask_reactions``: no loss on the doubt and corrected step after a slip's check, loss on the rest of
    the completion (the wrong step's check included), none on the prompt; with ``mask_slips`` as well, the
    wrong step goes unlearnt too. Traces without a slip are not masked."""
    from recovery.toy.dataset import training_examples

    tok = toy_tokenizer
    problems = generate_problems(30, seed=7)
    traces = [write_trace(p, slip_rate=0.5, checks=True) for p in problems]
    for both in (False, True):
        examples = training_examples(traces, tok, mask_reactions=True, mask_slips=both, layout_rate=0.5, seed=1)
        for trace, example in zip(traces, examples, strict=True):
            ids, mask = example["input_ids"], example["completion_mask"]
            unlearnt = tok.decode([i for i, m in zip(ids, mask) if m == 0])
            learnt = tok.decode([i for i, m in zip(ids, mask) if m == 1])
            assert "<think>" in unlearnt and "<think>" not in learnt  # the prompt
            if trace.slip_step is None:
                assert unlearnt.endswith("<think>\n") and learnt.startswith(trace.steps[0][:10])
                continue
            reaction, wrong, check = (
                trace.steps[trace.reaction_step],
                trace.steps[trace.slip_step],
                trace.steps[trace.slip_step + 1],
            )
            assert reaction in unlearnt and reaction not in learnt
            assert (wrong in unlearnt) == both and (wrong in learnt) != both
            assert check in learnt
