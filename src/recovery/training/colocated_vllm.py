"""The `RobustnessCallback` on TRL's colocated vLLM engine: finding the engine, pushing the current weights to
it, waking it from sleep mode and putting it back, and the generation protocol over it.

TRL (>= 1.0, the declared floor) keeps the engine in ``trainer.vllm_generation`` (``llm``, ``sync_weights``,
sleep mode). Only a colocated engine with ``vllm_tensor_parallel_size=1`` can serve the benchmark; server mode
and tensor-parallel colocation are left to HF generation. None of this runs on a CPU machine: it is tested
with a stand-in engine.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from recovery.generation import GenerationRequest, GenerationResult
from recovery.training.minibench import MiniBenchConfig


def colocated_engine(trainer: Any, backend: str) -> Any:
    """TRL's colocated vLLM engine wrapper when it can serve the benchmark, else None (HF generation).

    ``backend`` is `RobustnessCallbackConfig.backend`: ``hf`` never uses the engine; ``vllm`` raises when
    there is none to use; ``auto`` takes it when there is one.
    """
    if backend == "hf":
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
    """A `VLLMEngineGenerator` over the engine, with the policy's conventions (``config.spec`` or the model's)."""
    return VLLMEngineGenerator(
        vg.llm,
        tokenizer,
        engine_spec(config, getattr(trainer, "model", None), tokenizer),
        seed=config.continuation.seed,
        max_model_len=getattr(vg, "max_model_length", None),
        params_class=params_class,
    )


def engine_spec(config: MiniBenchConfig, model: Any, tokenizer: Any):
    """The model conventions prompts are built with: ``config.spec`` when set, else the model's name's."""
    from recovery.models import get_spec, spec_for

    if config.spec:
        return get_spec(config.spec)
    name = getattr(getattr(model, "config", None), "_name_or_path", "") or "model"
    return spec_for(name, tokenizer)


class VLLMEngineGenerator:
    """The generation protocol over an already-built ``vllm.LLM`` (TRL's colocated engine).

    Prompts are built at token level with `recovery.models` (as `recovery.backends.vllm` does), one
    vLLM request per `GenerationRequest` with ``n`` samples and the request's seed. ``params_class``
    defaults to ``vllm.SamplingParams`` (a stand-in can be passed in tests).
    """

    name = "vllm-colocate"

    def __init__(
        self,
        llm: Any,
        tokenizer: Any,
        spec: Any,
        *,
        seed: int = 0,
        max_model_len: int | None = None,
        params_class: Any = None,
    ) -> None:
        self.llm = llm
        self.tokenizer = tokenizer
        self.spec = spec
        self.seed = seed
        self.max_model_len = max_model_len
        self.params_class = params_class

    def generate(self, requests: Sequence[GenerationRequest]) -> Iterator[GenerationResult]:
        from recovery.backends.vllm import VLLMConfig, build_inputs, to_result

        config = VLLMConfig(model="colocated", seed=self.seed, max_model_len=self.max_model_len)
        ready, failed = build_inputs(self.tokenizer, self.spec, requests, config)
        yield from failed
        if not ready:
            return
        params_class = self.params_class
        if params_class is None:
            from vllm import SamplingParams as params_class
        params = [params_class(**item.sampling) for item in ready]
        outputs = self.llm.generate([item.prompt for item in ready], params, use_tqdm=False)
        eos = getattr(self.tokenizer, "eos_token", None) or ""
        for item, output in zip(ready, outputs, strict=True):
            yield to_result(item.request_id, output, eos)

    def close(self) -> None:
        """The engine belongs to the trainer: nothing to release."""


__all__ = [
    "VLLMEngineGenerator",
    "colocated_engine",
    "engine_generator",
    "engine_spec",
    "put_to_sleep",
    "refresh_weights",
    "sleeps",
]
