"""The training scripts' length checks: a GRPO prompt budget that fits vLLM's window beside the completion, and
SFT data refused when TRL would re-tokenize it (no ``input_ids``) or truncate it (rows over ``max_length``)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from recovery.configs import ConfigError
from recovery.training.configs import GRPOScriptArguments
from recovery.training.grpo import check_prompt_lengths, prompt_budget
from recovery.training.sft import check_sft_rows


def _grpo_args(use_vllm=True, window=16384, completion=8192):
    return SimpleNamespace(use_vllm=use_vllm, vllm_max_model_length=window, max_completion_length=completion)


@pytest.mark.parametrize(
    ("max_prompt_tokens", "args", "expected"),
    [
        (4096, _grpo_args(), 4096),
        (None, _grpo_args(), 8192),  # what the window leaves beside the completion
        (None, _grpo_args(use_vllm=False), None),
        (20000, _grpo_args(use_vllm=False), 20000),  # no vLLM window to fit
    ],
)
def test_prompt_budget(max_prompt_tokens, args, expected):
    assert prompt_budget(GRPOScriptArguments(max_prompt_tokens=max_prompt_tokens), args) == expected


@pytest.mark.parametrize(("max_prompt_tokens", "window"), [(8193, 16384), (None, 8192)])
def test_prompt_budget_that_cannot_fit_the_window_is_an_error(max_prompt_tokens, window):
    with pytest.raises(ConfigError, match="vllm_max_model_length"):
        prompt_budget(GRPOScriptArguments(max_prompt_tokens=max_prompt_tokens), _grpo_args(window=window))


def test_ready_grpo_prompts_over_budget_are_refused(toy_tokenizer):
    from datasets import Dataset

    dataset = Dataset.from_dict({"prompt": ["Q: 1+1\n<think>\n", "Q: 1+1+1+1+1+1+1+1+1+1\n<think>\n"]})
    lengths = [len(toy_tokenizer(text=p)["input_ids"]) for p in dataset["prompt"]]
    check_prompt_lengths(dataset, toy_tokenizer, max(lengths))
    with pytest.raises(ValueError, match="1 of 2 GRPO prompts are longer than"):
        check_prompt_lengths(dataset, toy_tokenizer, min(lengths))


def test_sft_rows_trl_would_retokenize_or_truncate_are_refused():
    from datasets import Dataset

    with pytest.raises(ValueError, match="no input_ids"):
        check_sft_rows(Dataset.from_dict({"prompt": ["a."], "completion": ["\n\nb"]}), 512)
    rows = Dataset.from_dict(
        {"input_ids": [[1, 2, 3], [1, 2, 3, 4, 5]], "completion_mask": [[0, 1, 1], [0] * 2 + [1] * 3]}
    )
    check_sft_rows(rows, 5)
    check_sft_rows(rows, None)
    with pytest.raises(ValueError, match="1 of 2 SFT rows are longer than max_length=4"):
        check_sft_rows(rows, 4)


RECIPES = Path(__file__).resolve().parents[2] / "recipes" / "tiny-reasoner"


def _recipe_args(stage: str, tiny_model_dir, tmp_path, *extra: str):
    from recovery.training.commands import parse

    return parse(
        stage,
        ["--config", str(RECIPES / f"{stage}_recovery" / "config.yaml"), "--model_name_or_path", str(tiny_model_dir)]
        + ["--output_dir", str(tmp_path / "model"), "--robustness", "false", "--report_to", "none", *extra],
    )


def test_sft_built_from_a_run_fits_max_length_by_dropping_rows(toy_run, tiny_model_dir, tmp_path, toy_tokenizer):
    from recovery.models import get_spec
    from recovery.training.sft import build_from_runs

    script_args, _, _ = _recipe_args("sft", tiny_model_dir, tmp_path, "--run_dir", str(toy_run.path))
    spec = get_spec("tiny-reasoner")
    whole = build_from_runs(script_args, toy_tokenizer, spec)
    lengths = sorted(len(ids) for ids in whole["input_ids"])
    budget = lengths[len(lengths) // 2]
    bounded = build_from_runs(script_args, toy_tokenizer, spec, max_tokens=budget)
    assert 0 < len(bounded) < len(whole) and max(len(ids) for ids in bounded["input_ids"]) <= budget
    # Whole rows, never cut: each ends with its completion's EOS, and a row of both builds has the same ids (the
    # clean share re-draws which rows are in).
    assert all(r["input_ids"][-1] == toy_tokenizer.eos_token_id for r in bounded)
    kept = {(r["prompt"], r["completion"]): r["input_ids"] for r in whole}
    both = [r for r in bounded if (r["prompt"], r["completion"]) in kept]
    assert both and all(kept[(r["prompt"], r["completion"])] == r["input_ids"] for r in both)


def test_the_scripts_refuse_ready_data_they_would_truncate_or_retokenize(tiny_model_dir, tmp_path):
    from datasets import Dataset

    from recovery.training import grpo, sft

    text_rows = tmp_path / "sft.parquet"
    Dataset.from_dict({"prompt": ["Start with 7.\n<think>\nOkay."], "completion": ["\n\nSo 7.</think>7"]}).to_parquet(
        str(text_rows)
    )
    with pytest.raises(ValueError, match="no input_ids"):
        sft.main(*_recipe_args("sft", tiny_model_dir, tmp_path, "--dataset_name", str(text_rows)))
    prompts = tmp_path / "grpo.parquet"
    Dataset.from_dict({"prompt": ["Start with 7. Step A: add 1. What is the final number?\n<think>\n"]}).to_parquet(
        str(prompts)
    )
    args = _recipe_args("grpo", tiny_model_dir, tmp_path, "--dataset_name", str(prompts), "--max_prompt_tokens", "3")
    with pytest.raises(ValueError, match="1 of 1 GRPO prompts are longer than 3 tokens"):
        grpo.main(*args)
