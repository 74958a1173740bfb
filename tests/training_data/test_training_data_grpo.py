"""GRPO prompt datasets: one row per chain, prompts that end with the intervened prefix, reward columns."""

from __future__ import annotations

import datasets
import pytest

from recovery.training_data import EvalSet, GRPOPromptConfig, build_grpo_dataset, clean_count, grpo_rows

REQUIRED = (
    "prompt",
    "answer",
    "answer_type",
    "domain",
    "source",
    "intervention",
    "category",
    "timestep",
    "reference_length",
    "problem_id",
    "chain_id",
)


def test_rows_columns_and_prompts(toy_run, renderer):
    ds = build_grpo_dataset(toy_run.path, renderer)
    assert isinstance(ds, datasets.Dataset)
    assert set(REQUIRED) <= set(ds.column_names)
    built = grpo_rows(toy_run.path, renderer)
    # identical prompts (two targets landing on the same cut) are kept once, and counted
    assert len(built.rows) + built.drops.get("dedup", "duplicate_prompt") == len(toy_run.chains)
    assert len(ds) == len(built.rows)
    chains = {c.id: (p, c) for p, c in toy_run.chains}
    for row in ds:
        problem, chain = chains[row["chain_id"]]
        prompt = row["prompt"]
        assert prompt.endswith(chain.prefix) and prompt.count(chain.prefix) == 1
        # exactly the tiny reasoner's template, opened think block, then the intervened reasoning
        assert prompt == f"<|user|>\n{problem.question}\n<|assistant|>\n<think>\n{chain.prefix}"
        assert row["answer"] == problem.answer and row["answer_type"] == str(problem.answer_type)
        assert row["domain"] == "toy" and row["source"] == problem.source
        assert row["intervention"] == chain.intervention and row["category"] == str(chain.category)
        assert row["timestep"] == chain.target_t
        original = toy_run.trace(chain.trace_id).reasoning
        assert row["reference_length"] == len(original) - chain.original_prefix_chars
        assert row["reference_tokens"] == renderer.count_tokens(original[chain.original_prefix_chars :])
        assert row["kind"] == "intervened"


def test_prompt_tokenizes_to_itself(toy_run, renderer, toy_tokenizer):
    """GRPOTrainer tokenizes string prompts with ``processing_class(text=...)``: nothing is added or lost."""
    for row in build_grpo_dataset(toy_run.path, renderer).select(range(10)):
        ids = toy_tokenizer(text=row["prompt"])["input_ids"]
        assert toy_tokenizer.decode(ids) == row["prompt"]


def test_clean_rows_and_ratio(toy_run, renderer):
    base = grpo_rows(toy_run.path, renderer)
    built = grpo_rows(toy_run.path, renderer, GRPOPromptConfig(clean_fraction=0.1))
    clean = [r for r in built.rows if r["kind"] == "clean"]
    assert len(clean) == clean_count(len(base.rows), 0.1) > 0
    assert built.drops.get("clean", "short_supply") == 0
    traces = {t.id: t for t in toy_run.traces}
    for row in clean:
        trace = traces[row["trace_id"]]
        head = f"<|user|>\n{toy_run.problem(row['problem_id']).question}\n<|assistant|>\n<think>\n"
        prefix = row["prompt"][len(head) :]
        assert trace.reasoning.startswith(prefix) and prefix
        assert row["intervention"] == "none" and row["category"] == "clean"
        assert row["reference_length"] == len(trace.reasoning) - len(prefix)


def test_restrict_and_decontaminate(toy_run, renderer):
    names = ["toy/wrong_continuation"]
    eval_set = EvalSet.from_problems(toy_run.problems[:2])
    built = grpo_rows(toy_run.path, renderer, GRPOPromptConfig(interventions=names), eval_set=eval_set)
    banned = {p.id for p in toy_run.problems[:2]}
    assert {r["intervention"] for r in built.rows} == set(names)
    assert not banned & {r["problem_id"] for r in built.rows}
    expected = sum(1 for p, c in toy_run.chains if c.intervention in names and p.id in banned)
    assert built.drops.get("decontam", "eval_problem_id") == expected > 0


def test_bad_config():
    with pytest.raises(ValueError):
        GRPOPromptConfig(clean_fraction=1.0)


def test_prompts_chosen_by_how_often_the_run_recovered_each_chain(toy_run, renderer):
    """``success_between`` keeps the chains whose groups disagree in the run (here each chain has one correct
    and one wrong continuation: a share of 0.5), and counts the others by why they were left out."""
    every = grpo_rows(toy_run.path, renderer)
    mixed = grpo_rows(toy_run.path, renderer, GRPOPromptConfig(success_between=(0.25, 0.75)))
    assert [r["chain_id"] for r in mixed.rows] == [r["chain_id"] for r in every.rows]
    unanimous = grpo_rows(toy_run.path, renderer, GRPOPromptConfig(success_between=(0.75, 1.0)))
    assert unanimous.rows == [] and unanimous.drops.get("outcome", "success_below_range") == len(toy_run.chains)
    failing = grpo_rows(toy_run.path, renderer, GRPOPromptConfig(success_between=(0.0, 0.25)))
    assert failing.rows == [] and failing.drops.get("outcome", "success_above_range") == len(toy_run.chains)
    with pytest.raises(ValueError, match="success_between"):
        GRPOPromptConfig(success_between=(0.8, 0.2))


def test_prompts_chosen_by_timestep(toy_run, renderer):
    """``timesteps`` keeps only the intervened chains cut at those timesteps (a curriculum's choice, not a drop);
    the clean prefixes keep their own timesteps."""
    every = grpo_rows(toy_run.path, renderer)
    held = sorted({r["timestep"] for r in every.rows})
    assert len(held) > 1
    later = grpo_rows(toy_run.path, renderer, GRPOPromptConfig(timesteps=held[1:], clean_fraction=0.5))
    intervened = [r for r in later.rows if r["kind"] != "clean"]
    assert intervened and {r["timestep"] for r in intervened} == set(held[1:])
    assert [r["chain_id"] for r in intervened] == [r["chain_id"] for r in every.rows if r["timestep"] != held[0]]
    assert any(r["kind"] == "clean" for r in later.rows) and not later.drops.get("chains", "timestep")
