"""What the pipeline does with a generated text under the run's protocol (`recovery.protocol`, part
"prompts"); the requests themselves (messages, window) are built in `recovery.prompt_building`.

- The project's protocol stores outputs as generated.
- The authors' runner (reference; `rllm_robustness/inference.py` ``VllmRunner`` at the commit in
  ``reference_protocol.yaml``) strips every generated text, so stored traces and continuations are stripped.
"""

from __future__ import annotations

from recovery.prompt_building import uses_reference_prompts
from recovery.run_config import RunConfig


def stored_text(config: RunConfig, text: str) -> str:
    """A generated text as the run stores it: as generated, or stripped as the authors' runner did."""
    return text.strip() if uses_reference_prompts(config) else text
