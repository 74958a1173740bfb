"""What the model is shown, as chat messages, under the run's protocol (`recovery.protocol`, part "prompts").

The user turn is the run's (`user_prompt`: ``dataset.prompt_template``, by default the question and the
project's instruction, the bare question in the toy world) or the authors'. Every stage, analysis or export
that shows a model a problem builds the turn here, so a stored chain's prompt can be rebuilt exactly.

The project's prompts (default): the user turn of `user_prompt`, each model's own conventions (system prompt,
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

from recovery.generation import Message
from recovery.models.spec import NEMOTRON_THINKING_ON, PHI4_REASONING_SYSTEM_PROMPT
from recovery.protocol import reference
from recovery.run_config import ModelConfig, RunConfig, model_key
from recovery.types import Problem

__all__ = [
    "DEFAULT_PROMPT",
    "continuation_messages",
    "prompt_style",
    "template_messages",
    "template_prompt",
    "trace_messages",
    "trace_system_prompt",
    "user_prompt",
    "user_turn",
    "uses_reference_prompts",
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


def template_messages(template: str | None, problem: Problem) -> tuple[Message, ...]:
    """The project's chat for ``problem`` where there is no run config (a renderer or teacher built on its own):
    the user turn of ``template`` (`template_prompt`) alone; with a run, use `continuation_messages`."""
    return (Message("user", template_prompt(template, problem)),)


def user_prompt(config: RunConfig, problem: Problem) -> str:
    """The run's user turn for ``problem`` (see `DatasetConfig.prompt_template`)."""
    return template_prompt(config.dataset.prompt_template, problem)


def uses_reference_prompts(config: RunConfig) -> bool:
    return config.style("prompts") == "reference"


def prompt_style(config: RunConfig) -> str:
    """The `GenerationRequest.prompt_style` of the run's trace and continuation requests."""
    return "reference" if uses_reference_prompts(config) else "default"


def user_turn(config: RunConfig, problem: Problem) -> str:
    """The user turn for ``problem``: the run's (`user_prompt`) or the authors' (question + instruction)."""
    if uses_reference_prompts(config):
        return f"{problem.question}\n\n{reference()['instruction']}"
    return user_prompt(config, problem)


def trace_system_prompt(model: ModelConfig) -> str:
    """The system message the authors' trace script gives ``model``: its named entry, else the default."""
    key = model_key(model)
    for suffix, prompt in reference()["trace_system_prompts"].items():
        if key.endswith(suffix) or model.name == suffix:
            return _NAMED_SYSTEM_PROMPTS.get(prompt, prompt)
    return reference()["system_prompt"]


def trace_messages(config: RunConfig, model: ModelConfig, problem: Problem) -> tuple[Message, ...]:
    """The chat that asks ``model`` for its original trace of ``problem``."""
    user = Message("user", user_turn(config, problem))
    if uses_reference_prompts(config):
        return (Message("system", trace_system_prompt(model)), user)
    return (user,)


def continuation_messages(config: RunConfig, problem: Problem) -> tuple[Message, ...]:
    """The chat whose assistant turn an intervened chain continues (prefilled with the chain's prefix)."""
    user = Message("user", user_turn(config, problem))
    if uses_reference_prompts(config):
        return (Message("system", reference()["system_prompt"]), user)
    return (user,)
