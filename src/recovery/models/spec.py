"""What a model's conventions are (`ModelSpec`) and the decoding and system prompts the paper fixes for them.

A spec says whether a model reasons in a think block at all, its think tags, whether its chat template opens
that block, its system prompt and its recommended decoding for its own traces. How a prompt is built from
it: `recovery.prompt_building`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from recovery.generation import SamplingParams
from recovery.segment import ThinkTags

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

    @property
    def think_tags(self) -> ThinkTags:
        """(opener, closer): the only tags that open and close this model's reasoning; any other family's tags
        in its text are text (`recovery.segment.split_reasoning`)."""
        return (self.think_open, self.think_close)

    def matches(self, key: str) -> bool:
        """True when ``key`` (lower-cased name, hub id or path basename) names this spec."""
        names = {self.name.lower(), *(a.lower() for a in self.aliases)}
        if self.hub_id:
            names.add(self.hub_id.lower())
        return key in names
