"""Which conventions a model follows: whether a model reasons in a think block at all, its think tags, whether the chat
template opens that block, system prompts and the model's recommended decoding for its own traces (how a
prompt is built from them: `recovery.prompt_building`).

Two kinds of model meet in a run. *Reasoning* models (the nine evaluated ones) write a think block; their
continuation prompt is the chat template, the think opener when the template lacks it, then the intervened
reasoning. *Chat* models (the intervention LLM Qwen2.5-32B-Instruct, the doubt and answer judges) get the
plain chat template with its generation prompt and never a think opener (design.md §1, the paper's App. D).
An unknown model is a chat model unless its template opens a think block or its config says it reasons.

Facts per family were checked against published chat templates and model cards (sources cited on each
entry in ``sources``). Whether a template opens the think block is *also* checked at run time on the
actual rendered prompt, so an older template revision (e.g. DeepSeek-R1-Distill before its template
update added ``<think>\\n``) still gets exactly one opener.

This module imports neither torch nor transformers; tokenizers are duck-typed
(``apply_chat_template``, ``encode``, ``decode``, ``bos_token``, ``bos_token_id``).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path, PurePath
from typing import Any

from recovery.models.families import FAMILY_PATTERNS, KNOWN_MODELS, MODELS, chat_spec
from recovery.models.spec import ModelSpec

_PROBE = [{"role": "user", "content": "What is 1 + 1?"}]
_KNOWN_OPENERS: tuple[tuple[str, str], ...] = (("<think>", "</think>"), ("<thought>", "</thought>"))


def registry() -> dict[str, ModelSpec]:
    """All registered specs by name (a copy)."""
    return dict(MODELS)


def get_spec(name: str) -> ModelSpec:
    """The registered spec called ``name``, with the known names in the error."""
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}") from None


def spec_for(model_name_or_path: str, tokenizer: Any = None, *, reasoning: bool | None = None) -> ModelSpec:
    """The conventions for a hub id, a local path or a registry name.

    Lookup order: exact name / hub id / alias; then the path's last component (``/models/QwQ-32B``);
    then family patterns (any Qwen3 or Qwen2.5-Instruct size, any R1-Distill, Llama-3.x-Instruct,
    SmolLM2-Instruct); then, with a ``tokenizer``, detection from its chat template (a generation prompt
    that ends with ``<think>`` or ``<thought>`` marks a reasoning model, anything else a chat model); else a
    generic chat model. ``reasoning`` (a run config's ``models[].reasoning``) overrides the kind: True
    makes an unknown model a reasoning model with ``<think>`` tags, False a chat model.
    """
    spec = _lookup(model_name_or_path, tokenizer)
    if reasoning is None or reasoning == spec.reasoning:
        return spec
    if reasoning:
        return replace(
            spec,
            reasoning=True,
            think_opener=spec.think_open + "\n",
            notes=spec.notes + " Declared a reasoning model by its config.",
        )
    return replace(
        spec,
        reasoning=False,
        think_opener="",
        template_opens_think=False,
        notes=spec.notes + " Declared a chat model by its config.",
    )


def resolve_spec(
    spec_name: str | None, model_name_or_path: str, tokenizer: Any = None, *, reasoning: bool | None = None
) -> ModelSpec:
    """The spec a model config asks for: the registered ``spec_name`` when given, else `spec_for`."""
    if spec_name:
        spec = get_spec(spec_name)
        if reasoning is not None and reasoning != spec.reasoning:
            raise ValueError(
                f"model {model_name_or_path!r}: spec {spec_name!r} is a "
                f"{'reasoning' if spec.reasoning else 'chat'} model, but the config says reasoning: {reasoning}"
            )
        return spec
    return spec_for(model_name_or_path, tokenizer, reasoning=reasoning)


def _lookup(model_name_or_path: str, tokenizer: Any) -> ModelSpec:
    key = model_name_or_path.strip().rstrip("/")
    candidates = [key.lower(), PurePath(key).name.lower()]
    for candidate in candidates:
        for spec in KNOWN_MODELS:
            if spec.matches(candidate):
                return spec
    base = PurePath(key).name
    for pattern, factory in FAMILY_PATTERNS:
        if pattern.search(base):
            hub = key if "/" in key and not key.startswith(("/", ".")) else None
            return factory(base, hub)
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        return detect_spec(tokenizer, name=base)
    return chat_spec(
        base,
        None,
        "generic",
        "Unknown model without a chat template to inspect: a chat model (no think opener). Set "
        "models[].reasoning: true (or spec:) for a reasoning model.",
        (),
    )


def detect_spec(tokenizer: Any, *, name: str = "detected") -> ModelSpec:
    """A spec inferred from ``tokenizer``'s chat template: a reasoning model when its generation prompt ends
    with a think tag (which one gives the tags), else a chat model that never gets an opener."""
    rendered = tokenizer.apply_chat_template(_PROBE, tokenize=False, add_generation_prompt=True)
    tail = rendered.rstrip()
    for open_tag, close_tag in _KNOWN_OPENERS:
        if tail.endswith(open_tag):
            return ModelSpec(
                name=name,
                hub_id=None,
                family="detected",
                think_open=open_tag,
                think_close=close_tag,
                think_opener=open_tag + "\n",
                template_opens_think=True,
                notes="Detected: the chat template's generation prompt opens the reasoning block.",
            )
    return chat_spec(
        name,
        None,
        "detected",
        "Detected: the chat template opens no reasoning block, so this is a chat model (no think opener).",
        (),
    )


# A quantisation tag at the end of a GGUF file's stem: ".Q4_1", "-Q4_K_M", "-IQ3_XS", ".F16", "-BF16".
_GGUF_QUANT_TAG = re.compile(r"[.-](?:I?Q\d[A-Z0-9_]*|F16|F32|BF16)$", re.IGNORECASE)


def gguf_model_name(gguf_file: str) -> str:
    """The model a GGUF file holds, from its name (extension and quantisation tag removed), for looking up
    its conventions: the folder that holds a GGUF rarely names the model, the file usually does.

    >>> gguf_model_name("SmolLM2-135M-Instruct.Q4_1.gguf"), gguf_model_name("/m/Qwen2.5-7B-Instruct-Q4_K_M.gguf")
    ('SmolLM2-135M-Instruct', 'Qwen2.5-7B-Instruct')
    """
    stem = PurePath(gguf_file).name
    if stem.lower().endswith(".gguf"):
        stem = stem[: -len(".gguf")]
    return _GGUF_QUANT_TAG.sub("", stem)


TINY_REASONER = "tiny-reasoner"
"""The name of the toy model shipped inside the package (`recovery.toy`)."""

TINY_REASONER_DIRNAME = "checkpoint"


def is_tiny_reasoner(name_or_path: str | None) -> bool:
    """Whether a model's location (its path, else its name) is the shipped tiny reasoner: only its own name
    is. A misspelt or other name is a model to load like any other, never the toy model under that name."""
    return name_or_path == TINY_REASONER


def tiny_reasoner_dir() -> Path:
    """Where the tiny reasoner's checkpoint lives inside the installed package."""
    from importlib import resources

    return Path(str(resources.files("recovery") / "toy" / TINY_REASONER_DIRNAME))


def weights_location(name_or_path: str) -> str:
    """Where a model's weights are for ``from_pretrained``: the shipped checkpoint's folder for the tiny
    reasoner (`FileNotFoundError`, with how to train it, when it is not installed), anything else as is."""
    if not is_tiny_reasoner(name_or_path):
        return name_or_path
    folder = tiny_reasoner_dir()
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(
            f"the tiny-reasoner checkpoint is not installed in {folder}; train it with "
            "`python -m recovery.toy.train --config recipes/tiny-reasoner/base/sft.yaml`, then "
            "`--config recipes/tiny-reasoner/base/sft_layouts.yaml`"
        )
    return str(folder)
