"""The tiny reasoner: a Llama-architecture causal LM built from a config, and the shipped checkpoint.

`load_tiny_reasoner` loads the checkpoint that ships inside the package (``recovery/toy/checkpoint``) with
the ordinary `AutoModelForCausalLM` / `AutoTokenizer` calls, like any Hub model. A `LlamaConfig` is used on
purpose: a custom tokenizer saved beside a Qwen2 config is reloaded as a Qwen2 tokenizer with other ids.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from recovery.models import tiny_reasoner_dir

# Files a checkpoint directory must hold for from_pretrained (tokenizer files are checked separately).
CHECKPOINT_FILES: tuple[str, ...] = ("config.json", "model.safetensors", "generation_config.json")
TOKENIZER_FILES: tuple[str, ...] = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")

# The paper's continuation sampling (Table 15), also the checkpoint's generation_config defaults.
SAMPLING_TEMPERATURE = 0.6
SAMPLING_TOP_P = 0.95
DEFAULT_MAX_NEW_TOKENS = 320


@dataclass
class TinyModelArguments:
    """Shape of the tiny Llama (a TrlParser dataclass: every field is a recipe key and a `LlamaConfig` key)."""

    hidden_size: int = field(default=128, metadata={"help": "Model width."})
    num_hidden_layers: int = field(default=4, metadata={"help": "Decoder layers."})
    num_attention_heads: int = field(default=4, metadata={"help": "Attention heads."})
    num_key_value_heads: int = field(default=4, metadata={"help": "Key/value heads (GQA when fewer)."})
    intermediate_size: int = field(default=512, metadata={"help": "MLP width."})
    max_position_embeddings: int = field(default=1024, metadata={"help": "Longest sequence (RoPE)."})
    tie_word_embeddings: bool = field(default=True, metadata={"help": "Share input and output embeddings."})


def build_model(tokenizer, args: TinyModelArguments | None = None, *, seed: int = 0):
    """A freshly initialised `LlamaForCausalLM` sized by ``args`` for ``tokenizer``'s vocabulary."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    args = args or TinyModelArguments()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        **asdict(args),
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config = generation_config(tokenizer)
    return model


def generation_config(tokenizer):
    """Defaults saved with the checkpoint: stop at ``<|end|>``, sample with the paper's settings."""
    from transformers import GenerationConfig

    return GenerationConfig(
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        do_sample=True,
        temperature=SAMPLING_TEMPERATURE,
        top_p=SAMPLING_TOP_P,
        max_new_tokens=DEFAULT_MAX_NEW_TOKENS,
    )


def checkpoint_dir() -> Path:
    """Where the shipped checkpoint lives inside the installed package (`recovery.models.tiny_reasoner_dir`)."""

    return tiny_reasoner_dir()


def has_checkpoint(path: str | Path | None = None) -> bool:
    """True when ``path`` (default: the shipped checkpoint) holds a loadable model and tokenizer."""
    directory = Path(path) if path is not None else checkpoint_dir()
    return all((directory / name).is_file() for name in CHECKPOINT_FILES + TOKENIZER_FILES[:1])


def load_tiny_reasoner(path: str | Path | None = None, *, device: str = "cpu"):
    """Load ``(model, tokenizer)`` from ``path`` (default: the checkpoint shipped with the package).

    Plain `AutoModelForCausalLM.from_pretrained` / `AutoTokenizer.from_pretrained` on a local directory:
    nothing is downloaded. The model is returned in eval mode; the tokenizer pads on the left.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    directory = Path(path) if path is not None else checkpoint_dir()
    if not has_checkpoint(directory):
        raise FileNotFoundError(
            f"no tiny-reasoner checkpoint in {directory}; train one with "
            "`python -m recovery.toy.train --config recipes/tiny-reasoner/base/sft.yaml`, then "
            "`--config recipes/tiny-reasoner/base/sft_layouts.yaml`"
        )
    tokenizer = AutoTokenizer.from_pretrained(str(directory))
    model = AutoModelForCausalLM.from_pretrained(str(directory), dtype="float32")
    model.to(device)
    model.eval()
    return model, tokenizer


def count_parameters(model) -> int:
    """Number of distinct parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in model.parameters())
