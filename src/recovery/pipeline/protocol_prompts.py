"""What the pipeline does with a generated text and a request's window under the run's protocol
(`recovery.protocol`, parts "prompts" and "budget"); the messages themselves are built in
`recovery.prompt_building.turns`.

- The project's protocol stores outputs as generated, and bounds each request by its ``max_new_tokens``
  alone.
- The authors' runner (reference; `rllm_robustness/inference.py` ``VllmRunner`` at the commit in
  ``reference_protocol.yaml``) strips every generated text, so stored traces and continuations are stripped;
  their budget has prompt and output share one 32,768-token window.
"""

from __future__ import annotations

from recovery.prompt_building import uses_reference_prompts
from recovery.protocol import reference
from recovery.run_config import RunConfig


def stored_text(config: RunConfig, text: str) -> str:
    """A generated text as the run stores it: as generated, or stripped as the authors' runner did."""
    return text.strip() if uses_reference_prompts(config) else text


def max_total_tokens(config: RunConfig) -> int | None:
    """The window prompt and output share (`GenerationRequest.max_total_tokens`): the authors' 32,768 tokens
    under the reference budget, else none (each request's ``max_new_tokens`` alone)."""
    return int(reference()["max_model_len"]) if config.style("budget") == "reference" else None
