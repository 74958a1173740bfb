"""A real `trl.GRPOTrainer` run (3 steps, CPU) through `recovery.training.grpo.main` and the tiny-reasoner
recipe: prompts built from a run directory (`recovery.training_data.grpo_rows`, as `build_grpo_dataset`),
the `recovery.rewards`, a KL term, and the callback."""

from __future__ import annotations

from pathlib import Path

from recovery.training.commands import parse

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "tiny-reasoner" / "grpo_recovery" / "config.yaml"


def test_grpo_main_runs_three_steps_with_recovery_rewards(tmp_path, tiny_model_dir, toy_run):
    from recovery.rewards import CorrectnessReward, DoubtReward, LengthOverheadReward
    from recovery.training.grpo import main

    script_args, training_args, model_args = parse(
        "grpo",
        [
            "--config",
            str(RECIPE),
            "--model_name_or_path",
            str(tiny_model_dir),
            "--run_dir",
            str(toy_run.path),
            "--output_dir",
            str(tmp_path / "model"),
            "--save_dataset_to",
            str(tmp_path / "prompts"),
            "--max_steps",
            "3",
            "--per_device_train_batch_size",
            "4",
            "--num_generations",
            "2",
            "--max_completion_length",
            "16",
            "--logging_steps",
            "1",
            "--report_to",
            "none",
            "--warmup_steps",
            "0",
            "--reward_funcs",
            "correctness",
            "doubt",
            "length",
            "--reward_weights",
            "1.0",
            "0.2",
            "0.3",
            "--robustness_problems",
            "2",
            "--robustness_samples",
            "2",
            "--robustness_max_new_tokens",
            "12",
            "--robustness_timesteps",
            "0.5",
            "--robustness_every_k_steps",
            "3",
            "--robustness_at_train_begin",
            "false",
        ],
    )
    assert training_args.beta > 0 and training_args.learning_rate <= 2e-5  # the recipe's KL term and small lr
    trainer = main(script_args, training_args, model_args)

    assert trainer.state.global_step == 3
    assert trainer.ref_model is not None  # beta > 0: a frozen reference for the KL term
    assert [type(f) for f in trainer.reward_funcs] == [CorrectnessReward, DoubtReward, LengthOverheadReward]
    logs = trainer.state.log_history
    for name in ("correctness_reward", "doubt_reward", "length_overhead_reward"):
        assert any(f"rewards/{name}/mean" in row for row in logs), name
    assert any("kl" in row for row in logs)
    assert [row["step"] for row in logs if "robustness/mean/majority" in row] == [3]
    assert (tmp_path / "model" / "model.safetensors").is_file()

    from datasets import load_from_disk

    prompts = load_from_disk(str(tmp_path / "prompts"))
    for column in ("prompt", "answer", "answer_type", "domain", "intervention", "timestep", "reference_length"):
        assert column in prompts.column_names
    assert set(prompts["intervention"]) >= {"toy/wrong_continuation", "toy/random_characters"}
    assert "none" in set(prompts["intervention"])  # the recipe mixes in clean prefixes
