"""`RobustnessCallback`: the robustness mini-benchmark on the model being trained, at eval or every k steps.

Use it with any transformers / TRL trainer::

    from recovery.training import RobustnessCallback, RobustnessCallbackConfig

    trainer = SFTTrainer(model=..., args=SFTConfig(..., eval_strategy="steps", eval_steps=50, report_to=["wandb"]), ...)
    RobustnessCallback(RobustnessCallbackConfig(n_problems=16, every_k_steps=0)).attach(trainer)
    trainer.train()

``attach`` binds the trainer (to log through it, to reach its accelerator / vLLM engine) and adds the
callback. Each evaluation (`MiniBench`, see `recovery.training.minibench`) logs

* scalars through the base ``transformers.Trainer.log`` (TRL's metric buffers are left alone), hence to
  every ``report_to`` integration and to ``state.log_history``, one key per quantity:
  ``robustness/{intervention}/{majority,at_least_once,all,length_overhead_pct,doubt_rate}``,
  ``robustness/{intervention}/majority_t{t}``, the same under ``robustness/mean/`` (every intervention
  pooled), ``robustness/{clean_accuracy,n_chains,skipped,seconds}`` (W&B shows ``train/robustness/...``);
* for W&B (``"wandb"`` in ``report_to``, a run active; `recovery.training.wandb_logging`): at the start of
  training, `wandb_config` (the benchmark's settings under ``robustness/`` and the ``run_config`` given)
  is added to the run config beside what transformers' ``WandbCallback`` writes (the SFT / GRPO entry
  points add the recipe's keys: `recovery.training.stage.RecipeConfigCallback`); each evaluation logs
  the robustness-vs-timestep curve and table under ``robustness/curve`` / ``robustness/table``, and adds
  ``wandb_samples`` of the continuations to the incremental table ``robustness/samples`` (chain,
  intervention, t, continuation, verdict, doubt). With ``source="run"`` the benchmark run directory the
  chains come from is an input of the W&B run (`recovery.training.wandb_benchmark.use_benchmark_runs`).

Generation
    HF (default): the unwrapped model (``trl.models.utils.unwrap_model_for_generation`` on
    ``trainer.model_wrapped``: ZeRO-3 parameters gathered, gradient checkpointing paused), in eval mode
    for `recovery.backends.hf.HFGenerator`, then back in the mode it was in. vLLM: a TRL trainer's
    *colocated* engine (GRPO ``use_vllm=True, vllm_mode="colocate"``, ``vllm_tensor_parallel_size=1``),
    after the current weights are pushed to it on every rank (`recovery.training.colocated_vllm`).

Several processes
    The requests are dealt between the processes (``split_between_processes`` on
    `recovery.training.minibench_result.dealt`: every rank gets the same mix); every rank generates its
    share (HF from its unwrapped model, or its own colocated vLLM engine); one ``gather_object`` brings
    the shares to the main process, which grades them in the requests' own order (`MiniBench.score`) and
    broadcasts the metrics, so every rank logs the same record. Per-request seeds make the result a
    single process's. A rank waits only at the gather, for the slowest share (a warning names a wait
    over half of ``ddp_timeout``). ZeRO-3 weights are gathered for the duration (the model must fit one
    device); FSDP with several processes is skipped with a warning. ``generated`` keeps ``(step, request
    ids)`` of what this process generated at each evaluation.

A failed evaluation never stops training (it would leave the other ranks waiting on a collective): a
rank whose share fails still joins the gather; the failure is logged with its traceback, counted in
``failures``, and the next evaluation tries again. ``raise_errors=True`` (tests) raises instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from transformers import TrainerCallback

from recovery.backends.registry import live_backends
from recovery.training import colocated_vllm
from recovery.training.minibench import MiniBench, MiniBenchConfig, closing_tag, hf_generator_factory
from recovery.training.minibench_config import logged_settings
from recovery.training.minibench_result import MiniBenchResult, RankShare, dealt, generate_share, merge_shares, waited
from recovery.training.unwrap import unwrapped_for_generation
from recovery.training.wandb_benchmark import use_benchmark_runs
from recovery.training.wandb_logging import active_run, log_robustness_step, log_samples, update_run_config
from recovery.types import Problem, Trace

log = logging.getLogger(__name__)

#: `RobustnessCallbackConfig` fields about logging and error handling, not about what is measured.
_NOT_SETTINGS = ("prefix", "wandb_curves", "wandb_samples", "raise_errors")


@dataclass
class RobustnessCallbackConfig(MiniBenchConfig):
    """`MiniBenchConfig` plus when and how to run and log.

    ``every_k_steps`` > 0 runs after every k-th optimizer step; ``on_evaluate`` runs whenever the trainer
    evaluates; ``at_train_begin`` measures the starting point (step 0). One evaluation per step at most.
    ``backend``: ``auto`` (TRL's colocated vLLM engine when there is one, else HF), or a registered backend that
    can generate with the trainer's own model (`recovery.backends.registry.live_backends`: ``hf``, ``vllm``).
    """

    every_k_steps: int = 0
    on_evaluate: bool = True
    at_train_begin: bool = False
    prefix: str = "robustness"
    wandb_curves: bool = True
    wandb_samples: int = 32  # continuations per evaluation added to the W&B samples table (0: none)
    backend: str = "auto"
    raise_errors: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.every_k_steps < 0 or self.wandb_samples < 0:
            raise ValueError("every_k_steps and wandb_samples must be ≥ 0 (0 = off)")
        choices = ("auto", *live_backends())
        if self.backend not in choices:
            raise ValueError(f"backend must be one of {choices}, got {self.backend!r}")


class RobustnessCallback(TrainerCallback):
    """Runs the robustness mini-benchmark during training and logs it (see module doc).

    ``items``: your own (problem, original trace) pairs instead of ``config.source``. ``tokenizer``:
    used for generation when given (default: the trainer's ``processing_class``). ``run_config``: settings
    of the training run (the recipe's script arguments) added to the W&B run config with the benchmark's.
    ``results`` keeps ``(step, MiniBenchResult)`` of every evaluation on the main process.
    """

    def __init__(
        self,
        config: RobustnessCallbackConfig | None = None,
        *,
        trainer: Any = None,
        items: Sequence[tuple[Problem, Trace]] | None = None,
        tokenizer: Any = None,
        run_config: Mapping[str, Any] | None = None,
    ) -> None:
        self.config = config or RobustnessCallbackConfig()
        self.trainer = trainer
        self.tokenizer = tokenizer
        self.run_config = dict(run_config or {})
        self._items = list(items) if items is not None else None
        self._bench: MiniBench | None = None
        self._last_step: int | None = None
        self._warned: set[str] = set()
        self.results: list[tuple[int, MiniBenchResult]] = []
        self.generated: list[tuple[int, list[str]]] = []
        self.failures = 0
        self.vllm_params_class: Any = None  # None: vllm.SamplingParams (a stand-in can be set in tests)
        self._samples_table: Any = None  # the incremental W&B table of sampled continuations

    # -- wiring ------------------------------------------------------------------------------------------

    def attach(self, trainer: Any) -> RobustnessCallback:
        """Bind ``trainer`` and add this callback to it; returns self."""
        self.trainer = trainer
        trainer.add_callback(self)
        return self

    @property
    def bench(self) -> MiniBench:
        """The mini-benchmark (its chains are built on first use)."""
        if self._bench is None:
            self._bench = MiniBench(self.config, items=self._items)
        return self._bench

    @property
    def eval_problems(self) -> list[Problem]:
        """The problems the callback measures: keep them out of the training data."""
        return self.bench.eval_problems

    def wandb_config(self) -> dict[str, Any]:
        """The W&B config keys of this callback: ``run_config`` as it is, and the benchmark under ``{prefix}/``.

        Every `RobustnessCallbackConfig` setting but the logging ones (``prefix``, ``wandb_curves``,
        ``raise_errors``), the run config sections under their dotted names (``continuation.n``,
        ``grading.unclosed`` — the grading the benchmark uses, the run's when it follows a run), with
        ``interventions``, ``timesteps`` and ``n_problems`` as the chains hold them (the defaults resolved, a
        run's chains filtered), plus ``problems`` (their ids) and ``n_chains``.
        ``source`` is ``items`` when the chains come from the ``items`` given. Two runs measured on
        different chains or with different decoding thus differ in their config.
        """
        bench = self.bench
        settings = logged_settings(bench.config, bench.grading, skip=_NOT_SETTINGS)
        settings.update(
            source="items" if self._items is not None else self.config.source,
            interventions=sorted({c.intervention for c in bench.chains}),
            timesteps=sorted({round(float(c.target_t), 6) for c in bench.chains}),
            n_problems=len(bench.problems),
            problems=sorted(bench.problems),
            n_chains=len(bench.chains),
        )
        prefix = self.config.prefix
        return {**self.run_config, **{f"{prefix}/{k}": v for k, v in settings.items()}}

    # -- events ------------------------------------------------------------------------------------------

    def on_train_begin(self, args, state, control, **kwargs):
        _ = self.bench  # build the chains now: a configuration error stops the run before any training
        if state.is_world_process_zero:  # after WandbCallback.on_train_begin, which starts the W&B run
            self._update_wandb_config(args)
        if self.config.at_train_begin:
            self.evaluate(args, state, **kwargs)

    def on_step_end(self, args, state, control, **kwargs):
        k = self.config.every_k_steps
        if k > 0 and state.global_step > 0 and state.global_step % k == 0:
            self.evaluate(args, state, **kwargs)

    def on_evaluate(self, args, state, control, **kwargs):
        if self.config.on_evaluate:
            self.evaluate(args, state, **kwargs)

    def on_train_end(self, args, state, control, **kwargs):
        if self._bench is not None:
            self._bench.close()

    # -- one evaluation ---------------------------------------------------------------------------------

    def evaluate(self, args, state, **kwargs) -> MiniBenchResult | None:
        """Run the benchmark now (all ranks must call this together); returns the result on the main process."""
        step = int(state.global_step)
        if step == self._last_step:
            return None
        self._last_step = step
        accelerator = getattr(self.trainer, "accelerator", None)
        if self._num_processes(args) > 1 and "FSDP" in str(getattr(accelerator, "distributed_type", "")):
            self._warn_once("fsdp", "RobustnessCallback: FSDP with several processes is not supported; skipped")
            return None
        is_main = bool(state.is_world_process_zero)
        engine = self._vllm_engine()
        if engine is not None:
            result = self._run_vllm(engine, args, state, is_main)
        else:
            result = self._run_hf(args, state, is_main, kwargs)
        metrics = result.scalars(self.config.prefix) if result is not None else None
        if is_main and result is None:
            metrics = {f"{self.config.prefix}/failed": 1.0}
        metrics = self._broadcast(metrics, args)
        if metrics:
            self._log(metrics, args, state)
        if is_main and result is not None:
            self.results.append((step, result))
            self._log_wandb(result, step, args)
        return result

    def _guarded(self, fn) -> MiniBenchResult | None:
        try:
            return fn()
        except Exception:
            if self.config.raise_errors:
                raise
            self.failures += 1
            log.exception("RobustnessCallback: the evaluation failed; training continues")
            return None

    def _tokenizer(self, kwargs: dict) -> Any:
        tokenizer = self.tokenizer or kwargs.get("processing_class") or getattr(self.trainer, "processing_class", None)
        if tokenizer is None:
            raise ValueError(
                "RobustnessCallback needs a tokenizer: pass tokenizer= or give the trainer a processing_class"
            )
        return getattr(tokenizer, "tokenizer", tokenizer)

    def _run_hf(self, args, state, is_main: bool, kwargs: dict) -> MiniBenchResult | None:
        model = kwargs.get("model") if kwargs.get("model") is not None else getattr(self.trainer, "model", None)
        if model is None:
            raise ValueError("RobustnessCallback got no model (pass it through the trainer)")
        with unwrapped_for_generation(self.trainer, args, model) as unwrapped:
            was_training = unwrapped.training  # HFGenerator puts the model in eval mode
            make = hf_generator_factory(self.bench.config, self._model_backend())
            try:
                result = self._measure(lambda: make(unwrapped, self._tokenizer(kwargs)), args, state, is_main)
            finally:
                unwrapped.train(was_training)
            self._barrier(args)
        return result

    def _measure(self, make_generator, args, state, is_main: bool) -> MiniBenchResult | None:
        """One process: the main one runs the benchmark. Several: see the module doc."""
        step = int(state.global_step)
        if self._num_processes(args) <= 1:
            if not is_main:
                return None
            self.generated.append((step, [r.request_id for r in self.bench.requests()]))
            return self._guarded(lambda: self.bench.run(make_generator()))
        from accelerate import PartialState
        from accelerate.utils import gather_object

        start = time.perf_counter()
        processes = PartialState()
        with processes.split_between_processes(dealt(self.bench.requests(), processes.num_processes)) as mine:
            mine = list(mine)
        self.generated.append((step, [r.request_id for r in mine]))
        share, generator = generate_share(self.bench, make_generator, mine, processes.process_index)
        shares: list[RankShare] = gather_object([share])  # a failed share joins too: the others wait for it
        if share.error is not None and self.config.raise_errors:
            raise RuntimeError(f"this process failed to generate its share: {share.error}")
        if not is_main:  # the main process counts a failed evaluation once, whichever share failed
            self.failures += share.error is not None
            return None
        waited(shares, float(getattr(args, "ddp_timeout", None) or 1800))  # warns when close to the timeout

        def score() -> MiniBenchResult:
            texts, failed = merge_shares(shares)
            return self.bench.score(texts, think_close=closing_tag(generator), failed=failed, started=start)

        return self._guarded(score)

    # -- vLLM ----------------------------------------------------------------------------------------

    def _model_backend(self) -> str:
        """The registered backend whose ``live`` form wraps the trainer's model (HF for auto and for vllm)."""
        return self.config.backend if self.config.backend not in ("auto", "vllm") else "hf"

    def _vllm_engine(self) -> Any:
        """TRL's colocated vLLM engine wrapper when it can serve the benchmark, else None (HF)."""
        return colocated_vllm.colocated_engine(self.trainer, self.config.backend)

    def _run_vllm(self, vg: Any, args, state, is_main: bool) -> MiniBenchResult | None:
        trainer = self.trainer
        colocated_vllm.refresh_weights(vg, trainer, state.global_step)  # every rank: it gathers sharded weights
        sleep = colocated_vllm.sleeps(vg)

        def make_generator():
            if sleep:
                vg.llm.wake_up(tags=["kv_cache"])
            tokenizer = self._tokenizer({"processing_class": getattr(trainer, "processing_class", None)})
            return colocated_vllm.engine_generator(
                vg, trainer, self.bench.config, tokenizer, params_class=self.vllm_params_class
            )

        try:
            result = self._measure(make_generator, args, state, is_main)
        finally:
            if sleep:
                colocated_vllm.put_to_sleep(vg)
        self._barrier(None)
        return result

    # -- distributed helpers (overridable in tests) ------------------------------------------------------

    def _num_processes(self, args) -> int:
        accelerator = getattr(self.trainer, "accelerator", None)
        if accelerator is not None:
            return int(accelerator.num_processes)
        return int(getattr(args, "world_size", 1) or 1) if args is not None else 1

    def _barrier(self, args) -> None:
        """Every rank meets here once its part of the evaluation is done."""
        accelerator = getattr(self.trainer, "accelerator", None)
        if accelerator is not None:
            accelerator.wait_for_everyone()
            return
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.barrier()

    def _broadcast(self, metrics: dict[str, float] | None, args) -> dict[str, float] | None:
        """The main process's metrics on every rank."""
        if self._num_processes(args) <= 1:
            return metrics
        from accelerate.utils import broadcast_object_list

        box = [metrics]
        broadcast_object_list(box, from_process=0)
        return box[0]

    def _log(self, metrics: dict[str, float], args, state) -> None:
        trainer = self.trainer
        if trainer is not None and hasattr(trainer, "callback_handler"):
            from transformers import Trainer

            # Trainer.log ends in on_log, which clears should_log: restored, so this step's own log still happens.
            pending = trainer.control.should_log
            Trainer.log(trainer, dict(metrics))  # the base method: every report_to integration, log_history
            trainer.control.should_log = pending
            return
        self._warn_once(
            "no-trainer",
            "RobustnessCallback is not attached to a trainer (use .attach(trainer)): its metrics go to "
            "state.log_history only, not to the report_to integrations",
        )
        state.log_history.append({**metrics, "step": state.global_step})

    def _update_wandb_config(self, args) -> None:
        run = active_run(args)
        if run is None:
            return
        try:
            update_run_config(self.wandb_config(), run=run, owned=f"{self.config.prefix}/")
            if self.config.source == "run" and self._items is None:
                use_benchmark_runs([self.config.run_dir], run=run)
        except Exception:
            if self.config.raise_errors:
                raise
            log.exception("RobustnessCallback: could not add its settings to the W&B run config; training continues")

    def _log_wandb(self, result: MiniBenchResult, step: int, args) -> None:
        run = active_run(args)
        if run is not None and self.config.wandb_curves:
            log_robustness_step(result, step, prefix=self.config.prefix, run=run)
        if run is not None and self.config.wandb_samples:
            self._samples_table = log_samples(
                self._samples_table, result, step, k=self.config.wandb_samples, prefix=self.config.prefix, run=run
            )

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message)


__all__ = ["RobustnessCallback", "RobustnessCallbackConfig"]
