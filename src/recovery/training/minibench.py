"""A small, in-memory robustness benchmark run on a model object (the `RobustnessCallback`'s engine).

It is the benchmark pipeline without the run directory: the same segmentation and interventions
(`recovery.interventions.intervene`), the same continuation requests (chat prompt + intervened reasoning as
the assistant prefill, seeded per chain), any `recovery.backends` generator, the same grading
(`recovery.grading.Grader`; a continuation that never closes its reasoning has no answer), and the same
metrics (`recovery.metrics.chain_outcome` / `aggregate`, doubt from `recovery.doubt`).

Where the chains come from (`MiniBenchConfig.source`):

* ``"toy"`` (default) — the first ``n_problems`` problems of the toy world's held-out set, each with the
  trace the toy task writer produces for it (what the tiny reasoner was trained to write), intervened with
  the toy interventions (no LLM needed);
* ``"run"`` — the chains a benchmark run directory already holds (``run_dir``): the model's own original
  traces intervened once by the pipeline, LLM-backed interventions included, each continued with exactly the
  request the run's continuations stage sent (`recovery.plan.requests`: messages and prompt style
  under the run's protocol, prefill, sampling and per-chain seed; ``continuation`` or ``prompt_template``
  given override the run's);
* ``items=[(problem, trace), ...]`` — your own problems with their original traces (rule-based or toy
  interventions, since no intervention LLM is available inside a training loop).

The chains are built once and stay fixed, and every request keeps its seed from one evaluation to the
next (common random numbers), so a change between two training steps reflects the model, not the draw.

>>> from recovery.run_config import InterventionsConfig, SamplingConfig
>>> cfg = MiniBenchConfig(
...     n_problems=2,
...     interventions=InterventionsConfig(names=["toy/random_characters"], timesteps=[0.5]),
...     continuation=SamplingConfig(n=2, max_new_tokens=320),
... )
>>> bench = MiniBench(cfg)
>>> len(bench.chains), bench.requests()[0].sampling.n
(2, 2)
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from recovery.backends.registry import backend_named
from recovery.doubt import first_doubt
from recovery.generation import GenerationRequest, Generator
from recovery.grading import Grader
from recovery.grading.verdict import grade_continuations
from recovery.metrics import ChainOutcome, UngradableChain, aggregate, chain_outcome, continuation_reasoning
from recovery.models import get_spec, spec_for
from recovery.plan import ContinuationRequests, plan_for
from recovery.run_config import DatasetConfig, GradingConfig, InterventionsConfig, RunConfig
from recovery.segment import THINK, tags_closed_by
from recovery.training.minibench_chains import build_chains, toy_items
from recovery.training.minibench_config import (
    DEFAULT_TIMESTEPS,
    DEFAULT_TOY_INTERVENTIONS,
    MiniBenchConfig,
    toy_sampling,
)
from recovery.training.minibench_result import MiniBenchResult
from recovery.training_data.source import load_run
from recovery.types import Grade, Intervened, Problem, Trace

log = logging.getLogger(__name__)

CLEAN = "clean"  # the pseudo-intervention name of the un-intervened (clean accuracy) requests
SEED_KEY = "robustness-callback"  # the seeds of toy and custom chains' requests (a run's chains: the run's)


# ------------------------------------------------------------------------------------------------- bench


class MiniBench:
    """The fixed set of chains (built once) and the code that measures a generator on them.

    ``items`` (problems with their original traces) overrides ``config.source``.
    """

    def __init__(self, config: MiniBenchConfig | None = None, *, items: Sequence[tuple[Problem, Trace]] | None = None):

        self.config = config = config or MiniBenchConfig()
        self.skips: Counter = Counter()
        self.problems: dict[str, Problem] = {}
        self.grading = config.grading or GradingConfig(workers=1)
        if items is None and config.source == "run":
            self.chains = self._run_chains()
        else:
            if config.continuation is None:
                self.config = config = dataclasses.replace(config, continuation=toy_sampling())
            # The run config of toy or custom chains: the template's user turn, the project's protocol.
            run_config = RunConfig(
                run_dir="",
                dataset=DatasetConfig(name="mini-benchmark", prompt_template=config.prompt_template),
                continuation=config.continuation,
            )
            self._requests = ContinuationRequests(plan_for(run_config), seed_key=SEED_KEY)
            iv = config.interventions or InterventionsConfig(
                names=list(DEFAULT_TOY_INTERVENTIONS), timesteps=list(DEFAULT_TIMESTEPS)
            )
            if items is None:
                items = toy_items(config.n_problems, seed=iv.seed)
            items = list(items)[: config.n_problems]
            self.problems = {p.id: p for p, _ in items}
            self.chains = build_chains(items, iv, skips=self.skips)
        if not self.chains:
            raise ValueError(f"the mini-benchmark has no chains (skipped: {dict(self.skips)})")
        self._grader = None

    def _run_chains(self) -> list[Intervened]:

        cfg = self.config
        data = load_run(cfg.run_dir)
        # The run's own continuation requests (`ContinuationRequests` of its plan), but for what is given.
        run_config = data.config
        if cfg.prompt_template is not None:
            run_config = dataclasses.replace(
                run_config, dataset=dataclasses.replace(run_config.dataset, prompt_template=cfg.prompt_template)
            )
        if cfg.continuation is None:
            self.config = cfg = dataclasses.replace(cfg, continuation=run_config.continuation)
        else:
            run_config = dataclasses.replace(run_config, continuation=cfg.continuation)
        self._requests = ContinuationRequests(plan_for(run_config))
        if cfg.grading is None:  # grade as the run graded
            self.grading = GradingConfig(workers=1, unclosed=data.config.grading.unclosed)
        wanted_models = set(cfg.models) if cfg.models else None
        wanted_iv = set(cfg.interventions.names) if cfg.interventions else None
        wanted_t = {round(float(t), 6) for t in cfg.interventions.timesteps} if cfg.interventions else None
        chains = [
            c
            for c in data.chains
            if c.problem_id in data.problems
            and (wanted_models is None or c.model in wanted_models)
            and (wanted_iv is None or c.intervention in wanted_iv)
            and (wanted_t is None or round(c.target_t, 6) in wanted_t)
        ]
        keep = sorted({c.problem_id for c in chains})[: cfg.n_problems]
        self.problems = {pid: data.problems[pid] for pid in keep}
        return sorted((c for c in chains if c.problem_id in self.problems), key=lambda c: c.id)

    @property
    def eval_problems(self) -> list[Problem]:
        """The problems measured (to keep out of training data)."""
        return list(self.problems.values())

    # -- requests ----------------------------------------------------------------------------------------

    def requests(self) -> list[GenerationRequest]:
        """One request per chain (prefill = the intervened reasoning), plus one per problem for clean accuracy
        (the same prompt, no prefill)."""
        make = self._requests
        out = [make.request(chain.id, self.problems[chain.problem_id], chain.prefix) for chain in self.chains]
        if self.config.include_clean:
            out.extend(make.request(f"{CLEAN}:{pid}", problem) for pid, problem in sorted(self.problems.items()))
        return out

    # -- grading -----------------------------------------------------------------------------------------

    def grader(self):
        if self._grader is None:
            self._grader = Grader(workers=self.grading.workers, timeout_s=self.grading.timeout_s)
        return self._grader

    def close(self) -> None:
        """Stop the grader's math-verify workers, if any were started."""
        if self._grader is not None:
            self._grader.close()
            self._grader = None

    def grade(self, items: list[tuple[str, Problem]], think_close: str = THINK[1]) -> list[Grade]:
        """The verdicts the pipeline would store for these continuations (`recovery.grading.verdict`), written
        by a model whose reasoning ends at ``think_close``."""
        tags = tags_closed_by(think_close)
        return grade_continuations(items, self.grader(), unclosed=self.grading.unclosed, tags=tags)

    # -- one evaluation ---------------------------------------------------------------------------------

    def run(self, generator: Generator, *, think_close: str | None = None) -> MiniBenchResult:
        """Generate with ``generator``, grade, and aggregate. ``think_close`` defaults to the generator's spec."""
        start = time.perf_counter()
        texts, failed = self.generate(generator, self.requests())
        return self.score(texts, think_close=think_close or closing_tag(generator), failed=failed, started=start)

    def generate(self, generator: Generator, requests: Sequence[GenerationRequest]) -> tuple[dict[str, list[str]], int]:
        """The sample texts of each request generated, and how many requests failed (no samples).

        Any subset of `requests` can be generated apart (one process's share): every request carries its
        own seed, so its samples do not depend on which others share its batch.
        """
        texts: dict[str, list[str]] = {}
        failed = 0
        for result in generator.generate(list(requests)):
            if result.error or not result.samples:
                failed += 1
                continue
            texts[result.request_id] = [s.text for s in result.samples]
        return texts, failed

    def score(
        self, texts: dict[str, list[str]], *, think_close: str, failed: int = 0, started: float | None = None
    ) -> MiniBenchResult:
        """Grade and aggregate the texts of every request (from `generate`, possibly merged over processes).

        The texts are taken in the order of `requests`, whatever order they came in, so a split evaluation
        scores exactly as one process would. ``started`` (a ``time.perf_counter()`` value) starts the clock.
        """
        start = time.perf_counter() if started is None else started
        close = think_close
        skips: Counter = Counter(self.skips)
        if failed:
            skips["generation_error"] += failed
        texts = {r.request_id: texts[r.request_id] for r in self.requests() if r.request_id in texts}
        chains = {c.id: c for c in self.chains}
        flat: list[tuple[str, str, Problem]] = []  # (request id, text, problem)
        for rid, samples in texts.items():
            pid = rid.split(":", 1)[1] if rid.startswith(f"{CLEAN}:") else chains[rid].problem_id
            flat.extend((rid, text, self.problems[pid]) for text in samples)
        grades = self.grade([(text, problem) for _, text, problem in flat], think_close)
        by_request: dict[str, list[Grade]] = defaultdict(list)
        for (rid, _, _), grade in zip(flat, grades, strict=True):
            by_request[rid].append(grade)
        outcomes: list[ChainOutcome] = []
        doubt: dict[str, list[float]] = defaultdict(list)  # chain id → per-continuation doubt flags
        samples = self._samples(texts, chains, by_request, close)
        flags: dict[str, list[float]] = defaultdict(list)
        for sample in samples:
            flags[sample["chain"]].append(float(sample["doubt"] is not None))
        for chain_id, chain in chains.items():
            if chain_id not in texts:
                continue
            problem = self.problems[chain.problem_id]
            try:
                outcomes.append(
                    chain_outcome(chain, problem.domain, by_request[chain_id], texts[chain_id], think_close=close)
                )
            except UngradableChain:
                skips["unparsable_gold"] += 1
                continue
            except ValueError:  # e.g. an empty original reasoning: no length change
                skips["bad_chain"] += 1
                continue
            doubt[chain_id] = flags[chain_id]
        clean = [g.correct for rid, gs in by_request.items() if rid.startswith(f"{CLEAN}:") for g in gs]
        return MiniBenchResult(
            per_intervention=self._rows(outcomes, doubt, ("intervention",)),
            per_timestep=self._rows(outcomes, doubt, ("intervention", "target_t")),
            overall=(self._rows(outcomes, doubt, ()) or [{}])[0],
            clean_accuracy=(sum(clean) / len(clean)) if clean else None,
            n_chains=len(outcomes),
            n_continuations=sum(len(texts[o.chain_id]) for o in outcomes),
            skips=dict(sorted(skips.items())),
            seconds=time.perf_counter() - start,
            samples=samples,
        )

    def _samples(self, texts: dict, chains: dict, by_request: dict, close: str) -> list[dict[str, Any]]:
        """What the model wrote, one record per continuation: chain (request id), intervention, t, the text,
        its verdict and the doubt family of its first sentences (None: no doubt)."""
        out = []
        for rid, samples in texts.items():
            chain = chains.get(rid)
            for text, grade in zip(samples, by_request[rid]):
                hit = first_doubt(continuation_reasoning(text, close), k=self.config.doubt_sentences)
                out.append(
                    {
                        "chain": rid,
                        "intervention": chain.intervention if chain is not None else CLEAN,
                        "t": float(chain.target_t) if chain is not None else 0.0,
                        "continuation": text,
                        "verdict": grade.verdict.value,
                        "doubt": None if hit is None else hit.family,
                    }
                )
        return out

    def _rows(self, outcomes: list[ChainOutcome], doubt: dict[str, list[float]], by: tuple[str, ...]) -> list[dict]:
        rows = []
        groups: dict[tuple, list[float]] = defaultdict(list)
        for o in outcomes:
            groups[tuple(getattr(o, b) for b in by)].extend(doubt.get(o.chain_id, []))
        for agg in aggregate(outcomes, by=by, n_boot=self.config.n_boot, seed=self.config.continuation.seed):
            key = tuple(agg.key[b] for b in by)
            flags = groups.get(key, [])
            row: dict[str, Any] = {("timestep" if k == "target_t" else k): v for k, v in agg.key.items()}
            row.update(
                n_chains=agg.n_chains,
                majority=agg.majority.mean,
                at_least_once=agg.at_least_once.mean,
                all=agg.all.mean,
                length_overhead_pct=agg.whole_pct.mean,
                remaining_overhead_pct=agg.remaining_pct.mean,
                doubt_rate=(sum(flags) / len(flags)) if flags else math.nan,
            )
            rows.append(row)
        return rows


