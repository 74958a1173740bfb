"""Every recipe error of a training stage is one line naming the key (exit 2), found before any model or
data is loaded (issue 37): the recipes below name a model folder that does not exist, so an error about
anything but the recipe would mean the stage had started loading."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from recovery.cli import app

runner = CliRunner()

BASE = {
    "model_name_or_path": "{tmp}/no-such-model",
    "run_dir": "{tmp}/no-such-run",
    "output_dir": "{tmp}/out",
    "report_to": "none",
    "use_cpu": "true",
    "max_steps": "1",
}

GRPO_ERRORS = [
    ({"reward_funcs": "[correctnes]"}, "unknown reward 'correctnes'"),
    ({"reward_funcs": "[length]", "reward_options": "{length: {max_overhed: 1.0}}"}, "max_overhed"),
    ({"reward_funcs": "[length]", "length_unit": "inches"}, "unit must be one of"),
    ({"reward_funcs": "[doubt]", "doubt_pay_for": "nothing"}, "pay_for must be one of"),
    ({"reward_funcs": "[recovery]", "recovery_weights": "[1.0, 0.2]"}, "weights needs 3 numbers"),
    ({"reward_funcs": "[correctness]", "correctness_timeout_s": "-1"}, "timeout_s must be in"),
    ({"reward_funcs": "[correctness]", "reward_options": "{length: {}}"}, "'length' is not one of reward_funcs"),
    (
        {
            "reward_funcs": "[correctness]",
            "use_vllm": "true",
            "vllm_max_model_length": "512",
            "max_prompt_tokens": "400",
            "max_completion_length": "256",
        },
        "must fit vllm_max_model_length (512)",
    ),
    ({"reward_funcs": "[correctness]", "clean_fraction": "1.5"}, "clean_fraction"),
    ({"reward_funcs": "[correctness]"}, "run_dir: {tmp}/no-such-run is not a run directory"),
    (
        {"reward_funcs": "[correctness]", "robustness": "true", "robustness_problems": "0"},
        "robustness: n_problems must be ≥ 1",
    ),
    ({"reward_funcs": "[correctness]", "run_dir": "null"}, "give dataset_name"),
]


def recipe(tmp_path, keys: dict[str, str]) -> str:
    path = tmp_path / "recipe.yaml"
    values = {**BASE, **keys}
    path.write_text("".join(f"{key}: {value.replace('{tmp}', str(tmp_path))}\n" for key, value in values.items()))
    return str(path)


def one_error_line(result) -> str:
    lines = [line for line in result.output.strip().splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert "Traceback" not in result.output, result.output
    return lines[0]


@pytest.mark.parametrize(("keys", "message"), GRPO_ERRORS, ids=[m for _, m in GRPO_ERRORS])
def test_a_bad_grpo_recipe_is_one_line_before_anything_loads(tmp_path, keys, message) -> None:
    line = one_error_line(runner.invoke(app, ["train", "grpo", "--config", recipe(tmp_path, keys)]))
    assert message.replace("{tmp}", str(tmp_path)) in line, line
    assert "no-such-model" not in line, line


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"overhead_basis": "everything"}, "overhead_basis must be"),
        ({"sft_sources": "[teacher]"}, "no teacher is set"),
        ({"robustness": "true", "robustness_problems": "0"}, "robustness: n_problems must be ≥ 1"),
        ({}, "run_dir: {tmp}/no-such-run is not a run directory"),
    ],
)
def test_a_bad_sft_recipe_is_one_line_before_anything_loads(tmp_path, keys, message) -> None:
    line = one_error_line(runner.invoke(app, ["train", "sft", "--config", recipe(tmp_path, keys)]))
    assert message.replace("{tmp}", str(tmp_path)) in line, line


def test_a_recipe_error_is_the_only_line_with_wandb_offline(tmp_path) -> None:
    """In a fresh process with ``WANDB_MODE=offline`` (as CI and the README set it), transformers prints
    ``[INFO] Running in WANDB offline mode`` when its integrations are first imported, and the trainer config
    warned about its deprecated checkpointing key: neither may come before the one-line error."""
    import os
    import subprocess
    import sys

    path = recipe(tmp_path, {"reward_funcs": "[correctnes]", "beta": "0.04"})
    env = {**os.environ, "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "recovery", "train", "grpo", "--config", path],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: unknown reward 'correctnes'"), lines
