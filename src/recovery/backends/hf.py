"""`HFGenerator`: the generation protocol over a transformers causal LM, on CPU or GPU.

How a batch runs:

1. Every request's prompt is built at token level with `recovery.models` (chat template, think opener
   only if missing, prefill verbatim). Requests are sorted by length and cut into batches of at most
   ``max_batch_rows`` sample rows.
2. **One prefill per request**: the batch's prompts are left-padded and run once; the KV cache and the
   last logits are then replicated n times per request (``DynamicCache.batch_select_indices`` with
   ``[0]*n0 + [1]*n1 + ...``). ``prefilled_tokens`` is therefore the prompt length, not n× it.
3. A decode loop samples one token per row per step; finished rows are dropped from the cache.

Seeds: each request owns a `torch.Generator` (seeded with ``sampling.seed``, or a hash of the
generator's ``seed`` and the request id). At every step it draws exactly n uniforms, one per sample
row, whether or not the row is still running, and sampling uses them by inverse CDF. A request's samples
therefore depend only on its own seed and logits, not on its batch-mates. The cost is n uniforms per
request per step (negligible) and a Python loop over requests per step. Logits of one row can still
differ in the last float bits between batch shapes (BLAS blocking); on CPU float32 this practically
never changes a sampled token, and ``max_batch_requests=1`` removes the effect entirely (at the cost of
batching).

A request that cannot be built or run (template error, prompt longer than the context, OOM even alone)
comes back with ``error`` set; the rest of the batch is retried one request at a time.
"""

from __future__ import annotations

import inspect
import logging
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from recovery.backends.kv_cache import reserved_cache
from recovery.backends.sampling import find_stop, sample_tokens
from recovery.generation import GenerationRequest, GenerationResult, Sample, SamplingParams
from recovery.ids import fallback_request_seed
from recovery.models import ModelSpec, gguf_model_name, spec_for
from recovery.prompt_building import request_prompt_ids

