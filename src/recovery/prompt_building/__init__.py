"""Prompt building: what a model is shown, from the run's user turn to the token ids of a prefilled prompt.

- `recovery.prompt_building.turns`: the chat messages of the project's prompts and of the authors'
  (`ProjectPrompts`, `AuthorsPrompts`: the user turn of ``dataset.prompt_template`` or the authors', their
  system messages); a run's plan picks one (`recovery.plan`).
- `recovery.prompt_building.tokens`: a chat and an intervened reasoning (the *prefill*) rendered with a
  model's conventions at token level (template, think opener, BOS once), or as the authors' text.

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
    AuthorsPrompts,
    ChatPrompts,
    ProjectPrompts,
    template_prompt,
    trace_system_prompt,
)

__all__ = [
    "DEFAULT_PROMPT",
    "AuthorsPrompts",
    "ChatPrompts",
    "ProjectPrompts",
    "build_prompt_ids",
    "build_prompt_text",
    "continuation_ids",
    "continuation_tail",
    "encode_tail",
    "encode_template",
    "needs_opener",
    "raw_prompt_ids",
    "reference_prompt_ids",
    "reference_prompt_text",
    "render_chat",
    "request_prompt_ids",
    "request_prompt_text",
    "template_prompt",
    "trace_system_prompt",
]
