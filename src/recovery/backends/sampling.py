"""Token sampling for the HF backend: temperature, top-k, top-p by inverse-CDF on given uniforms.

Sampling takes its random numbers as an argument (one uniform per row) instead of drawing them inside,
so the caller decides where randomness comes from. The HF backend draws them from a per-request
`torch.Generator`, a fixed number per step, which makes a request's samples depend only on its own seed
and not on which other requests share the batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from recovery.generation import SamplingParams


def sample_tokens(logits: torch.Tensor, params: SamplingParams, uniforms: torch.Tensor | None) -> torch.Tensor:
    """Pick one token per row of ``logits`` ([rows, vocab]) under ``params``.

    Greedy (argmax) when ``params.temperature == 0``; otherwise softmax(logits / T) restricted to the top-k
    tokens and to the smallest set whose probability reaches top-p (the most likely token is always
    kept), sampled by inverse CDF with ``uniforms`` ([rows] in [0, 1)).
    """
    if params.temperature == 0:
        return logits.argmax(dim=-1)
    if uniforms is None:
        raise ValueError("sampling with temperature > 0 needs uniforms")
    scaled = logits.float() / params.temperature
    top_k = params.top_k if params.top_k and params.top_k > 0 else None
    if top_k is None and params.top_p >= 1.0:
        probs = torch.softmax(scaled, dim=-1)
        return _inverse_cdf(probs, uniforms)
    if top_k is not None and top_k < scaled.shape[-1]:
        values, order = torch.topk(scaled, top_k, dim=-1)  # sorted descending
    else:
        values, order = torch.sort(scaled, dim=-1, descending=True)
    probs = torch.softmax(values, dim=-1)
    if params.top_p < 1.0:
        before = torch.cumsum(probs, dim=-1) - probs  # mass strictly above each token
        probs = probs.masked_fill(before >= params.top_p, 0.0)
    picked = _inverse_cdf(probs, uniforms)
    return order.gather(-1, picked.unsqueeze(-1)).squeeze(-1)


def _inverse_cdf(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    cdf = torch.cumsum(probs, dim=-1)
    targets = (uniforms.to(cdf.dtype) * cdf[:, -1]).unsqueeze(-1)
    picked = torch.searchsorted(cdf, targets, right=True).squeeze(-1)
    # A zero-probability token can never be returned: clamp past-the-end draws (rounding) to the last
    # token with mass.
    last = (probs > 0).int().cumsum(-1).argmax(-1)
    return torch.minimum(picked, last)


def find_stop(text: str, stops: Sequence[str]) -> int:
    """Index of the earliest occurrence of any stop string in ``text``, or -1."""
    hits = [i for i in (text.find(stop) for stop in stops if stop) if i >= 0]
    return min(hits) if hits else -1
