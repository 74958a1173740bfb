"""The `RobustnessCallback` on TRL's colocated vLLM engine: finding the engine, pushing the current weights to
it, waking it from sleep mode and putting it back; generation over it is the vLLM backend's
(`recovery.backends.vllm_engine`).

TRL (>= 1.0, the declared floor) keeps the engine in ``trainer.vllm_generation`` (``llm``, ``sync_weights``,
sleep mode). Only a colocated engine with ``vllm_tensor_parallel_size=1`` can serve the benchmark; server mode
and tensor-parallel colocation are left to HF generation. None of this runs on a CPU machine: it is tested
with a stand-in engine.
"""

from __future__ import annotations

from typing import Any

from recovery.backends.registry import backend_named
from recovery.models import get_spec, spec_for
from recovery.training.minibench import MiniBenchConfig


def colocated_engine(trainer: Any, backend: str) -> Any:
    """TRL's colocated vLLM engine wrapper when it can serve the benchmark, else None (HF generation).

    ``backend`` is `RobustnessCallbackConfig.backend`: ``vllm`` raises when there is none to use, ``auto`` takes
    it when there is one, any other backend (``hf``, or one registered with a ``live`` form) never uses it.
    """
    if backend not in ("auto", "vllm"):  # another registered backend generates with the trainer's model
        return None
    vg = getattr(trainer, "vllm_generation", None)
    usable = (
        vg is not None
        and getattr(vg, "mode", None) == "colocate"
        and getattr(vg, "llm", None) is not None
        and int(getattr(vg, "tensor_parallel_size", 1) or 1) == 1
    )
    if usable:
        return vg
    if backend == "vllm":
        raise ValueError(
            "RobustnessCallback backend='vllm' needs a TRL trainer with a colocated vLLM engine "
            "(use_vllm=True, vllm_mode='colocate', vllm_tensor_parallel_size=1)"
        )
    return None


def refresh_weights(vg: Any, trainer: Any, step: int) -> None:
    """Push the trainer's current weights to the engine unless it already holds them awake (every rank:
    ``sync_weights`` gathers sharded parameters collectively)."""
    if getattr(trainer, "_last_loaded_step", None) != step or getattr(vg, "_llm_weights_sleeping", False):
        vg.sync_weights()
        trainer._last_loaded_step = step


def sleeps(vg: Any) -> bool:
    """Whether the engine runs in TRL 1.x sleep mode (woken for the benchmark, put back to sleep after)."""
    return bool(getattr(vg, "enable_sleep_mode", False))


def put_to_sleep(vg: Any) -> None:
    """Release weights and KV cache again, as TRL leaves the engine after generating."""
    vg.llm.sleep(level=2)
    vg._llm_weights_sleeping = True


def engine_generator(vg: Any, trainer: Any, config: MiniBenchConfig, tokenizer: Any, params_class: Any = None):
    """The vLLM backend over the engine (`recovery.backends.registry`, its ``live`` form), with the policy's
    conventions (``config.spec`` or the model's)."""
    return backend_named("vllm").live(
        vg.llm,
        tokenizer,
        engine_spec(config, getattr(trainer, "model", None), tokenizer),
        seed=config.continuation.seed,
        max_model_len=getattr(vg, "max_model_length", None),
        params_class=params_class,
    )


def engine_spec(config: MiniBenchConfig, model: Any, tokenizer: Any):
    """The model conventions prompts are built with: ``config.spec`` when set, else the model's name's."""

    if config.spec:
        return get_spec(config.spec)
    name = getattr(getattr(model, "config", None), "_name_or_path", "") or "model"
    return spec_for(name, tokenizer)


__all__ = [
    "colocated_engine",
    "engine_generator",
    "engine_spec",
    "put_to_sleep",
    "refresh_weights",
    "sleeps",
]
