"""The policy's weights as one module for generating inside a training step: gathered under ZeRO-3, with
gradient checkpointing off while it generates and the run's own checkpointing settings back afterwards."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def unwrapped_for_generation(trainer: Any, args: Any, model: Any) -> Iterator[Any]:
    """``model`` unwrapped from ``trainer``'s accelerator for generation (TRL's `unwrap_model_for_generation`
    where TRL is installed, which gathers ZeRO-3 shards; accelerate's unwrap otherwise)."""
    accelerator = getattr(trainer, "accelerator", None)
    if accelerator is None:
        yield getattr(model, "module", model)
        return
    try:
        from trl.models.utils import unwrap_model_for_generation
    except ImportError:  # plain transformers: no ZeRO-3 gathering
        yield accelerator.unwrap_model(model)
        return
    wrapped = getattr(trainer, "model_wrapped", None) or model
    checkpointing_kwargs = getattr(args, "gradient_checkpointing_kwargs", None)
    if "gradient_checkpointing_kwargs" in inspect.signature(unwrap_model_for_generation).parameters:
        with unwrap_model_for_generation(wrapped, accelerator, gradient_checkpointing_kwargs=checkpointing_kwargs) as m:
            yield m
        return
    # TRL < 1.16 turns gradient checkpointing back on with transformers' default kwargs when it is done: the
    # run's own (``use_reentrant`` ...) are put back here, or training would go on with different ones.
    checkpointing = bool(getattr(accelerator.unwrap_model(wrapped), "is_gradient_checkpointing", False))
    with unwrap_model_for_generation(wrapped, accelerator) as m:
        yield m
    if checkpointing and checkpointing_kwargs:
        m.gradient_checkpointing_enable(gradient_checkpointing_kwargs=checkpointing_kwargs)
