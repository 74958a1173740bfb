"""Engine replicas on a Ray cluster: the Ray executor's one way of generating, for every stage.

- `Replica` is the body of a Ray Core actor: one backend, built in the actor by the run's own
  ``make_generator`` from a `ModelConfig` (vLLM with its tensor parallelism on ``gpus_per_replica`` GPUs,
  HF on CPU), generating batch after batch.
- `ReplicaPool` holds a model's replicas (restartable actors: a call on one that died is retried once Ray
  has restarted it) and hands each batch to an idle one; `ReplicaPool.map` keeps them all busy.
- `RayGenerator` is the `Generator` protocol over a pool, so a stage that generates through
  `StageContext.generator` (original traces, the chains stage's LLM-backed interventions and paragraphs
  between them, the LLM judge) runs on the cluster unchanged: a call's requests are cut into one chunk per
  replica and generated at once, results in request order. Its ``concurrency`` tells a stage that asks one
  request at a time how many it may have in flight; `RayGenerator.generate_whole` generates one batch whole
  on one idle replica, for a stage that keeps a batch per replica in flight (the continuations).
- `RaySession` connects (or starts a cluster) for one pipeline invocation, before any work, and builds
  each model's generator; closing it stops the replicas and the cluster it started.

Only the driver touches the run directory: replicas receive requests and return results, so each stage
writes exactly what the local executor writes. Ray is imported here only, inside the code that needs it.
"""

from __future__ import annotations

import math
import queue
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from recovery.configs import ConfigError
from recovery.generation import GenerationRequest, GenerationResult, Generator
from recovery.model_config import ModelConfig
from recovery.parallel import map_threads
from recovery.run_sections import ExecutorConfig

REPLICA_PREFIX = "recovery-replica-"  # the replicas' actor names start with it

BatchOutput = tuple[str, int, list[GenerationResult], float]  # key, replica index, results, busy seconds


class Replica:
    """One engine replica (the body of a Ray actor): a backend built once, generating batch after batch.

    ``generate`` returns the batch's key and this replica's index with the results and the seconds it
    took, so the driver knows what came back, who did it and how busy each replica was."""

    def __init__(self, make_generator: Callable[[ModelConfig], Generator], model: ModelConfig, index: int) -> None:
        self.index = index
        self.generator = make_generator(model)

    def generate(self, key: str, requests: list[GenerationRequest]) -> BatchOutput:
        start = time.perf_counter()
        results = list(self.generator.generate(requests))
        return key, self.index, results, time.perf_counter() - start

    def spec(self) -> Any:
        """The backend's model conventions (`recovery.models.ModelSpec`), as a local backend exposes them."""
        return self.generator.spec


class ReplicaPool:
    """The replicas of one model on the cluster, each batch run on whichever is idle; ``throughput`` counts
    what each replica did.

    Thread-safe: any number of threads may call `run`; each waits for an idle replica."""

    def __init__(
        self, executor: ExecutorConfig, make_generator: Callable[[ModelConfig], Generator], model: ModelConfig
    ) -> None:
        import ray

        actor = ray.remote(Replica)
        run = uuid.uuid4().hex[:8]  # names are unique per cluster; `ray list actors` shows whose replicas they are
        self.actors = [
            actor.options(
                name=f"{REPLICA_PREFIX}{run}-{index}",
                num_cpus=executor.cpus_per_replica,
                num_gpus=executor.gpus_per_replica,
                max_restarts=executor.max_restarts,
                max_task_retries=executor.max_restarts,
            ).remote(make_generator, model, index)
            for index in range(executor.replicas)
        ]
        self._idle: queue.SimpleQueue = queue.SimpleQueue()
        for replica in self.actors:
            self._idle.put(replica)
        self.throughput = Throughput(len(self.actors))

    def __len__(self) -> int:
        return len(self.actors)

    def run(self, key: str, requests: list[GenerationRequest]) -> BatchOutput:
        """Generate one batch on the next idle replica (waiting for one)."""
        import ray

        replica = self._idle.get()
        try:
            output = ray.get(replica.generate.remote(key, requests))
        finally:
            self._idle.put(replica)
        self.throughput.add(output[1], len(requests), output[3])
        return output

    def map(self, jobs: Iterable[tuple[str, list[GenerationRequest]]]) -> Iterator[BatchOutput]:
        """`run` over ``(key, requests)`` jobs with every replica busy, results in job order; a replica takes
        its next batch as soon as it returns one."""
        return map_threads(lambda job: self.run(*job), jobs, width=len(self.actors))

    def spec(self) -> Any:
        import ray

        return ray.get(self.actors[0].spec.remote())

    def close(self) -> None:
        import ray

        for replica in self.actors:
            ray.kill(replica, no_restart=True)


