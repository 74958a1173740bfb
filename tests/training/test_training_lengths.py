"""The training scripts' length checks: a GRPO prompt budget that fits vLLM's window beside the completion, and
SFT data refused when TRL would re-tokenize it (no ``input_ids``) or truncate it (rows over ``max_length``)."""

from __future__ import annotations

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
