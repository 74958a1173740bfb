"""Prompt building: what a model is shown, from the run's user turn to the token ids of a prefilled prompt.

- `recovery.prompt_building.turns`: the chat messages under the run's protocol (the user turn of
  ``dataset.prompt_template`` or the authors', their system messages).
- `recovery.prompt_building.tokens`: a chat and an intervened reasoning (the *prefill*) rendered with a
  model's conventions at token level (template, think opener, BOS once), or as the authors' text.
- `recovery.prompt_building.requests`: a run's continuation requests (messages, prefill, prompt style,
  sampling, seed, window), for the continuations stage and the mini-benchmark on the run's chains alike.

Neither imports torch nor transformers; tokenizers are duck-typed.
"""

from recovery.prompt_building.tokens import (
    build_prompt_ids,
    build_prompt_text,
    continuation_ids,
    continuation_tail,
    encode_tail,
    encode_template,
    needs_opener,
    raw_prompt_ids,
    reference_prompt_ids,
    reference_prompt_text,
    render_chat,
    request_prompt_ids,
    request_prompt_text,
)
from recovery.prompt_building.turns import (
    DEFAULT_PROMPT,
    continuation_messages,
    prompt_style,
    template_messages,
    template_prompt,
    trace_messages,
    trace_system_prompt,
    user_prompt,
    user_turn,
    uses_reference_prompts,
)

__all__ = [
    "DEFAULT_PROMPT",
    "build_prompt_ids",
    "build_prompt_text",
    "continuation_ids",
    "continuation_messages",
    "continuation_tail",
    "encode_tail",
    "encode_template",
    "needs_opener",
    "prompt_style",
    "raw_prompt_ids",
    "reference_prompt_ids",
    "reference_prompt_text",
    "render_chat",
    "request_prompt_ids",
    "request_prompt_text",
    "template_messages",
    "template_prompt",
    "trace_messages",
    "trace_system_prompt",
    "user_prompt",
    "user_turn",
    "uses_reference_prompts",
]