log = logging.getLogger(__name__)

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def load_model_and_tokenizer(
    path: str,
    *,
    dtype: str | None = "auto",
    device: str | None = None,
    gguf_file: str | None = None,
    **kwargs: Any,
):
    """``(model, tokenizer)`` from a local directory or hub id, in eval mode, tokenizer padding left.

    ``dtype`` is ``"auto"`` (the checkpoint's; also for None), ``"float32"``, ``"float16"`` or
    ``"bfloat16"``; ``device`` defaults to CUDA when available. ``gguf_file`` loads a GGUF checkpoint in
    ``path`` (model, tokenizer and chat template all come from the file; needs the ``gguf`` package). Its
    weights are dequantised on load, so on CPU ``"auto"`` means float32: what the GGUF kernels compute in,
    and what transformers versions that find no float type in a GGUF fall back to anyway.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if dtype not in (None, "auto", *_DTYPES):
        raise ValueError(f"dtype must be auto, {', '.join(_DTYPES)}; got {dtype!r}")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if gguf_file is not None:
        kwargs["gguf_file"] = gguf_file
        if dtype in (None, "auto") and torch.device(device).type == "cpu":
            dtype = "float32"
    tokenizer = AutoTokenizer.from_pretrained(path, padding_side="left", **kwargs)
    torch_dtype = "auto" if dtype in (None, "auto") else _DTYPES[dtype]
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype, **kwargs)
    model.to(device)
    model.eval()
    return model, tokenizer


@dataclass
class _Item:
    """One request in a batch: its prompt ids and per-row decoding state."""

    request: GenerationRequest
    prompt_ids: list[int]
    max_new: int
    generator: torch.Generator | None
    rows: list[list[int]] = field(default_factory=list)
    finish: list[str | None] = field(default_factory=list)

    @property
    def n(self) -> int:
        return self.request.sampling.n


class HFGenerator:
    """Generation with a transformers model: batched, left-padded, one shared prefill per request.

    ``model`` is a loaded causal LM (with ``tokenizer``) or a path / hub id loaded with
    `load_model_and_tokenizer` (``dtype``, ``device``, ``gguf_file``). ``spec`` defaults to
    `recovery.models.spec_for` on the model's name (a GGUF's file name, see `gguf_model_name`) and tokenizer
    (``reasoning`` overrides whether it is a reasoning model). ``max_batch_rows`` bounds the sample rows decoded together (sum of n);
    ``max_batch_requests`` bounds the requests per batch. ``share_prefill=False`` replicates each prompt n
    times before the prefill (the naive path, kept for comparison).
    """

    name = "hf"
    concurrency = 1  # a stage that asks one request at a time keeps one in flight

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        spec: ModelSpec | None = None,
        reasoning: bool | None = None,
        dtype: str | None = "auto",
        device: str | None = None,
        max_batch_rows: int = 64,
        max_batch_requests: int | None = None,
        share_prefill: bool = True,
        seed: int | None = None,
        max_context: int | None = None,
        gguf_file: str | None = None,
        **load_kwargs: Any,
    ) -> None:
        if isinstance(model, str):
            name = model if gguf_file is None else gguf_model_name(gguf_file)
            model, loaded_tokenizer = load_model_and_tokenizer(
                model, dtype=dtype, device=device, gguf_file=gguf_file, **load_kwargs
            )
            tokenizer = tokenizer or loaded_tokenizer
        else:
            name = getattr(getattr(model, "config", None), "_name_or_path", "") or "model"
            if device is not None:
                model.to(device)
        if tokenizer is None:
            raise ValueError("a tokenizer is required with a loaded model")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.spec = spec or spec_for(name, tokenizer, reasoning=reasoning)
        self.max_batch_rows = max_batch_rows
        self.max_batch_requests = max_batch_requests
        self.share_prefill = share_prefill
        self.seed = seed
        config = getattr(model, "config", None)
        self.max_context = max_context or getattr(config, "max_position_embeddings", None)
        self.eos_ids = _eos_ids(model, tokenizer)
        self.pad_id = _first_not_none(tokenizer.pad_token_id, tokenizer.eos_token_id, 0)
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._keep_kw = "logits_to_keep" in params

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def close(self) -> None:
        """Release the model (the generator is unusable afterwards)."""
        self.model = None  # type: ignore[assignment]
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    # -- protocol ---------------------------------------------------------------------------------------

    def generate(self, requests: Sequence[GenerationRequest]) -> Iterator[GenerationResult]:
        """Results for ``requests`` (batch by batch, in order of prompt length)."""
        items: list[_Item] = []
        for request in requests:
            try:
                items.append(self._prepare(request))
            except Exception as exc:  # noqa: BLE001 — one bad request must not stop the run
                yield _error(request, 0, f"prompt: {type(exc).__name__}: {exc}")
        items.sort(key=lambda item: len(item.prompt_ids))
        for batch in self._batches(items):
            yield from self._run_safely(batch)

    def prompt_ids(self, request: GenerationRequest) -> list[int]:
        """The token ids this backend feeds the model for ``request``."""
        return request_prompt_ids(self.tokenizer, self.spec, request)

    # -- batching ---------------------------------------------------------------------------------------

    def _prepare(self, request: GenerationRequest) -> _Item:
        ids = self.prompt_ids(request)
        max_new = request.new_token_budget(len(ids))
        if self.max_context:
            if len(ids) >= self.max_context:
                raise ValueError(f"prompt of {len(ids)} tokens does not fit the context of {self.max_context}")
            max_new = min(max_new, self.max_context - len(ids))
        return _Item(request, ids, max_new, self._generator(request))

    def _generator(self, request: GenerationRequest) -> torch.Generator | None:
        if request.sampling.temperature == 0:
            return None
        seed = request.sampling.seed
        if seed is None:
            seed = (
                fallback_request_seed(self.seed, request.request_id)
                if self.seed is not None
                else random.getrandbits(63)
            )
        generator = torch.Generator(device=self.device)
        generator.manual_seed(int(seed) % (2**63))
        return generator

    def _batches(self, items: list[_Item]) -> Iterator[list[_Item]]:
        batch: list[_Item] = []
        rows = 0
        for item in items:
            full = self.max_batch_requests is not None and len(batch) >= self.max_batch_requests
            if batch and (rows + item.n > self.max_batch_rows or full):
                yield batch
                batch, rows = [], 0
            batch.append(item)
            rows += item.n
        if batch:
            yield batch

    def _run_safely(self, batch: list[_Item]) -> Iterator[GenerationResult]:
        try:
            yield from self._run(batch)
        except Exception as exc:  # noqa: BLE001
            if len(batch) == 1:
                log.warning("request %s failed: %s", batch[0].request.request_id, exc)
                yield _error(batch[0].request, len(batch[0].prompt_ids), f"{type(exc).__name__}: {exc}")
                return
            log.warning("batch of %d failed (%s); retrying one request at a time", len(batch), exc)
            for item in batch:
                item.generator = self._generator(item.request)  # restart its random stream
                yield from self._run_safely([item])

    # -- one batch ----------------------------------------------------------------------------------------

    @torch.inference_mode()
    def _run(self, batch: list[_Item]) -> Iterator[GenerationResult]:
        device = self.device
        for item in batch:
            item.rows = [[] for _ in range(item.n)]
            item.finish = [None] * item.n
        counts = torch.tensor([item.n for item in batch], device=device)
        expand = torch.repeat_interleave(torch.arange(len(batch), device=device), counts)
        prompts = [item.prompt_ids for item in batch]
        capacity = max(len(p) for p in prompts) + max(item.max_new for item in batch)
        if self.share_prefill:
            logits, cache, mask, positions = self._prefill(prompts, capacity)
            cache.batch_select_indices(expand)
            logits, mask, positions = logits[expand], mask[expand], positions[expand]
            prefilled = [len(p) for p in prompts]
        else:
            logits, cache, mask, positions = self._prefill([prompts[i] for i in expand.tolist()], capacity)
            prefilled = [len(item.prompt_ids) * item.n for item in batch]
        # Row r of the running batch is sample `slot[r][1]` of batch item `slot[r][0]`.
        slots = [(i, j) for i, item in enumerate(batch) for j in range(item.n)]
        step = 0
        while True:
            tokens = self._sample(batch, slots, logits, step)
            keep = [r for r, (i, j) in enumerate(slots) if self._advance(batch[i], j, tokens[r])]
            if not keep:
                break
            if len(keep) < len(slots):
                index = torch.tensor(keep, device=device)
                cache.batch_select_indices(index)
                mask, positions = mask[index], positions[index]
                slots = [slots[r] for r in keep]
            last = torch.tensor([batch[i].rows[j][-1] for i, j in slots], device=device)
            mask = torch.cat([mask, mask.new_ones((len(slots), 1))], dim=1)
            logits = self._forward(last[:, None], mask, positions[:, None], cache)
            positions = positions + 1
            step += 1
        # Built before yielding, so a failure here cannot leave some results yielded and then retried.
        results = [self._result(item, n_prefilled) for item, n_prefilled in zip(batch, prefilled, strict=True)]
        yield from results

    def _forward(self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, cache: Any) -> torch.Tensor:
        kwargs: dict[str, Any] = {self._cache_kw: cache, "use_cache": True}
        if self._keep_kw:
            kwargs["logits_to_keep"] = 1
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, **kwargs)
        return out.logits[:, -1, :].float()

    def _prefill(self, prompts: list[list[int]], capacity: int):
        """Run the left-padded ``prompts`` once; the cache reserves ``capacity`` positions per row (the longest
        prompt + new tokens the batch can reach: `recovery.backends.kv_cache`)."""
        from transformers import DynamicCache

        device = self.device
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long, device=device)
        mask = torch.zeros((len(prompts), width), dtype=torch.long, device=device)
        for r, prompt in enumerate(prompts):  # left padding: the last prompt token sits at column -1
            ids[r, width - len(prompt) :] = torch.tensor(prompt, device=device)
            mask[r, width - len(prompt) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        try:
            cache = reserved_cache(self.model.config, capacity)
        except TypeError:  # older transformers
            cache = DynamicCache()
        logits = self._forward(ids, mask, positions, cache)
        return logits, cache, mask, positions[:, -1] + 1

    def _sample(self, batch: list[_Item], slots: list[tuple[int, int]], logits: torch.Tensor, step: int) -> list[int]:
        """One token per running row. Each request draws its n uniforms from its own generator (its samples
        depend on the request only); the rows of requests that decode alike are then sampled in one call,
        row by row as they would be alone."""
        uniforms = torch.zeros(len(slots), device=logits.device)
        alike: dict[tuple, tuple[SamplingParams, list[int]]] = {}  # rows by how they decode
        by_item: dict[int, list[int]] = {}
        for r, (i, _) in enumerate(slots):
            by_item.setdefault(i, []).append(r)
        for i, rows in by_item.items():
            item = batch[i]
            if item.generator is not None:
                # n draws per step whatever is still running: the stream depends on the request only.
                draws = torch.rand(item.n, generator=item.generator, device=logits.device)
                uniforms[rows] = draws[torch.tensor([slots[r][1] for r in rows], device=logits.device)]
            params = item.request.sampling
            key = (params.temperature, params.top_k, params.top_p, item.generator is None)
            alike.setdefault(key, (params, []))[1].extend(rows)
        tokens = [0] * len(slots)
        for (*_, undrawn), (params, rows) in alike.items():
            index = torch.tensor(rows, device=logits.device)
            picked = sample_tokens(logits[index], params, None if undrawn else uniforms[index])
            for r, token in zip(rows, picked.tolist(), strict=True):
                tokens[r] = token
        return tokens

    def _advance(self, item: _Item, j: int, token: int) -> bool:
        """Append ``token`` to sample ``j``; return whether it keeps running."""
        row = item.rows[j]
        row.append(token)
        if token in self.eos_ids:
            item.finish[j] = "stop"
        elif item.request.sampling.stop and self._hit_stop(row, item.request.sampling.stop):
            item.finish[j] = "stop"
        elif len(row) >= item.max_new:
            item.finish[j] = "length"
        return item.finish[j] is None

    def _hit_stop(self, row: list[int], stops: Sequence[str]) -> bool:
        # A stop string of L characters spans at most L tokens (plus partial bytes): decode only the tail.
        window = max(len(s) for s in stops) + 4
        return find_stop(self._decode(row[-window:]), stops) >= 0

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def _result(self, item: _Item, prefilled: int) -> GenerationResult:
        samples = []
        for row, finish in zip(item.rows, item.finish, strict=True):
            body = row[:-1] if row and row[-1] in self.eos_ids else row
            text = self._decode(body)
            cut = find_stop(text, item.request.sampling.stop)
            if cut >= 0:
                text, finish = text[:cut], "stop"
            samples.append(Sample(text=text, n_tokens=len(row), finish_reason=finish or "length"))
        return GenerationResult(
            request_id=item.request.request_id,
            samples=tuple(samples),
            prompt_tokens=len(item.prompt_ids),
            prefilled_tokens=prefilled,
        )


def _error(request: GenerationRequest, prompt_tokens: int, message: str) -> GenerationResult:
    return GenerationResult(request.request_id, samples=(), prompt_tokens=prompt_tokens, error=message)


def _first_not_none(*values: Any) -> Any:
    return next(v for v in values if v is not None)


def _eos_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    ids: set[int] = set()
    config = getattr(model, "generation_config", None)
    for value in (getattr(config, "eos_token_id", None), tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif value is not None:
            ids.update(int(v) for v in value)
    return frozenset(ids)


__all__ = ["HFGenerator", "SamplingParams", "load_model_and_tokenizer"]
