"""One request per sample, for servers that return one choice whatever ``n`` asks (``transformers serve``).

A request for n samples becomes n requests of one sample, sample i seeded with ``item_seed(seed, "sample",
i)`` (so the samples differ, and the same chain asks for the same samples on every run), and their results
are joined back into one result for the request, in sample order. A part that failed fails the whole
result, with its reason: a chain never gets fewer continuations than asked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace

from recovery.generation import GenerationRequest, GenerationResult
from recovery.ids import request_seed

Send = Callable[[Iterator[GenerationRequest]], Iterator[GenerationResult]]


def one_sample_each(send: Send, requests: Iterable[GenerationRequest]) -> Iterator[GenerationResult]:
    """The results of ``requests`` against a server that returns one choice per request: each request of
    n > 1 samples is sent (by ``send``, which yields one result per request it is given) as n requests of
    one, and their results are put back together in sample order."""
    parts: dict[str, tuple[str, int]] = {}  # part id → (request id, sample index)
    pending: dict[str, tuple[GenerationRequest, list[GenerationResult | None]]] = {}

    def split() -> Iterator[GenerationRequest]:
        for request in requests:
            n = request.sampling.n
            if n == 1:
                yield request
                continue
            pending[request.request_id] = (request, [None] * n)
            for i in range(n):
                part_id = f"{request.request_id}#sample{i}"
                parts[part_id] = (request.request_id, i)
                seed = request.sampling.seed
                sampling = replace(request.sampling, n=1, seed=None if seed is None else sample_seed(seed, i))
                yield replace(request, request_id=part_id, sampling=sampling)

    for result in send(split()):
        if result.request_id not in parts:
            yield result
            continue
        request_id, i = parts.pop(result.request_id)
        request, results = pending[request_id]
        results[i] = result
        if all(part is not None for part in results):
            del pending[request_id]
            yield _joined(request, results)


def sample_seed(seed: int, index: int) -> int:
    """The seed of sample ``index`` of a request seeded ``seed`` when each sample is its own request (31
    bits, which every server takes)."""
    return request_seed(seed, "sample", index)


def _joined(request: GenerationRequest, parts: Sequence[GenerationResult]) -> GenerationResult:
    """One result of ``request`` from the results of its one-sample parts, in sample order; failed, with
    the first part's reason, when any part failed."""
    failed = next(((i, part) for i, part in enumerate(parts) if part.error is not None), None)
    if failed is not None:
        i, part = failed
        reason = f"sample {i} of {len(parts)}: {part.error}"
        return GenerationResult(request.request_id, samples=(), prompt_tokens=part.prompt_tokens, error=reason)
    prefilled = [part.prefilled_tokens for part in parts if part.prefilled_tokens is not None]
    return GenerationResult(
        request_id=request.request_id,
        samples=tuple(sample for part in parts for sample in part.samples),
        prompt_tokens=parts[0].prompt_tokens,
        prefilled_tokens=sum(prefilled) if prefilled else None,
    )


__all__ = ["one_sample_each", "sample_seed"]
