"""`VLLMGenerator`: offline vLLM with token prompts, parallel sampling (``n``) and prefix caching.

vllm is an optional extra (``pip install recovery[vllm]``) and is imported only when an engine is built,
so this module and its pure helpers work without it:

- `llm_kwargs` — the exact ``vllm.LLM(...)`` arguments (prefix caching on, tensor parallel, dtype, ...);
- `sampling_kwargs` — the exact ``vllm.SamplingParams(...)`` arguments for one request;
- `build_inputs` — token prompts (``{"prompt_token_ids": [...]}``) built with `recovery.models`;
- `to_result` — a vLLM ``RequestOutput`` mapped to a `GenerationResult`.

Data parallelism runs one engine per replica in its own process (``data_parallel_size`` workers, each
seeing ``tensor_parallel_size`` GPUs through ``CUDA_VISIBLE_DEVICES``), which is how vLLM's own offline
data-parallel example works for dense models; requests are split into contiguous chunks so neighbours that
share a prefix land on the same replica and hit its prefix cache.
"""

from __future__ import annotations

import importlib
import logging
import multiprocessing as mp
import os
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from recovery.generation import GenerationRequest, GenerationResult, Sample, SamplingParams
from recovery.ids import fallback_request_seed
from recovery.models import ModelSpec, spec_for
from recovery.process_guard import guard_worker
from recovery.prompt_building import request_prompt_ids

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VLLMConfig:
    """Engine settings. ``extra`` is passed to ``vllm.LLM`` as is (e.g. ``enforce_eager``)."""

    model: str
    tokenizer: str | None = None
    tensor_parallel_size: int = 1
    data_parallel_size: int = 1
    dtype: str = "auto"
    max_model_len: int | None = None
    gpu_memory_utilization: float = 0.9
    seed: int = 0
    enable_prefix_caching: bool = True
    trust_remote_code: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.tensor_parallel_size < 1 or self.data_parallel_size < 1:
            raise ValueError("tensor_parallel_size and data_parallel_size must be ≥ 1")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError(f"gpu_memory_utilization must lie in (0, 1], got {self.gpu_memory_utilization}")


def llm_kwargs(config: VLLMConfig) -> dict[str, Any]:
    """Keyword arguments for one ``vllm.LLM`` replica (data parallelism is handled by processes)."""
    kwargs: dict[str, Any] = {
        "model": config.model,
        "tokenizer": config.tokenizer or config.model,
        "tensor_parallel_size": config.tensor_parallel_size,
        "dtype": config.dtype,
        "seed": config.seed,
        "gpu_memory_utilization": config.gpu_memory_utilization,
        "enable_prefix_caching": config.enable_prefix_caching,
        "trust_remote_code": config.trust_remote_code,
    }
    if config.max_model_len is not None:
        kwargs["max_model_len"] = config.max_model_len
    kwargs.update(config.extra)
    return kwargs


def request_seed(params: SamplingParams, base_seed: int, request_id: str) -> int:
    """The request's seed, or one derived from the engine seed and the request id (stable across reruns,
    so a resumed run redraws the same samples)."""
    return params.seed if params.seed is not None else fallback_request_seed(base_seed, request_id)


def sampling_kwargs(params: SamplingParams, *, seed: int, max_tokens: int | None = None) -> dict[str, Any]:
    """Keyword arguments for ``vllm.SamplingParams`` for one request.

    ``top_k=-1`` disables top-k. Special tokens are kept and not space-separated in the text, so think
    tags come back verbatim even where a tokenizer marks them special.
    """
    return {
        "n": params.n,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": -1 if params.top_k is None else params.top_k,
        "seed": seed,
        "max_tokens": max_tokens if max_tokens is not None else params.max_new_tokens,
        "stop": list(params.stop) or None,
        "skip_special_tokens": False,
        "spaces_between_special_tokens": False,
    }


@dataclass(frozen=True)
class PreparedRequest:
    """A request ready for an engine: token prompt and sampling arguments (plain data, picklable)."""

    request_id: str
    prompt: dict[str, list[int]]
    sampling: dict[str, Any]


def build_inputs(
    tokenizer: Any, spec: ModelSpec, requests: Sequence[GenerationRequest], config: VLLMConfig
) -> tuple[list[PreparedRequest], list[GenerationResult]]:
    """Token prompts and sampling arguments for ``requests``; requests that cannot be built (or whose
    prompt does not fit ``max_model_len``) come back as error results instead."""
    ready: list[PreparedRequest] = []
    failed: list[GenerationResult] = []
    for request in requests:
        try:
            ids = request_prompt_ids(tokenizer, spec, request)
            max_tokens = request.new_token_budget(len(ids))
        except Exception as exc:  # noqa: BLE001 — one bad request must not stop the run
            failed.append(GenerationResult(request.request_id, (), 0, error=f"prompt: {type(exc).__name__}: {exc}"))
            continue
        if config.max_model_len is not None:
            if len(ids) >= config.max_model_len:
                message = f"prompt of {len(ids)} tokens does not fit max_model_len={config.max_model_len}"
                failed.append(GenerationResult(request.request_id, (), len(ids), error=message))
                continue
            max_tokens = min(max_tokens, config.max_model_len - len(ids))
        seed = request_seed(request.sampling, config.seed, request.request_id)
        sampling = sampling_kwargs(request.sampling, seed=seed, max_tokens=max_tokens)
        ready.append(PreparedRequest(request.request_id, {"prompt_token_ids": ids}, sampling))
    return ready, failed


