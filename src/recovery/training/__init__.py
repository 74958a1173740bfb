"""Training-time integration: the robustness callback, W&B logging, and the SFT / GRPO entry points.

* `RobustnessCallback` (`recovery.training.callback`) — the mini-benchmark (`recovery.training.minibench`)
  on the model being trained, at eval or every k steps; scalars to every ``report_to`` integration,
  per-step robustness curves and tables to W&B.
* `log_run_to_wandb` (`recovery.training.wandb_benchmark`) — a benchmark run's aggregates and curves to W&B.
* `recovery.training.sft.main` / `recovery.training.grpo.main` — open-r1-style entry points,
  ``main(script_args, training_args, model_args)``, read from flat YAML recipes by `trl.TrlParser`
  (`recovery.training.configs`); `register_train_commands` adds ``recovery train sft|grpo`` to the CLI.

Names are imported lazily so ``import recovery.training`` stays cheap (no torch, no TRL).
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "RobustnessCallback": "recovery.training.callback",
    "RobustnessCallbackConfig": "recovery.training.callback",
    "VLLMEngineGenerator": "recovery.backends.vllm_engine",
    "MiniBench": "recovery.training.minibench",
    "MiniBenchConfig": "recovery.training.minibench",
    "MiniBenchResult": "recovery.training.minibench_result",
    "run_minibench": "recovery.training.minibench",
    "log_run_to_wandb": "recovery.training.wandb_benchmark",
    "log_robustness_step": "recovery.training.wandb_logging",
    "register_train_commands": "recovery.training.commands",
    "train": "recovery.training.commands",
    "SFTScriptArguments": "recovery.training.configs",
    "GRPOScriptArguments": "recovery.training.configs",
}

__all__ = [  # noqa: RUF022 - grouped by module, as _EXPORTS
    "RobustnessCallback",
    "RobustnessCallbackConfig",
    "VLLMEngineGenerator",
    "MiniBench",
    "MiniBenchConfig",
    "MiniBenchResult",
    "run_minibench",
    "log_run_to_wandb",
    "log_robustness_step",
    "register_train_commands",
    "train",
    "SFTScriptArguments",
    "GRPOScriptArguments",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'recovery.training' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
