"""Training rows in the policy's tokens: exactly the benchmark's prompt ids, within a token budget.

What a model is trained to continue from must be the token sequence the benchmark presents at that point
(`PromptRenderer.prompt_ids`: the template's tokens, then the opener and the intervened prefix after a hard
token boundary). Text alone does not carry that: a byte-level BPE merges across the cut (DeepSeek-R1-Distill's
tokenizer makes ``"." + "\\n\\n"`` one token), so a trainer that tokenizes ``prompt`` and ``prompt +
completion`` (TRL's SFTTrainer on text rows) trains the continuation from a boundary the benchmark never
presents, and one that tokenizes the whole prompt string (GRPOTrainer) can join the template's last token to
the prefix's first. Hence:

* SFT rows are pre-tokenized (`sft_token_columns`): ``input_ids`` = the benchmark's prompt ids, then the
  completion encoded on its own, then EOS; ``completion_mask`` marks the completion and EOS. TRL 1.16's
  SFTTrainer takes a dataset with ``input_ids`` as already processed and builds its labels from
  ``completion_mask`` (``completion_only_loss``, on by default for prompt-completion rows).
* A GRPO prompt stays text (GRPOTrainer tokenizes it, `trainer_prompt_ids`) and is kept only when that
  tokenization equals the benchmark's prompt ids (`grpo_prompt_tokens`).

Budgets (`TokenBudget`) are counted in the same ids. A row over budget is dropped and counted (stage
``tokens``) like every other drop, never truncated: a truncated SFT row loses ``</think>`` and the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recovery.types import Problem

STAGE = "tokens"
PROMPT_OVER_BUDGET = "prompt_over_budget"
OVER_BUDGET = "prompt_completion_over_budget"
PROMPT_IDS_MISMATCH = "prompt_ids_differ_from_benchmark"


@dataclass(frozen=True)
class TokenBudget:
    """Longest ``max_prompt_tokens`` prompt and ``max_tokens`` prompt + completion (EOS included), in the
    policy's tokens; None: no bound.

    >>> TokenBudget(max_prompt_tokens=4, max_tokens=6).reason(3, 7)
    'prompt_completion_over_budget'
    """

    max_prompt_tokens: int | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_prompt_tokens", "max_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be a positive number of tokens or None, got {value}")

    def reason(self, prompt_tokens: int, total_tokens: int | None = None) -> str | None:
        """Why a row of these lengths is over budget, or None when it fits."""
        if self.max_prompt_tokens is not None and prompt_tokens > self.max_prompt_tokens:
            return PROMPT_OVER_BUDGET
        if total_tokens is not None and self.max_tokens is not None and total_tokens > self.max_tokens:
            return OVER_BUDGET
        return None


def trainer_prompt_ids(tokenizer: Any, prompt: str) -> list[int]:
    """The ids GRPOTrainer gives a raw-text prompt: ``processing_class(text=prompts)["input_ids"]`` (TRL 1.16,
    ``GRPOTrainer._tokenize_prompts``), i.e. with the tokenizer's default special tokens (its BOS)."""
    return list(tokenizer(text=prompt)["input_ids"])


def completion_ids(tokenizer: Any, completion: str) -> list[int]:
    """The completion encoded on its own (a hard boundary after the prompt, as when the model generated it)
    plus EOS, which SFTTrainer appends to text completions itself but not to pre-tokenized rows."""
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError("the policy's tokenizer has no EOS token: a completion could not end")
    return [*tokenizer.encode(completion, add_special_tokens=False), eos]


def sft_token_columns(
    renderer: Any, problem: Problem, prefix: str, completion: str, budget: TokenBudget
) -> dict[str, Any] | str:
    """The pre-tokenized columns of one SFT row (``input_ids``, ``completion_mask``, ``prompt_tokens``,
    ``completion_tokens``), or the drop reason when the row is over ``budget``."""
    prompt = renderer.prompt_ids(problem, prefix)
    if reason := budget.reason(len(prompt)):
        return reason
    completion_part = completion_ids(renderer.tokenizer, completion)
    if reason := budget.reason(len(prompt), len(prompt) + len(completion_part)):
        return reason
    return {
        "input_ids": prompt + completion_part,
        "completion_mask": [0] * len(prompt) + [1] * len(completion_part),
        "prompt_tokens": len(prompt),
        "completion_tokens": len(completion_part),
    }


def grpo_prompt_tokens(renderer: Any, problem: Problem, prefix: str, prompt: str, budget: TokenBudget) -> int | str:
    """The length in tokens of a GRPO prompt (the text ``renderer.render(problem, prefix)``), or the drop
    reason: over ``budget``, or tokenized by GRPOTrainer into ids other than the benchmark's."""
    ids = renderer.prompt_ids(problem, prefix)
    if reason := budget.reason(len(ids)):
        return reason
    if trainer_prompt_ids(renderer.tokenizer, prompt) != ids:
        return PROMPT_IDS_MISMATCH
    return len(ids)