_FINISH = {"stop": "stop", "length": "length"}


def to_result(request_id: str, output: Any, eos_token: str | None = None) -> GenerationResult:
    """Map a vLLM ``RequestOutput`` to a `GenerationResult`.

    ``prefilled_tokens`` is the prompt length minus ``num_cached_tokens`` (prefix-cache hits) when vLLM
    reports it, else None. A trailing EOS string is removed from the text if the detokenizer kept it.
    """
    prompt_tokens = len(output.prompt_token_ids or ())
    cached = getattr(output, "num_cached_tokens", None)
    samples = []
    for completion in output.outputs:
        text = completion.text
        if eos_token and text.endswith(eos_token):
            text = text[: -len(eos_token)]
        finish = _FINISH.get(completion.finish_reason or "", "error")
        samples.append(Sample(text=text, n_tokens=len(completion.token_ids), finish_reason=finish))
    return GenerationResult(
        request_id=request_id,
        samples=tuple(samples),
        prompt_tokens=prompt_tokens,
        prefilled_tokens=None if cached is None else prompt_tokens - cached,
    )


def _resolve(path: str) -> Any:
    module, _, attr = path.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except ModuleNotFoundError as exc:
        if exc.name == "vllm":
            raise ImportError("vllm is not installed: `pip install 'recovery[vllm]'` on a GPU machine") from exc
        raise


class _Engine:
    """One vLLM replica in this process. ``llm_class``/``params_class`` are ``module:attr`` paths, so a
    test double can stand in for vllm."""

    def __init__(self, config: VLLMConfig, llm_class: str, params_class: str, eos_token: str | None = None) -> None:
        self.llm = _resolve(llm_class)(**llm_kwargs(config))
        self.params_class = _resolve(params_class)
        self.eos_token = eos_token

    @property
    def tokenizer(self) -> Any:
        return self.llm.get_tokenizer()

    def run(self, batch: Sequence[PreparedRequest]) -> list[GenerationResult]:
        """Generate for ``batch``; if the engine rejects the batch, retry one request at a time."""
        try:
            return self._generate(batch)
        except Exception as exc:  # noqa: BLE001
            if len(batch) == 1:
                return [_failed(batch[0], f"{type(exc).__name__}: {exc}")]
            log.warning("vLLM batch of %d failed (%s); retrying one request at a time", len(batch), exc)
            return [result for item in batch for result in self.run([item])]

    def _generate(self, batch: Sequence[PreparedRequest]) -> list[GenerationResult]:
        params = [self.params_class(**item.sampling) for item in batch]
        outputs = self.llm.generate([item.prompt for item in batch], params, use_tqdm=False)
        if self.eos_token is None:
            self.eos_token = getattr(self.tokenizer, "eos_token", None) or ""
        return [to_result(item.request_id, out, self.eos_token) for item, out in zip(batch, outputs, strict=True)]


def _worker(rank: int, config: dict, devices: str, classes: tuple[str, str], eos: str, inbox, outbox) -> None:
    """A data-parallel replica: build an engine on its GPUs, answer batches until told to stop (or until its
    parent is gone: `recovery.process_guard`)."""

    guard_worker(os.getppid())
    os.environ["CUDA_VISIBLE_DEVICES"] = devices
    try:
        engine = _Engine(VLLMConfig(**config), *classes, eos_token=eos)
    except Exception as exc:  # noqa: BLE001 — reported to the parent, which raises it
        outbox.put(("init-error", rank, f"{type(exc).__name__}: {exc}"))
        return
    outbox.put(("ready", rank, None))
    while (batch := inbox.get()) is not None:
        outbox.put(("results", rank, [asdict(r) for r in engine.run(batch)]))


