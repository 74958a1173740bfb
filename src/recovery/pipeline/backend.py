"""Build a generation backend from a `ModelConfig` (imports of torch/vLLM happen only here, lazily)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from recovery.backends.base import Generator
from recovery.pipeline.config import ModelConfig

if TYPE_CHECKING:
    from recovery.models import ModelSpec

TINY_REASONER = "tiny-reasoner"


def make_generator(config: ModelConfig, *, seed: int = 0) -> Generator:
    """The backend named by ``config.backend`` for the model at ``config.path``.

    ``path`` unset or ``"tiny-reasoner"`` means the toy model shipped with the package. For the HF backend,
    ``data_parallel_size > 1`` runs that many replicas in worker processes (`ReplicatedGenerator`): the
    way to use several CPU cores with a small model, which decodes on one thread.
    """
    from recovery.models import get_spec, resolve_spec

    if config.backend == "hf" and config.data_parallel_size > 1:
        from dataclasses import replace
        from functools import partial

        from recovery.backends.replicas import ReplicatedGenerator

        one = replace(config, data_parallel_size=1)
        return ReplicatedGenerator(partial(make_generator, seed=seed), (one,), replicas=config.data_parallel_size,
                                   name=config.name)  # fmt: skip

    # A registered spec is checked against ``reasoning`` here; otherwise the backend resolves the spec from
    # the model's tokenizer (its chat template), with ``reasoning`` as the override.
    spec = resolve_spec(config.spec, model_key(config), reasoning=config.reasoning) if config.spec else None
    reasoning = config.reasoning
    if config.backend == "hf":
        from recovery.backends.hf import HFGenerator

        if config.path in (None, TINY_REASONER):
            from recovery.toy import load_tiny_reasoner

            _one_cpu_thread_for_tiny_models(config)

            model, tokenizer = load_tiny_reasoner(device=config.device or "cpu")
            return HFGenerator(model, tokenizer, spec=spec or get_spec(TINY_REASONER), seed=seed,
                               max_batch_rows=max(config.batch_size, 1) * 8)  # fmt: skip
        if spec is not None and spec.name == TINY_REASONER:
            _one_cpu_thread_for_tiny_models(config)
        return HFGenerator(config.path, spec=spec, reasoning=reasoning, dtype=config.dtype, device=config.device, seed=seed,
                           max_batch_rows=max(config.batch_size, 1) * 8, gguf_file=config.gguf_file)  # fmt: skip
    if config.backend == "vllm":
        from recovery.backends.vllm import VLLMConfig, VLLMGenerator

        vcfg = VLLMConfig(
            model=config.path or config.name, tensor_parallel_size=config.tensor_parallel_size,
            data_parallel_size=config.data_parallel_size, dtype=config.dtype, max_model_len=config.max_model_len,
            gpu_memory_utilization=config.gpu_memory_utilization, seed=seed,
        )  # fmt: skip
        return VLLMGenerator(vcfg, spec=spec, reasoning=reasoning)
    if config.backend == "openai":
        from recovery.backends.openai_compat import OpenAICompatGenerator

        return OpenAICompatGenerator(
            base_url=config.base_url, model=config.path or config.name, api_key=config.api_key, spec=spec, reasoning=reasoning,
            max_concurrency=config.max_concurrency, timeout_s=config.request_timeout_s,
        )  # fmt: skip
    raise ValueError(f"unknown backend {config.backend!r}")


def model_spec(config: ModelConfig) -> "ModelSpec":
    """The conventions of ``config``'s model without loading its tokenizer: its ``spec``, else what its path or
    name (and ``reasoning``) say. A model whose think tags only its chat template reveals should name its
    ``spec``, so that readers of the run (the aggregate's length overhead) see the same tags as the backend."""
    from recovery.models import resolve_spec

    return resolve_spec(config.spec, model_key(config), reasoning=config.reasoning)


def model_key(config: ModelConfig) -> str:
    """What names ``config``'s model for its conventions: a GGUF's model name (from its file name), else the
    path or the config's name."""
    if config.gguf_file:
        from recovery.backends.base import gguf_model_name

        return gguf_model_name(config.gguf_file)
    return config.path or config.name


def _one_cpu_thread_for_tiny_models(config: ModelConfig) -> None:
    """A 1M-parameter model decodes faster on one CPU thread: its matrices are too small to split, and on a
    busy 2-core machine intra-op threads spin against each other (measured here: 2 threads were several
    times slower than 1 while another process trained)."""
    if (config.device or "cpu") == "cpu":
        import torch

        torch.set_num_threads(1)