def run_minibench(
    model: Any,
    tokenizer: Any,
    config: MiniBenchConfig | None = None,
    *,
    bench: MiniBench | None = None,
    make_generator: Callable[[Any, Any], Generator] | None = None,
) -> MiniBenchResult:
    """Measure ``model`` (a transformers causal LM) once: HF generation in eval mode, train mode restored."""
    bench = bench or MiniBench(config)
    was_training = bool(getattr(model, "training", False))  # before the generator puts it in eval mode
    try:
        generator = (make_generator or hf_generator_factory(bench.config))(model, tokenizer)
        return bench.run(generator)
    finally:
        model.train(was_training)


def closing_tag(generator: Any) -> str:
    """The tag that closes ``generator``'s reasoning (its model spec's; ``</think>`` when it has none)."""
    return generator.spec.think_close


def hf_generator_factory(config: MiniBenchConfig, backend: str = "hf") -> Callable[[Any, Any], Generator]:
    """``(model, tokenizer) →`` a registered backend's ``live`` form around them (`recovery.backends.registry`;
    default the HF one) with the config's spec, batch bound and seed."""

    def make(model: Any, tokenizer: Any) -> Generator:

        tokenizer = getattr(tokenizer, "tokenizer", tokenizer)  # a multimodal processor wraps its tokenizer
        if config.spec:
            spec = get_spec(config.spec)
        else:
            name = getattr(getattr(model, "config", None), "_name_or_path", "") or "model"
            spec = spec_for(name, tokenizer)
        return backend_named(backend).live(
            model, tokenizer, spec, seed=config.continuation.seed, max_batch_rows=config.max_batch_rows
        )

    return make


__all__ = [
    "CLEAN",
    "DEFAULT_TIMESTEPS",
    "DEFAULT_TOY_INTERVENTIONS",
    "MiniBench",
    "MiniBenchConfig",
    "closing_tag",
    "hf_generator_factory",
    "run_minibench",
]
