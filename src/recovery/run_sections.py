"""Sections of the run configuration that do not change results: where the generation stages run (``executor``)
and where curves are logged (``wandb``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass
class WandbConfig:
    project: str | None = None
    entity: str | None = None
    run_name: str | None = None
    tags: list[str] = field(default_factory=list)


@dataclass
class ExecutorConfig:
    """Where the generation stages run: in this process (``local``) or on replicas of a Ray cluster
    (``ray``; `recovery.pipeline.ray_replicas`, needs the ``ray`` extra). Results do not depend on it.

    ``address``: None starts a local cluster (or joins the one ``RAY_ADDRESS`` names), ``"auto"`` joins the
    cluster running on this machine, else a cluster's address. Each of the ``replicas`` holds one backend
    with ``gpus_per_replica`` GPUs and ``cpus_per_replica`` CPUs (fractions allowed, as on a small local
    cluster); a replica that dies is restarted up to ``max_restarts`` times and its batch redone.
    """

    kind: Literal["local", "ray"] = "local"
    address: str | None = None
    replicas: int = 1
    gpus_per_replica: float = 0.0
    cpus_per_replica: float = 1.0
    max_restarts: int = 3

    def __post_init__(self) -> None:
        if self.kind not in ("local", "ray"):
            raise ValueError(f"executor.kind must be 'local' or 'ray', got {self.kind!r}")
        if self.replicas < 1:
            raise ValueError(f"executor.replicas must be ≥ 1, got {self.replicas}")
        if self.gpus_per_replica < 0:
            raise ValueError(f"executor.gpus_per_replica must be ≥ 0, got {self.gpus_per_replica}")
        if not self.cpus_per_replica > 0:
            raise ValueError(f"executor.cpus_per_replica must be > 0, got {self.cpus_per_replica}")
        if self.max_restarts < 0:
            raise ValueError(f"executor.max_restarts must be ≥ 0, got {self.max_restarts}")