class VLLMGenerator:
    """The generation protocol over vLLM's offline engine.

    One request becomes one vLLM request with ``SamplingParams(n=...)``, so the prompt is prefilled once
    and its n samples share the KV blocks; prefix caching also shares prompts across requests. With
    ``data_parallel_size > 1``, replicas run in worker processes (see the module docstring).
    """

    name = "vllm"
    concurrency = 1  # a stage that asks one request at a time keeps one in flight

    def __init__(
        self,
        config: VLLMConfig | str,
        *,
        spec: ModelSpec | None = None,
        reasoning: bool | None = None,
        tokenizer: Any = None,
        llm_class: str = "vllm:LLM",
        params_class: str = "vllm:SamplingParams",
    ) -> None:
        self.config = VLLMConfig(model=config) if isinstance(config, str) else config
        self.classes = (llm_class, params_class)
        self._engine: _Engine | None = None
        self._workers: list[Any] = []
        if self.config.data_parallel_size == 1:
            self._engine = _Engine(self.config, *self.classes)
            self.tokenizer = tokenizer or self._engine.tokenizer
        else:
            # The parent builds prompts, so it loads the tokenizer; replicas only generate.
            self.tokenizer = tokenizer or _load_tokenizer(self.config)
            self._start_workers(getattr(self.tokenizer, "eos_token", None) or "")
        self.spec = spec or spec_for(self.config.model, self.tokenizer, reasoning=reasoning)

    def generate(self, requests: Sequence[GenerationRequest]) -> Iterator[GenerationResult]:
        """Results for ``requests``: build errors first, then the engine's results."""
        ready, failed = build_inputs(self.tokenizer, self.spec, requests, self.config)
        yield from failed
        if not ready:
            return
        if self._engine is not None:
            yield from self._engine.run(ready)
            return
        yield from self._run_parallel(ready)

    def close(self) -> None:
        """Stop worker processes and drop the engine."""
        _stop_workers(self._workers)
        self._workers = []
        self._engine = None

    # -- data parallel ----------------------------------------------------------------------------------

    def _start_workers(self, eos: str) -> None:
        ctx = mp.get_context("spawn")  # CUDA cannot be initialised in forked children
        self._outbox = ctx.Queue()
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        gpus = visible.split(",") if visible else [str(i) for i in range(64)]
        tp = self.config.tensor_parallel_size
        config = asdict(self.config) | {"data_parallel_size": 1, "extra": dict(self.config.extra)}
        for rank in range(self.config.data_parallel_size):
            devices = ",".join(gpus[rank * tp : (rank + 1) * tp])
            inbox = ctx.Queue()
            process = ctx.Process(
                target=_worker,
                args=(rank, config, devices, self.classes, eos, inbox, self._outbox),
                daemon=False,  # vLLM starts its own engine processes; daemons may not have children
            )
            process.start()
            self._workers.append({"process": process, "inbox": inbox})
        # Workers are not daemons: make sure they stop even if close() is never called.
        weakref.finalize(self, _stop_workers, list(self._workers))
        for _ in self._workers:
            kind, rank, error = self._receive()
            if kind != "ready":
                self.close()
                raise RuntimeError(f"vLLM replica {rank} failed to start: {error}")

    def _receive(self, waiting_on: Sequence[int] | None = None) -> tuple[str, int, Any]:
        """The next worker message; a worker in ``waiting_on`` (default: all) that died without answering
        is reported as ``("died", rank, exit code)``."""
        import queue

        ranks = range(len(self._workers)) if waiting_on is None else waiting_on
        while True:
            try:
                return self._outbox.get(timeout=1)
            except queue.Empty:
                for rank in ranks:
                    process = self._workers[rank]["process"]
                    if not process.is_alive():
                        return ("died", rank, f"exit code {process.exitcode}")

    def _run_parallel(self, ready: list[PreparedRequest]) -> Iterator[GenerationResult]:
        alive = [rank for rank, w in enumerate(self._workers) if w["process"].is_alive()]
        if not alive:
            for item in ready:
                yield _failed(item, "every vLLM replica has died")
            return
        # Contiguous chunks keep neighbours (which the pipeline orders by shared prefix) together.
        size = -(-len(ready) // len(alive))
        pending: dict[int, list[PreparedRequest]] = {}
        for i, rank in enumerate(alive):
            chunk = ready[i * size : (i + 1) * size]
            if chunk:
                self._workers[rank]["inbox"].put(chunk)
                pending[rank] = chunk
        while pending:
            kind, rank, payload = self._receive(list(pending))
            chunk = pending.pop(rank, None)
            if chunk is None:
                continue
            if kind != "results":  # the replica died: its requests fail, the others' results stand
                for item in chunk:
                    yield _failed(item, f"vLLM replica {rank} {kind}: {payload}")
                continue
            for data in payload:
                samples = tuple(Sample(**s) for s in data.pop("samples"))
                yield GenerationResult(samples=samples, **data)


def _stop_workers(workers: list[dict[str, Any]]) -> None:
    for worker in workers:
        if worker["process"].is_alive():
            worker["inbox"].put(None)
    for worker in workers:
        worker["process"].join(timeout=60)
        if worker["process"].is_alive():
            worker["process"].terminate()


def _failed(item: PreparedRequest, message: str) -> GenerationResult:
    return GenerationResult(item.request_id, (), len(item.prompt["prompt_token_ids"]), error=message)


def _load_tokenizer(config: VLLMConfig) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(config.tokenizer or config.model, trust_remote_code=config.trust_remote_code)


__all__ = [
    "PreparedRequest",
    "VLLMConfig",
    "VLLMGenerator",
    "build_inputs",
    "llm_kwargs",
    "request_seed",
    "sampling_kwargs",
    "to_result",
]