class RayGenerator:
    """The `Generator` protocol over a `ReplicaPool`: the requests of one call are cut into one chunk per
    replica (in request order), generated concurrently and returned in request order."""

    name = "ray"

    def __init__(self, pool: ReplicaPool) -> None:
        self.pool = pool
        self.concurrency = len(pool)
        self._spec: Any = None

    @property
    def spec(self) -> Any:
        if self._spec is None:
            self._spec = self.pool.spec()
        return self._spec

    def generate(self, requests: Sequence[GenerationRequest]) -> Iterator[GenerationResult]:
        requests = list(requests)
        if not requests:
            return
        size = math.ceil(len(requests) / len(self.pool))
        chunks = [(str(i), requests[i : i + size]) for i in range(0, len(requests), size)]
        if len(chunks) == 1:  # one request at a time (interventions, judge): no threads to start
            yield from self.pool.run(*chunks[0])[2]
            return
        for _, _, results, _ in self.pool.map(chunks):
            yield from results

    def generate_whole(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """One batch generated whole on the next idle replica (waiting for one), results in request order."""
        return self.pool.run("batch", list(requests))[2]

    def status(self) -> str:
        """What each replica has done so far (`Throughput.line`), for a progress bar."""
        return self.pool.throughput.line()

    def close(self) -> None:
        self.pool.close()


class Throughput:
    """Requests per second of busy time, per replica (thread-safe)."""

    def __init__(self, replicas: int) -> None:
        self.requests = [0] * replicas
        self.seconds = [0.0] * replicas
        self._lock = threading.Lock()

    def add(self, replica: int, requests: int, seconds: float) -> None:
        with self._lock:
            self.requests[replica] += requests
            self.seconds[replica] += seconds

    def line(self) -> str:
        """``r0 3.1/s r1 2.9/s`` (requests per second of busy time, per replica)."""
        with self._lock:
            pairs = list(zip(self.requests, self.seconds))
        return " ".join(f"r{i} {n / s:.1f}/s" if s else f"r{i} -" for i, (n, s) in enumerate(pairs))


class RaySession:
    """The Ray side of one pipeline invocation: connected before any work (an address that cannot be
    reached fails here, in one line), a `RayGenerator` per model on demand, and everything stopped at
    `close` (the replicas, and the cluster if this session started it)."""

    def __init__(self, executor: ExecutorConfig, make_generator: Callable[[ModelConfig], Generator]) -> None:
        self.executor = executor
        self.make_generator = make_generator
        self.started = connect(executor)

    def generator(self, model: ModelConfig) -> RayGenerator:
        return RayGenerator(ReplicaPool(self.executor, self.make_generator, model))

    def close(self) -> None:
        import ray

        if self.started:
            ray.shutdown()


def connect(executor: ExecutorConfig) -> bool:
    """Join ``executor.address`` (or start a local cluster) unless this process is already connected;
    returns whether it connected here. An address that cannot be reached is a `ConfigError`."""
    import ray

    if ray.is_initialized():
        return False
    address = executor.address
    if address and address != "auto" and not address.startswith("ray://"):
        check_reachable(address)
    try:
        ray.init(address=address, include_dashboard=False)
    except ConnectionError as err:
        raise ConfigError(f"executor.address: no Ray cluster at {address or 'auto'} ({err})") from None
    return True


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast, in one line, when nothing listens at ``host:port`` (Ray itself retries for minutes)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"executor.address: {address!r} is not host:port, 'auto' or a ray:// address")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as err:
        raise ConfigError(f"executor.address: cannot reach a Ray cluster at {address} ({err})") from None
