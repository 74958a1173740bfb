"""Batched generation with the tiny reasoner, and its accuracy on toy problems.

Small, direct `model.generate` calls with left padding; enough for tests, the benchmark and the
intervention measurements. Sampling is seeded per call (``torch.manual_seed``), so a call with the same
inputs, seed and batch size gives the same text.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from recovery.toy.model import (
    DEFAULT_MAX_NEW_TOKENS,
    SAMPLING_TEMPERATURE,
    SAMPLING_TOP_P,
)
from recovery.toy.tokenizer import prompt_text
from recovery.toy.verify import grade_toy
from recovery.types import Problem


@dataclass(frozen=True, slots=True)
class Sampling:
    """Decoding settings. ``temperature == 0`` means greedy."""

    temperature: float = SAMPLING_TEMPERATURE
    top_p: float = SAMPLING_TOP_P
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS


GREEDY = Sampling(temperature=0.0, top_p=1.0)
PAPER_SAMPLING = Sampling()
# Decoding a 1M-parameter model is a stream of tiny ops: one thread is as fast as two on an idle machine,
# and on a busy one two OpenMP threads spin-wait for each other. So generation uses one thread unless told
# otherwise.
GENERATION_THREADS = 1


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run a block with ``n`` intra-op threads (``None``: leave as is), then restore the previous count."""
    import torch

    if n is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def generate(
    model,
    tokenizer,
    prompts: Sequence[str],
    *,
    sampling: Sampling = GREEDY,
    num_samples: int = 1,
    batch_size: int = 64,
    seed: int = 0,
    num_threads: int | None = GENERATION_THREADS,
) -> list[list[str]]:
    """Continue each prompt ``num_samples`` times; returns, per prompt, the decoded new texts.

    Prompts are raw strings (already chat-templated, possibly with a reasoning prefix appended) and are
    tokenized without extra special tokens. Special tokens are dropped from the output; the think tags
    are ordinary tokens and stay. ``num_threads`` is the torch thread count while generating (see
    `GENERATION_THREADS`; ``None`` keeps the caller's setting).
    """
    import torch

    if num_samples > 1 and sampling.temperature == 0:
        raise ValueError("greedy decoding gives one answer per prompt: use num_samples=1")
    if tokenizer.padding_side != "left":
        raise ValueError("decoder-only batched generation needs a left-padding tokenizer")
    torch.manual_seed(seed)
    out: list[list[str]] = []
    per_batch = max(1, batch_size // num_samples)
    for start in range(0, len(prompts), per_batch):
        chunk = list(prompts[start : start + per_batch])
        enc = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False)
        kwargs = {
            "max_new_tokens": sampling.max_new_tokens,
            "pad_token_id": tokenizer.pad_token_id,
            "eos_token_id": tokenizer.eos_token_id,
        }
        if sampling.temperature > 0:
            kwargs.update(
                do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p, num_return_sequences=num_samples
            )
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        with torch.inference_mode(), torch_threads(num_threads):
            ids = model.generate(**enc, **kwargs)
        new = ids[:, enc["input_ids"].shape[1] :]
        texts = tokenizer.batch_decode(new, skip_special_tokens=True)
        for i in range(len(chunk)):
            out.append(texts[i * num_samples : (i + 1) * num_samples])
    return out


def solve(model, tokenizer, problems: Sequence[Problem], **kwargs) -> list[list[str]]:
    """Responses to the problems' questions (``kwargs`` as for `generate`)."""
    prompts = [prompt_text(tokenizer, p.question) for p in problems]
    return generate(model, tokenizer, prompts, **kwargs)


def accuracy(
    model, tokenizer, problems: Sequence[Problem], *, sampling: Sampling = GREEDY, seed: int = 0, batch_size: int = 64
) -> float:
    """Fraction of problems answered correctly (one response each)."""
    responses = solve(model, tokenizer, problems, sampling=sampling, seed=seed, batch_size=batch_size)
    correct = sum(grade_toy(r[0], p).correct for r, p in zip(responses, problems))
    return correct / len(problems) if problems else 0.0
