"""Generation backends behind one protocol (`recovery.generation.Generator`).

Backends import their heavy dependencies lazily, so ``import recovery.backends`` stays light:

- `HFGenerator` (``recovery.backends.hf``): transformers, CPU or GPU; needs the ``hf`` extra.
- `VLLMGenerator` (``recovery.backends.vllm``): vLLM offline engine; needs the ``vllm`` extra and a GPU.
- `OpenAICompatGenerator` (``recovery.backends.openai_compat``): any OpenAI-compatible server (vLLM,
  SGLang) through the ``openai`` client, plus a tokenizer to build token-level prompts locally; needs the
  ``server`` extra.
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "HFGenerator": "recovery.backends.hf",
    "VLLMGenerator": "recovery.backends.vllm",
    "VLLMConfig": "recovery.backends.vllm",
    "OpenAICompatGenerator": "recovery.backends.openai_compat",
    "ServerConfig": "recovery.backends.openai_compat",
    "ServerError": "recovery.backends.openai_compat",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'recovery.backends' has no attribute {name!r}")


__all__ = [
    *_LAZY,
]
