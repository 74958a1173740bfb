"""k consecutive interventions with model reasoning in between (paper App. A.2, Table 10).

With ``interventions.repeats: k`` and ``interventions.between: model``, each round after the first is
preceded by "one paragraph of model reasoning": the chain's own model continues the current intervened
prefix and the first paragraph it writes is kept (`recovery.interventions.apply` takes this paragraph
from the `ModelBetween` callable built here). With ``between: original`` (the default) the original
trace's next step stands in, which does not react to the intervention.

The paragraph is asked for with the run's continuation chat and prompt style (its plan's prompts,
`recovery.plan`: under ``protocol: reference`` the authors' system message and user turn), as a continuation
of the chain would be. Decoding is the run's continuation sampling (with the model's own decoding exceptions) and n=1, seeded
per prefix, so the same chain gets the same paragraph on every run; generation stops at the first blank
line or the end of the reasoning, and at most ``interventions.between_max_new_tokens`` tokens.

The paper runs one k per run; `repeat_configs` derives the k = 1..5 runs of one config, each in its own
sub-directory ``<run_dir>/k<k>`` (``recovery analyze repeats-sweep``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING

from recovery.generation import GenerationRequest, Generator, SamplingParams
from recovery.ids import content_id, request_seed
from recovery.metrics import continuation_reasoning
from recovery.segment import STEP_SEPARATOR, THINK

if TYPE_CHECKING:
    from recovery.model_config import ModelConfig
    from recovery.pipeline.context import StageContext
    from recovery.prompt_building import ChatPrompts
    from recovery.run_config import RunConfig, SamplingConfig
    from recovery.types import Problem, Trace

BETWEEN_ORIGINAL = "original"
BETWEEN_MODEL = "model"


class ModelBetween:
    """``between(prefix) -> paragraph``: one paragraph of the chain's own model continuing ``prefix``.

    The callable's ``__name__`` (``"model:<name>"``) is what `recovery.interventions.apply` records as the
    chain's ``options["between"]``, so chains built this way are told apart from original-step ones.
    """

    def __init__(
        self,
        generator: Generator,
        *,
        model: ModelConfig,
        prompts: ChatPrompts,
        problem: Problem,
        sampling: SamplingConfig,
        max_new_tokens: int,
        seed: int,
        think_close: str = THINK[1],
    ) -> None:
        self.generator = generator
        self.model = model
        self.prompts, self.problem = prompts, problem  # the run's plan's prompts, the chain's problem
        self.messages = prompts.continuation_messages(problem)
        self.seed = seed
        self.think_close = think_close  # the model's own: another family's tag is text
        # The paragraph continues the chain, so it is decoded like a continuation (Table 15, every model); a
        # model's own decoding settings are for its original traces only.
        self._params = {
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "top_k": sampling.top_k,
            "max_new_tokens": min(max_new_tokens, sampling.max_new_tokens),
        }
        self.__name__ = self.__qualname__ = f"{BETWEEN_MODEL}:{model.name}"

    def request(self, prefix: str) -> GenerationRequest:
        """The request for the paragraph after ``prefix`` (the prefill ends with a blank line, so the model
        starts a new paragraph and the blank line after it is the stop string)."""
        key = content_id("between", self.model.name, *(m.content for m in self.messages), prefix)
        seed = request_seed(self.seed, "between", key)
        sampling = SamplingParams(n=1, seed=seed, stop=(STEP_SEPARATOR,), **self._params)
        return self.prompts.request(f"between-{key}", self.problem, prefix + STEP_SEPARATOR, sampling)

    def __call__(self, prefix: str) -> str:
        (result,) = list(self.generator.generate([self.request(prefix)]))
        if result.error or not result.samples:
            raise RuntimeError(f"between paragraph for {self.model.name}: {result.error or 'no samples'}")
        text = result.samples[0].text
        # Only reasoning counts: a model that closes its reasoning right away gives no paragraph (the
        # item is then skipped as "between_unavailable" by the intervention code).
        return continuation_reasoning(text, self.think_close)


def make_between(ctx: StageContext, problem: Problem, trace: Trace) -> ModelBetween | None:
    """The ``between`` callable for ``trace``'s chains: None (original next step) unless
    ``interventions.between`` is ``model``, else a `ModelBetween` on the trace's own model."""
    cfg = ctx.config.interventions
    if cfg.between != BETWEEN_MODEL or cfg.repeats < 2:
        return None
    model = next((m for m in ctx.config.models if m.name == trace.model), None)
    if model is None:
        raise ValueError(
            f"interventions.between=model: trace {trace.id} was written by {trace.model!r}, which is not one "
            f"of the run's models ({', '.join(m.name for m in ctx.config.models)}); name it under models"
        )
    generator = ctx.generator(model)
    spec = generator.spec
    return ModelBetween(
        generator,
        model=model,
        prompts=ctx.plan.prompts,
        problem=problem,
        sampling=ctx.config.continuation,
        max_new_tokens=cfg.between_max_new_tokens,
        seed=ctx.config.continuation.seed,
        think_close=spec.think_close,
    )


def repeat_configs(config: RunConfig, ks: Iterable[int]) -> list[RunConfig]:
    """One config per k (``interventions.repeats = k``), each writing to ``<run_dir>/k<k>``."""
    out = []
    for k in ks:
        interventions = dataclasses.replace(config.interventions, repeats=int(k))
        out.append(
            dataclasses.replace(config, run_dir=f"{config.run_dir.rstrip('/')}/k{int(k)}", interventions=interventions)
        )
    return out
