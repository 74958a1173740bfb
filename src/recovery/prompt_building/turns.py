"""What the model is shown, as chat messages: the two implementations of the protocol part "prompts"
(`recovery.protocol`), `ProjectPrompts` and `AuthorsPrompts`; a run's plan holds one (`recovery.plan`).

The user turn is the run's (``dataset.prompt_template``, by default the question and the project's instruction,
the bare question in the toy world: `template_prompt`) or the authors'. Every stage, analysis or export that shows
a model a problem builds the turn here, so a stored chain's prompt can be rebuilt exactly.

The project's prompts (default): the user turn alone, each model's own conventions (system prompt,
think opener) applied by the backend (`recovery.prompt_building.tokens`), the intervened reasoning prefilled at
token level.

The authors' prompts (reference; `rllm_robustness/inference.py` ``VllmRunner`` and
``scripts/{generate_traces,continue_interventions}.py`` at the commit in ``reference_protocol.yaml``):

- the user turn is the question, a blank line and their instruction, in every domain;
- every continuation gets the system message "You are a helpful AI assistant." (their runner's default: the
  continuation script passes none), so Phi-4-reasoning-plus and Nemotron lose their own; original traces get
  it too, except for the models their trace script names (Phi's system prompt, Nemotron's "detailed
  thinking on");
- the intervened reasoning is appended to the rendered template as text, with no think opener, and the whole
  text is tokenized at once (`recovery.prompt_building.reference_prompt_text`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from recovery.generation import GenerationRequest, Message, SamplingParams
from recovery.model_config import ModelConfig, model_key
from recovery.models.spec import NEMOTRON_THINKING_ON, PHI4_REASONING_SYSTEM_PROMPT, ModelSpec
from recovery.prompt_building.tokens import (
    build_prompt_ids,
    build_prompt_text,
    reference_prompt_ids,
    reference_prompt_text,
)
from recovery.protocol import reference
from recovery.types import Problem

__all__ = [
    "DEFAULT_PROMPT",
    "AuthorsPrompts",
    "ChatPrompts",
    "ProjectPrompts",
    "template_prompt",
    "trace_system_prompt",
]

DEFAULT_PROMPT = "{question}\n\nPlease reason step by step, and put your final answer within \\boxed{}."

# The named entries of the authors' trace system prompts (reference_protocol.yaml ``trace_system_prompts``).
_NAMED_SYSTEM_PROMPTS = {"phi": PHI4_REASONING_SYSTEM_PROMPT, "detailed thinking on": NEMOTRON_THINKING_ON}


def template_prompt(template: str | None, problem: Problem) -> str:
    """The user turn for ``problem`` from a ``dataset.prompt_template`` (``{question}`` replaced); None is the
    default: the bare question in the toy world, `DEFAULT_PROMPT` elsewhere."""
    if template is None:
        template = "{question}" if problem.domain == "toy" else DEFAULT_PROMPT
    return template.replace("{question}", problem.question)


@dataclass(frozen=True)
class ProjectPrompts:
    """The project's prompts (part "prompts", ``default``): the user turn of ``template`` alone, each model's
    conventions applied by the backend at token level. A run's plan holds one of these or `AuthorsPrompts`;
    every request, training prompt and teacher reads its chat from it."""

    template: str | None = None  # ``dataset.prompt_template`` (None: `template_prompt`'s default)

    #: Whether the prefill is appended to the rendered template as text and tokenized with it (the authors'),
    #: or follows the template after a token boundary, with the model's think opener (`build_prompt_ids`).
    text_prefill: ClassVar[bool] = False

    def user_turn(self, problem: Problem) -> str:
        return template_prompt(self.template, problem)

    def continuation_messages(self, problem: Problem) -> tuple[Message, ...]:
        """The chat whose assistant turn an intervened chain continues (prefilled with the chain's prefix)."""
        return (Message("user", self.user_turn(problem)),)

    def trace_messages(self, model: ModelConfig, problem: Problem) -> tuple[Message, ...]:
        """The chat that asks ``model`` for its original trace of ``problem``."""
        return (Message("user", self.user_turn(problem)),)

    def prompt_ids(self, tokenizer: Any, spec: ModelSpec, messages: Sequence[Message], prefill: str) -> list[int]:
        """The token ids a backend feeds the model for a chat of these prompts and its prefill (a request's
        ``rendering``): the chat template with the model's conventions, the think opener when the template
        lacks it, then the prefill after a token boundary (`build_prompt_ids`)."""
        return build_prompt_ids(tokenizer, spec, messages, prefill)

    def prompt_text(self, tokenizer: Any, spec: ModelSpec, messages: Sequence[Message], prefill: str) -> str:
        """`prompt_ids` as text, for servers that take text (`build_prompt_text`)."""
        return build_prompt_text(tokenizer, spec, messages, prefill)

    def request(
        self,
        request_id: str,
        problem: Problem,
        prefill: str,
        sampling: SamplingParams,
        *,
        max_total_tokens: int | None = None,
    ) -> GenerationRequest:
        """The request continuing ``prefill`` in the assistant turn of ``problem``'s continuation chat, rendered
        the way these prompts render it (`prompt_ids`): what continuations, the mini-benchmark, teachers,
        between-steps paragraphs and probes send."""
        return GenerationRequest(
            request_id=request_id,
            sampling=sampling,
            messages=self.continuation_messages(problem),
            prefill=prefill,
            rendering=self,
            max_total_tokens=max_total_tokens,
        )

    def stored_output(self, text: str) -> str:
        """A generated text as the run stores it: as generated."""
        return text

    def stored_trace(self, text: str, think_open: str) -> str:
        """A generated original trace as stored: with the model's think opener, added when the backend opened the
        think block (template or prefill) so the text does not show it."""
        return text if think_open in text[: len(think_open) + 8] else think_open + text


@dataclass(frozen=True)
class AuthorsPrompts(ProjectPrompts):
    """The authors' prompts (part "prompts", ``reference``; see the module docstring): their user turn and system
    messages, the prefill appended to the rendered template as text, every output stored stripped."""

    text_prefill: ClassVar[bool] = True

    def prompt_ids(self, tokenizer: Any, spec: ModelSpec, messages: Sequence[Message], prefill: str) -> list[int]:
        """The template rendered with the messages as given, the prefill appended as text and the whole text
        tokenized at once (`reference_prompt_ids`)."""
        return reference_prompt_ids(tokenizer, reference_prompt_text(tokenizer, messages, prefill))

    def prompt_text(self, tokenizer: Any, spec: ModelSpec, messages: Sequence[Message], prefill: str) -> str:
        return reference_prompt_text(tokenizer, messages, prefill)

    def user_turn(self, problem: Problem) -> str:
        return f"{problem.question}\n\n{reference()['instruction']}"

    def continuation_messages(self, problem: Problem) -> tuple[Message, ...]:
        return (Message("system", reference()["system_prompt"]), Message("user", self.user_turn(problem)))

    def trace_messages(self, model: ModelConfig, problem: Problem) -> tuple[Message, ...]:
        return (Message("system", trace_system_prompt(model)), Message("user", self.user_turn(problem)))

    def stored_output(self, text: str) -> str:
        """Stripped, as the authors' runner returns every generated text."""
        return text.strip()

    def stored_trace(self, text: str, think_open: str) -> str:
        """Stripped, with no opener added (their runner's output as their trace script stores it)."""
        return text.strip()


#: A run's prompts: the project's or the authors' (`recovery.plan.RunPlan.prompts`).
ChatPrompts = ProjectPrompts


def trace_system_prompt(model: ModelConfig) -> str:
    """The system message the authors' trace script gives ``model``: its named entry, else the default."""
    key = model_key(model)
    for suffix, prompt in reference()["trace_system_prompts"].items():
        if key.endswith(suffix) or model.name == suffix:
            return _NAMED_SYSTEM_PROMPTS.get(prompt, prompt)
    return reference()["system_prompt"]
