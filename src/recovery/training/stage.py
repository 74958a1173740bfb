"""How one training stage (`recovery.training.sft`, `recovery.training.grpo`) runs: its recipe parser, the
set-up before the trainer (`prepare`), the trainer's common arguments, and the run itself (`TrainingRun.train`:
the recipe into the W&B run config, the robustness callback, training, saving, closing the trackers)."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from recovery.configs import ConfigError
from recovery.training.common import (
    check_versions,
    eval_set,
    load_dataset_any,
    load_tokenizer,
    make_callback,
    model_init_kwargs,
    model_path,
    model_spec,
    quiet_third_party,
    recipe_config,
    splits,
)
from recovery.training.configs import RecoveryScriptArguments, callback_config
from recovery.training.wandb_benchmark import use_benchmark_runs
from recovery.training.wandb_logging import active_run, reports_to_wandb, update_run_config

logger = logging.getLogger(__name__)
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def script_logging() -> None:
    """A training script's process set-up: INFO logging to stderr unless the caller configured logging, and
    tokenizers' parallelism off (it warns when a process forks after using it, as dataloaders do)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)  # does nothing when logging has handlers


def trl_parser(script_arguments: type, trl_config: str) -> Any:
    """The `trl.TrlParser` of a stage: its script arguments, the TRL trainer config named ``trl_config``
    (``SFTConfig``, ``GRPOConfig``) and ``trl.ModelConfig`` — the three dataclasses a recipe's keys fill — as a
    `RecipeParser` (checkpointing keys under the installed transformers' names). Refuses trl / transformers older
    than the recipes need (`recovery.training.common.check_versions`)."""
    check_versions()
    from recovery.recipe_parser import RecipeParser, import_transformers_quietly  # lazy: loads trl

    import_transformers_quietly()  # before trl imports it
    import trl

    return RecipeParser((script_arguments, getattr(trl, trl_config), trl.ModelConfig))


def run_as_script(main: Callable[..., Any], make_parser: Callable[[], Any]) -> None:
    """``python -m recovery.training.<stage>``: ``main`` on the command line (``--config FILE`` and overrides)."""
    script_logging()
    main(*make_parser().parse_args_and_config())


class RecipeConfigCallback(TrainerCallback):
    """Adds ``values`` (the recipe's `recipe_config`) to the W&B run config when training starts, and declares
    the benchmark run directories the training data was built from (``run_dirs``) inputs of the W&B run
    (`recovery.training.wandb_benchmark.use_benchmark_runs`: the curves link to the data behind them).

    transformers' ``WandbCallback`` starts the run in its own ``on_train_begin`` (it runs first: the trainer
    adds it before any callback added later) and writes the training arguments and the model config; this
    writes the rest of the recipe, whether or not the `RobustnessCallback` runs. Only the main process
    writes; a failure is logged and training goes on.
    """

    def __init__(self, values: Mapping[str, Any], run_dirs: Any = ()) -> None:
        self.values, self.run_dirs = dict(values), [d for d in run_dirs or () if d]

    def on_train_begin(self, args, state, control, **kwargs):
        run = active_run(args) if state.is_world_process_zero else None
        if run is None:
            return
        try:
            update_run_config(self.values, run=run)
            use_benchmark_runs(self.run_dirs, run=run)
        except Exception:
            logger.exception("could not add the recipe's settings to the W&B run config; training continues")


@contextlib.contextmanager
def recipe_errors(where: str = "") -> Iterator[None]:
    """A recipe check's `ValueError` / `TypeError` as a `ConfigError` (one line on the command line, exit 2),
    its message prefixed by ``where`` (the recipe key or section) when given."""
    try:
        yield
    except ConfigError:
        raise
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{where}: {err}" if where else str(err)) from None


def check_recipe(script_args: RecoveryScriptArguments, data: StageData) -> None:
    """The checks both stages make of their recipe before any model or data is loaded: where the data comes
    from (``dataset_name``, or a ``run_dir`` that is a run directory) and the robustness callback's keys."""
    if script_args.robustness:
        with recipe_errors("robustness"):
            callback_config(script_args)
    if not script_args.dataset_name:
        if not script_args.run_dir:
            raise ConfigError(data.missing)
        for key, run_dir in [("run_dir", script_args.run_dir), *_more_run_dirs(script_args)]:
            if not (Path(run_dir) / "config.json").is_file():
                raise ConfigError(f"{key}: {run_dir} is not a run directory (no config.json in it)")


def _more_run_dirs(script_args: RecoveryScriptArguments) -> list[tuple[str, str]]:
    return [(f"more_run_dirs[{i}]", d) for i, d in enumerate(getattr(script_args, "more_run_dirs", None) or [])]


