"""Model swap (paper §5, Table 9): chains written by model A are continued by model B.

A run with ``swap_to: B`` (a name in ``models``) still generates every model's original traces and
intervenes on them as usual, but samples the continuations of *every* chain with model B (B's backend,
B's chat template and B's decoding exceptions). Continuation rows record B in their ``model`` column;
aggregates label a swapped chain's group ``"A→B"`` (`pair_label`), so the report shows both models and a
chain of B itself stays plain ``"B"`` (the matrix diagonal).

This module imports nothing from the pipeline's config at run time, so `recovery.pipeline.config` can
use `validate_swap_to` in its checks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from recovery.pipeline.config import ModelConfig, RunConfig

ARROW = "→"


def validate_swap_to(swap_to: str | None, model_names: Sequence[str]) -> None:
    """Raise `ValueError` unless ``swap_to`` is unset or names one of ``model_names``.

    Model names must not contain the arrow when swapping, or the ``"A→B"`` labels would be ambiguous.
    """
    if swap_to is None:
        return
    if swap_to not in model_names:
        raise ValueError(
            f"swap_to {swap_to!r} is not one of the run's models ({', '.join(model_names)}); "
            "the continuing model must be listed under models"
        )
    bad = [n for n in model_names if ARROW in n]
    if bad:
        raise ValueError(f"model names must not contain {ARROW!r} when swap_to is set, got {bad}")


def continuation_model(config: RunConfig, chain_model: str) -> ModelConfig:
    """The `ModelConfig` that continues the chains of ``chain_model``: ``swap_to``'s model when set."""
    name = config.swap_to or chain_model
    for model in config.models:
        if model.name == name:
            return model
    raise KeyError(f"model {name!r} is not among the run's models")


def pair_label(original: str, continued: str | None) -> str:
    """The aggregate label of a chain of ``original`` continued by ``continued``.

    >>> pair_label("A", "B"), pair_label("A", "A"), pair_label("A", None)
    ('A→B', 'A', 'A')
    """
    if not continued or continued == original:
        return original
    return f"{original}{ARROW}{continued}"


def split_label(label: str) -> tuple[str, str]:
    """(original model, continuing model) of an aggregate label; a plain name continues itself.

    >>> split_label("A→B"), split_label("A")
    (('A', 'B'), ('A', 'A'))
    """
    original, arrow, continued = label.partition(ARROW)
    return (original, continued) if arrow else (label, label)
