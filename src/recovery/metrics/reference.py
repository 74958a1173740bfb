"""The authors' complete answer and length overhead (``protocol: reference``, part ``length``; issue 29).

The authors' public code (`recovery.protocol.reference`: ExplainableML/RLLM-CoT-Robustness at f3ec899)
measures a continuation on its *complete answer*: the intervened reasoning prefix, a separator, and the
continuation as their runner returned it (stripped) — scripts/continue_interventions.py ``main`` builds
``prefix + separator_for(prefix) + completion`` with rllm_robustness/continuation.py ``separator_for``.
Their length overhead (scripts/length_overhead.py ``main`` with ``--remove-intervention-text``, characters)
is, per completion, ``max(0, len(complete answer) - len(intervention text))`` against the length of the
original *whole response* (reasoning, closing tag and answer), in percent; a trace with an empty response
is left out. `recovery.types.Intervened.inserted_text` is their intervention text under the reference
interventions (for random characters: the whole mutated step).

The project's own measure (`recovery.metrics.chain.length_change_pct`) compares reasoning with reasoning
and removes only the inserted characters: the default, because the answer part and the separator are not
reasoning overhead. Both are defined here on arrays (one definition, column-wise) and per continuation.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "complete_answer",
    "reference_length_pct",
    "reference_length_change",
    "separator_for",
    "separator_lengths",
]


def separator_for(prefix: str) -> str:
    """What the authors put between a prefix and its continuation: nothing after a blank line, one newline
    after a newline, else a blank line (rllm_robustness/continuation.py ``separator_for``).

    >>> separator_for("a\\n\\n"), separator_for("a\\n"), separator_for("a")
    ('', '\\n', '\\n\\n')
    """
    if prefix.endswith("\n\n"):
        return ""
    if prefix.endswith("\n"):
        return "\n"
    return "\n\n"


def complete_answer(prefix: str, continuation: str) -> str:
    """The authors' complete answer of one continuation: ``prefix + separator_for(prefix) + continuation``,
    the continuation stripped as their vLLM runner strips every output (rllm_robustness/inference.py
    ``VllmRunner.generate``; a continuation stored stripped already is unchanged).

    >>> complete_answer("Step 1.", "  So 4.</think> 4 ")
    'Step 1.\\n\\nSo 4.</think> 4'
    """
    return prefix + separator_for(prefix) + continuation.strip()


def separator_lengths(prefixes) -> np.ndarray:
    """`separator_for`'s length for each prefix of an Arrow string array (nulls as empty), as float64."""
    import pyarrow.compute as pc

    texts = pc.fill_null(prefixes, "")
    blank = pc.ends_with(texts, "\n\n").to_numpy(zero_copy_only=False)
    newline = pc.ends_with(texts, "\n").to_numpy(zero_copy_only=False)
    return np.where(blank, 0.0, np.where(newline, 1.0, 2.0))


def reference_length_pct(kept_with_separator, original_response, new) -> np.ndarray:
    """The authors' per-completion length change in percent, element-wise.

    ``kept_with_separator`` = prefix + separator − intervention text, ``original_response`` = the original
    whole response, ``new`` = the stripped continuation (any one unit, here characters). NaN where the
    original response is empty (the authors skip those rows).

    >>> reference_length_pct([8, -30], [20, 20], [12, 10])
    array([   0., -100.])
    """
    kept, original, new = (np.asarray(x, dtype=np.float64) for x in (kept_with_separator, original_response, new))
    adjusted = np.maximum(0.0, kept + new)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(original > 0, (adjusted - original) / original * 100.0, np.nan)


def reference_length_change(prefix: str, inserted_text: str, continuation: str, original_response: str) -> float:
    """`reference_length_pct` of one continuation, from the texts (scripts/length_overhead.py ``main``).

    >>> reference_length_change("a\\n\\nXX", "XX", "bb", "a\\n\\nbbbb")    # (5 + 2 + 2 - 2) vs 7 → 0 %
    0.0
    """
    if not original_response:
        raise ValueError("the original response is empty; the authors' length change is undefined")
    adjusted = max(0, len(complete_answer(prefix, continuation)) - len(inserted_text))
    return (adjusted - len(original_response)) / len(original_response) * 100.0
