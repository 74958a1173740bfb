"""Recording the pre-layer residual stream of each prompt's final token with forward pre-hooks, and loading
the model to record it from. torch and transformers are imported only here, inside the functions."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from recovery.backends.registry import model_location
from recovery.models import TINY_REASONER, get_spec, is_tiny_reasoner, spec_for
from recovery.toy import load_tiny_reasoner

if TYPE_CHECKING:
    from recovery.model_config import ModelConfig


def find_decoder_layers(model: Any):
    """The decoder layers (an ``nn.ModuleList``) of a causal LM, found generically.

    Known layouts first (Llama/Qwen/Mistral/Phi ``model.layers``, GPT-2 ``transformer.h``, GPT-NeoX
    ``gpt_neox.layers``, OPT ``model.decoder.layers``); otherwise the only ``ModuleList`` whose length is the
    config's ``num_hidden_layers``. Raises `ValueError` when none (or several) qualify.
    """
    from torch import nn

    for path in (
        "model.layers",
        "transformer.h",
        "gpt_neox.layers",
        "model.decoder.layers",
        "model.language_model.layers",
    ):
        obj = model
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if isinstance(obj, nn.ModuleList) and len(obj) > 0:
            return obj
    config = getattr(model, "config", None)
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    n_layers = getattr(text_config, "num_hidden_layers", None)
    found = [m for _, m in model.named_modules() if isinstance(m, nn.ModuleList) and n_layers and len(m) == n_layers]
    if len(found) != 1:
        raise ValueError(
            f"cannot find the decoder layers of {type(model).__name__}: {len(found)} ModuleList(s) of length "
            f"num_hidden_layers={n_layers}"
        )
    return found[0]


def record_residuals(
    model: Any,
    prompts: Sequence[Sequence[int]],
    *,
    batch_size: int = 8,
    pad_id: int = 0,
    progress: bool = False,
) -> np.ndarray:
    """The pre-layer residual stream of each prompt's final token at every decoder layer.

    Returns float32 ``[n_layers, n_prompts, hidden]``: entry ``[l, i]`` is the input of decoder layer ``l``
    (what its attention block reads, before its input norm) at the last token of prompt ``i``. Recorded
    with forward pre-hooks, in batches sorted by length (less padding), left-padded with explicit position
    ids so padding changes neither positions nor attention; no gradients. Prompts are used as given (see
    `run_probes` for truncation).
    """
    import torch
    from tqdm.auto import tqdm

    if not prompts:
        raise ValueError("record_residuals needs at least one prompt")
    empty = [i for i, p in enumerate(prompts) if len(p) == 0]
    if empty:
        raise ValueError(f"prompt(s) {empty[:5]} are empty")
    layers = find_decoder_layers(model)
    # The body without the LM head: the head's logits (vocabulary × tokens) are never needed here.
    body = getattr(model, "base_model", model)
    device = next(model.parameters()).device
    captured: list[torch.Tensor | None] = [None] * len(layers)

    def hook_for(index: int):
        def hook(module, args, kwargs):
            hidden = args[0] if args else kwargs["hidden_states"]
            captured[index] = hidden[:, -1, :].detach().to(torch.float32).cpu()

        return hook

    handles = [layer.register_forward_pre_hook(hook_for(i), with_kwargs=True) for i, layer in enumerate(layers)]
    order = sorted(range(len(prompts)), key=lambda i: (len(prompts[i]), i))
    out: np.ndarray | None = None
    try:
        with torch.inference_mode():
            bar = tqdm(total=len(order), desc="activations", unit="prefix", disable=not progress, dynamic_ncols=True)
            for start in range(0, len(order), batch_size):
                rows = order[start : start + batch_size]
                width = max(len(prompts[i]) for i in rows)
                ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
                mask = torch.zeros((len(rows), width), dtype=torch.long)
                for r, i in enumerate(rows):  # left padding: every prompt's last token sits at column -1
                    ids[r, width - len(prompts[i]) :] = torch.tensor(list(prompts[i]), dtype=torch.long)
                    mask[r, width - len(prompts[i]) :] = 1
                positions = (mask.cumsum(-1) - 1).clamp(min=0)
                captured[:] = [None] * len(layers)
                body(
                    input_ids=ids.to(device),
                    attention_mask=mask.to(device),
                    position_ids=positions.to(device),
                    use_cache=False,
                )
                if any(c is None for c in captured):
                    raise RuntimeError("a decoder layer was not called; cannot record its residual stream")
                if out is None:
                    out = np.empty((len(layers), len(prompts), captured[0].shape[-1]), dtype=np.float32)
                for layer_index, values in enumerate(captured):
                    out[layer_index, rows] = values.numpy()
                bar.update(len(rows))
            bar.close()
    finally:
        for handle in handles:
            handle.remove()
    assert out is not None
    return out


def load_probe_model(model_config: ModelConfig, *, path: str | None = None, device: str | None = None):
    """``(model, tokenizer, spec)`` for a run's model: the shipped tiny reasoner or an HF checkpoint.

    Activations need the weights in this process, so API-served models need a local ``path``.
    """

    path = path or model_location(model_config)  # path, else name; the tiny reasoner only by its own name
    device = device or getattr(model_config.settings, "device", None)
    if is_tiny_reasoner(path):
        model, tokenizer = load_tiny_reasoner(device=device or "cpu")
        return model, tokenizer, get_spec(model_config.spec or TINY_REASONER)
    if model_config.backend == "openai" and path == model_config.name and not Path(path).exists():
        raise ValueError(f"model {model_config.name!r} is served over an API; pass a local checkpoint path")
    from recovery.backends.hf import load_model_and_tokenizer  # lazy: loads torch

    model, tokenizer = load_model_and_tokenizer(
        path, dtype=getattr(model_config.settings, "dtype", "auto"), device=device
    )
    spec = get_spec(model_config.spec) if model_config.spec else spec_for(path, tokenizer)
    return model, tokenizer, spec
