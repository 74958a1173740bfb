"""Per-model conventions: whether a model reasons in a think block at all, its think tags, whether the chat
template opens that block, system prompts and the model's recommended decoding for its own traces; and where
a model's weights are (the shipped tiny reasoner, a GGUF file's model).

Two kinds of model meet in a run. *Reasoning* models (the nine evaluated ones) write a think block; their
continuation prompt is the chat template, the think opener when the template lacks it, then the intervened
reasoning. *Chat* models (the intervention LLM Qwen2.5-32B-Instruct, the doubt and answer judges) get the
plain chat template with its generation prompt and never a think opener (design.md §1, the paper's App. D).
An unknown model is a chat model unless its template opens a think block or its config says it reasons.

- `recovery.models.spec`: `ModelSpec` and the decoding and system prompts the paper fixes.
- `recovery.models.families`: the registry of known families (`MODELS`), each entry citing its sources.
- `recovery.models.resolve`: name, path or tokenizer → spec; the tiny reasoner's location.

Nothing here imports torch or transformers; tokenizers are duck-typed (``apply_chat_template``, ``encode``,
``decode``, ``bos_token``, ``bos_token_id``).
"""

from recovery.models.families import MODELS, PAPER_MODELS
from recovery.models.resolve import (
    TINY_REASONER,
    detect_spec,
    get_spec,
    gguf_model_name,
    is_tiny_reasoner,
    registry,
    resolve_spec,
    spec_for,
    tiny_reasoner_dir,
    weights_location,
)
from recovery.models.spec import (
    NEMOTRON_THINKING_ON,
    PAPER_CONTINUATION,
    PHI4_REASONING_SYSTEM_PROMPT,
    ModelSpec,
)

__all__ = [
    "MODELS",
    "NEMOTRON_THINKING_ON",
    "PAPER_CONTINUATION",
    "PAPER_MODELS",
    "PHI4_REASONING_SYSTEM_PROMPT",
    "TINY_REASONER",
    "ModelSpec",
    "detect_spec",
    "get_spec",
    "gguf_model_name",
    "is_tiny_reasoner",
    "registry",
    "resolve_spec",
    "spec_for",
    "tiny_reasoner_dir",
    "weights_location",
]
