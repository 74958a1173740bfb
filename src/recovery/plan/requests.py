"""The generation requests a run sends: its original traces' and its chains' continuations (messages, prefill,
rendering, sampling, seed, window), built here from the run's plan for the traces and continuations stages
(locally or on Ray replicas), the mini-benchmark on the run's chains and the activation probes, so all of them
send the same requests byte for byte under any style."""

from __future__ import annotations

import dataclasses

from recovery.generation import GenerationRequest, SamplingParams
from recovery.ids import RequestSeeds, request_seed
from recovery.model_config import ModelConfig
from recovery.plan.run_plan import RunPlan
from recovery.run_config import SamplingConfig
from recovery.types import Problem

__all__ = ["ContinuationRequests", "continuation_request", "sampling_params", "trace_request"]


def sampling_params(
    cfg: SamplingConfig, *, n: int | None = None, seed: int | None = None, model: ModelConfig | None = None
) -> SamplingParams:
    """Sampling parameters from a `SamplingConfig`, with ``model``'s own decoding settings applied (pass
    ``model`` for its original traces only: continuations use the run's setting for every model)."""

    def pick(name: str):
        override = getattr(model, name, None) if model is not None else None
        return getattr(cfg, name) if override is None else override

    return SamplingParams(
        n=n or cfg.n,
        temperature=pick("temperature"),
        top_p=pick("top_p"),
        top_k=pick("top_k"),
        seed=seed,
        max_new_tokens=cfg.max_new_tokens,
    )


def trace_request(plan: RunPlan, model: ModelConfig, problem: Problem) -> GenerationRequest:
    """The request for ``model``'s original trace of ``problem``: one sample at the run's trace decoding with the
    model's own settings, seeded per (model, problem)."""
    sampling = plan.config.traces.sampling
    return GenerationRequest(
        request_id=problem.id,
        sampling=sampling_params(
            sampling, n=1, seed=request_seed(sampling.seed, "trace", model.name, problem.id), model=model
        ),
        messages=plan.prompts.trace_messages(model, problem),
        rendering=plan.prompts,
        max_total_tokens=plan.max_total_tokens,
    )


def continuation_request(
    plan: RunPlan, problem: Problem, chain_row: dict, model: ModelConfig | None = None
) -> GenerationRequest:
    """The request that samples N continuations of one intervened chain: the problem's chat prompt with
    the intervened reasoning as the assistant prefill, seeded per chain (not per batch)."""
    return ContinuationRequests(plan, model)(problem, chain_row)


class ContinuationRequests:
    """`continuation_request` for many chains of one continuing model: the sampling parameters shared by
    every request are resolved once, and each request only gets its own seed,
    ``request_seed(config.continuation.seed, seed_key, chain id)``."""

    def __init__(self, plan: RunPlan, model: ModelConfig | None = None, *, seed_key: str = "continuation"):
        config = plan.config
        self.seed = config.continuation.seed
        self._seeds = RequestSeeds(self.seed, seed_key)
        # Every model continues at the run's continuation decoding (Table 15); a model's own decoding settings
        # are for its original traces only. Validated once here.
        shared = sampling_params(config.continuation)
        self.shared = {f.name: getattr(shared, f.name) for f in dataclasses.fields(shared) if f.name != "seed"}
        self.prompts = plan.prompts
        self.max_total_tokens = plan.max_total_tokens

    def __call__(self, problem: Problem, chain_row: dict) -> GenerationRequest:
        """The request continuing the chain ``chain_row`` (its ``id`` and ``prefix``)."""
        return self.request(chain_row["id"], problem, chain_row["prefix"])

    def request(self, request_id: str, problem: Problem, prefill: str = "") -> GenerationRequest:
        """The continuation prompt of ``problem`` with ``prefill`` as the assistant's reasoning so far (empty:
        a whole response), seeded by ``request_id``."""
        sampling = SamplingParams(**self.shared, seed=self._seeds(request_id))
        return self.prompts.request(request_id, problem, prefill, sampling, max_total_tokens=self.max_total_tokens)