#: A stage's dataset builder from ``run_dir``: ``(script_args, tokenizer, spec, eval_set) → dataset``.
DatasetBuilder = Callable[[Any, Any, Any, Any], Any]


@dataclass(frozen=True)
class StageData:
    """Where a stage's training data comes from: ``build`` makes it from ``run_dir`` when no ready
    ``dataset_name`` is given; ``missing`` is the error when neither is."""

    build: DatasetBuilder
    missing: str

    def load(self, script_args: RecoveryScriptArguments, tokenizer: Any, spec: Any, eval_set: Any = None):
        """``dataset_name`` loaded as it is, else built from ``run_dir`` (decontaminated against ``eval_set``)
        and saved to ``save_dataset_to`` when set."""
        if script_args.dataset_name:
            return load_dataset_any(
                script_args.dataset_name, script_args.dataset_config, script_args.dataset_train_split
            )
        if not script_args.run_dir:
            raise ConfigError(self.missing)
        dataset = self.build(script_args, tokenizer, spec, eval_set)
        if script_args.save_dataset_to:
            dataset.save_to_disk(script_args.save_dataset_to)
        return dataset


@dataclass
class TrainingRun:
    """One stage's run as `prepare` sets it up: the parsed recipe and what was built from it."""

    script_args: RecoveryScriptArguments
    training_args: Any
    model_args: Any
    tokenizer: Any
    spec: Any
    callback: Any
    train_dataset: Any
    eval_dataset: Any

    def trainer_kwargs(self) -> dict[str, Any]:
        """The TRL trainer's arguments both stages pass: the model by path, the datasets, the tokenizer, PEFT."""
        from trl import get_peft_config

        return {
            "model": model_path(self.model_args.model_name_or_path),
            "args": self.training_args,
            "train_dataset": self.train_dataset,
            "eval_dataset": self.eval_dataset,
            "processing_class": self.tokenizer,
            "peft_config": get_peft_config(self.model_args),
        }

    def train(self, trainer: Any) -> None:
        """Add the callbacks (the recipe to W&B when reporting there, then the robustness callback), train
        (resuming when the recipe says so), save and close the trackers."""
        if reports_to_wandb(self.training_args):
            args = self.script_args  # the runs the data was built from (none for a ready dataset)
            runs = [] if args.dataset_name else [args.run_dir, *(getattr(args, "more_run_dirs", None) or [])]
            trainer.add_callback(RecipeConfigCallback(recipe_config(args), run_dirs=runs))
        if self.callback is not None:
            self.callback.attach(trainer)
        trainer.train(resume_from_checkpoint=self.training_args.resume_from_checkpoint)
        finish(trainer, self.training_args, self.tokenizer)


def prepare(script_args: RecoveryScriptArguments, training_args: Any, model_args: Any, data: StageData) -> TrainingRun:
    """Everything before the trainer: seeds, tokenizer, conventions, callback, the dataset (kept clear of the
    callback's problems and the recipe's evaluation sets), its train / eval split, the model's init kwargs.
    Refuses trl / transformers older than the stages need (`recovery.training.common.check_versions`)."""
    from transformers import set_seed

    check_versions()
    quiet_third_party()
    set_seed(training_args.seed)
    tokenizer = load_tokenizer(model_args, training_args)
    spec = model_spec(script_args, model_args, tokenizer)
    callback = make_callback(script_args)
    dataset = data.load(script_args, tokenizer, spec, eval_set(script_args, callback))
    train_dataset, eval_dataset = splits(dataset, script_args, training_args)
    training_args.model_init_kwargs = model_init_kwargs(model_args, training_args)
    return TrainingRun(script_args, training_args, model_args, tokenizer, spec, callback, train_dataset, eval_dataset)


def finish(trainer: Any, training_args: Any, tokenizer: Any) -> None:
    """Save the model and tokenizer, push when asked, and close the trackers (TRL scripts' ending)."""
    trainer.save_model(training_args.output_dir)
    if trainer.accelerator.is_main_process:
        tokenizer.save_pretrained(training_args.output_dir)
    if training_args.push_to_hub:
        trainer.push_to_hub()
    if reports_to_wandb(training_args):
        import wandb

        if wandb.run is not None:  # transformers' WandbCallback leaves its run open
            wandb.finish()
    if hasattr(trainer, "end"):  # transformers ≥ 5.18: accelerate's trackers and the process group
        trainer.end()


__all__ = [
    "LOG_FORMAT",
    "RecipeConfigCallback",
    "StageData",
    "TrainingRun",
    "finish",
    "prepare",
    "check_recipe",
    "recipe_errors",
    "run_as_script",
    "script_logging",
    "trl_parser",
]
