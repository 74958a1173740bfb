"""``recovery train sft|grpo --config FILE [--key value ...]``: TrlParser on a recipe, then the stage's ``main``.

Wire into the Typer app with `register_train_commands(app)`. Extra flags after ``--config FILE`` override
the recipe (``--max_steps 20 --learning_rate 1e-5``), exactly as with ``python -m recovery.training.sft``.
For several GPUs launch the module through accelerate instead of the CLI::

    accelerate launch --config_file recipes/accelerate_configs/zero2.yaml -m recovery.training.sft --config FILE

Importing this module is cheap (no torch, no TRL): they are imported when a command runs.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

STAGES: tuple[str, ...] = ("sft", "grpo")


def make_parser(stage: str):
    """The `trl.TrlParser` of ``stage`` (``sft`` or ``grpo``)."""
    if stage == "sft":
        from recovery.training.sft import make_parser as parser  # lazy: loads transformers, trl
    elif stage == "grpo":
        from recovery.training.grpo import make_parser as parser  # lazy: loads transformers, trl
    else:
        raise ValueError(f"unknown training stage {stage!r}; choose from {STAGES}")
    return parser()


def parse(stage: str, argv: Sequence[str]) -> tuple[Any, Any, Any]:
    """``(script_args, training_args, model_args)`` from ``argv`` (``--config FILE`` and overrides)."""
    return tuple(make_parser(stage).parse_args_and_config(args=list(argv)))  # type: ignore[return-value]


def train(stage: str, argv: Sequence[str]) -> Any:
    """Parse ``argv`` for ``stage`` and run its ``main``; returns the trainer."""
    from recovery.training.stage import script_logging  # lazy: loads transformers, trl

    script_logging()
    script_args, training_args, model_args = parse(stage, argv)
    if stage == "sft":
        from recovery.training.sft import main  # lazy: loads transformers, trl
    else:
        from recovery.training.grpo import main  # lazy: loads transformers, trl
    return main(script_args, training_args, model_args)


def register_train_commands(app: Any) -> Any:
    """Add ``train`` with ``sft`` and ``grpo`` subcommands to the Typer ``app``; returns the sub-app."""
    import typer

    train_app = typer.Typer(help="Train a model to recover from interventions (TRL recipes).", no_args_is_help=True)

    def command_for(stage: str):
        def command(
            ctx: typer.Context,
            config: Path = typer.Option(..., "--config", help=f"Recipe YAML (see recipes/*/{stage}_recovery/)."),
        ) -> None:
            train(stage, ["--config", str(config), *ctx.args])

        command.__doc__ = (
            f"{stage.upper()} from a recipe: `recovery train {stage} --config FILE [--key value ...]`.\n\n"
            f"Extra flags override the recipe. Several GPUs: `accelerate launch --config_file "
            f"recipes/accelerate_configs/zero2.yaml -m recovery.training.{stage} --config FILE`."
        )
        return command

    for stage in STAGES:
        train_app.command(name=stage, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(
            command_for(stage)
        )
    app.add_typer(train_app, name="train")
    return train_app


__all__ = ["STAGES", "make_parser", "parse", "register_train_commands", "train"]
