"""Data parallelism for in-process backends: one model replica per worker process.

A small model decodes on one CPU thread (its matrices are too small to split across cores), so a machine
with several cores is best used by several replicas, each taking a contiguous share of every batch of
requests — the same scheme `recovery.backends.vllm` uses for GPU replicas. Every request carries its own
seed and the HF backend draws each request's samples from its own generator, so a request gets the same
samples whichever replica serves it.

Replicas are built in their processes by a module-level factory (``factory(*args)`` → `Generator`), start
with ``forkserver`` (never ``fork``, which would copy the parent's torch threads) and live until `close`.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from recovery.generation import GenerationRequest, GenerationResult, Generator
from recovery.library_bars import library_bars_on, turn_library_bars_off
from recovery.parallel import default_start_method, workers_skip_main
from recovery.process_guard import run_guarded

_replica: dict[str, Any] = {}


def _start_replica(factory: Callable[..., Generator], args: tuple, library_bars: bool) -> None:
    if not library_bars:  # the parent draws none (`recovery run --no-progress`): loading the model draws none
        turn_library_bars_off()
    _replica["generator"] = factory(*args)


def _replica_generate(requests: list[GenerationRequest]) -> list[GenerationResult]:
    return list(_replica["generator"].generate(requests))


def _replica_attribute(name: str) -> Any:
    return getattr(_replica["generator"], name, None)


class ReplicatedGenerator:
    """`Generator` protocol over ``replicas`` processes, each holding ``factory(*args)``.

    ``generate`` splits the requests into one contiguous share per replica (neighbours, which the pipeline
    orders by shared prompt prefix, stay together) and yields the results share by share, in request
    order. A replica that dies fails the call with `concurrent.futures.process.BrokenProcessPool`.
    """

    concurrency = 1  # one call splits its requests between the replicas itself

    def __init__(
        self, factory: Callable[..., Generator], args: tuple = (), *, replicas: int = 2, name: str = ""
    ) -> None:
        if replicas < 1:
            raise ValueError(f"replicas must be ≥ 1, got {replicas}")
        self.replicas = replicas
        context = mp.get_context(default_start_method())
        # Replicas exit when this process is gone, even SIGKILLed (`recovery.process_guard`).
        self._pool: ProcessPoolExecutor | None = ProcessPoolExecutor(
            replicas,
            mp_context=context,
            initializer=run_guarded,
            initargs=(os.getpid(), _start_replica, (factory, args, library_bars_on())),
        )
        # The pipeline reads a backend's model conventions (think tags); ask one replica for them.
        self.spec = self._submit(_replica_attribute, "spec").result()
        self.name = name or str(self._submit(_replica_attribute, "name").result() or "replicated")

    def _submit(self, fn: Callable, arg: Any) -> Future:
        if self._pool is None:
            raise RuntimeError("this generator is closed")
        with workers_skip_main():  # the executor starts its processes lazily, inside submit
            return self._pool.submit(fn, arg)

    def generate(self, requests: Sequence[GenerationRequest]) -> Iterator[GenerationResult]:
        """Results for ``requests``, computed by every replica at once."""
        requests = list(requests)
        if not requests:
            return
        size = -(-len(requests) // self.replicas)
        futures = [self._submit(_replica_generate, requests[i : i + size]) for i in range(0, len(requests), size)]
        for future in futures:
            yield from future.result()

    def close(self) -> None:
        """Stop the replica processes."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
