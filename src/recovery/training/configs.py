"""Script arguments for ``recovery train sft|grpo`` (TrlParser dataclasses, open-r1 style).

A recipe is one flat YAML file whose keys are fields of three dataclasses, read by `trl.TrlParser`:

* `SFTScriptArguments` / `GRPOScriptArguments` (here): where the data comes from, what to keep out of it,
  the rewards (GRPO), and the `RobustnessCallback` (keys ``robustness_*``);
* ``trl.SFTConfig`` / ``trl.GRPOConfig``: the training run (``learning_rate``, ``beta``, ``report_to``...);
* ``trl.ModelConfig``: the model (``model_name_or_path``, ``dtype``, LoRA...). ``tiny-reasoner`` names the
  toy model shipped with the package.

Unknown keys are an error (`trl.TrlParser.parse_args_and_config` with its default
``fail_with_unknown_args=True``); command-line flags override the file.

Data: ``dataset_name`` (inherited from ``trl.ScriptArguments``) is a ready dataset — a ``save_to_disk``
folder, a Parquet/JSON file or folder (e.g. an ``export_run`` ``<kind>/`` folder) or a Hub id — with the
columns of `recovery.training_data` (SFT: ``input_ids``/``completion_mask`` in the policy's tokens, beside
``prompt``/``completion``; GRPO: ``prompt`` and the reward columns). Or ``run_dir``: a benchmark run directory to build the dataset from, with the policy's own
tokenizer (`recovery.training_data.build_sft_dataset` / `build_grpo_dataset`). Either way the problems the
callback measures, those of ``decontaminate_run_dirs`` and the first ``decontaminate_toy_heldout`` toy
held-out problems are removed from training data built from a run.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from trl import ScriptArguments

from recovery.run_config import InterventionsConfig, SamplingConfig
from recovery.run_dir import open_run
from recovery.training.minibench import DEFAULT_TIMESTEPS, DEFAULT_TOY_INTERVENTIONS
from recovery.training.minibench_config import toy_sampling

__all__ = ["GRPOScriptArguments", "RecoveryScriptArguments", "SFTScriptArguments", "callback_config"]


@dataclass
class RecoveryScriptArguments(ScriptArguments):
    """What both stages share: data source, decontamination, model conventions and the callback."""

    run_dir: str | None = field(
        default=None,
        metadata={"help": "A benchmark run directory (`recovery run`) to build the training data from."},
    )
    more_run_dirs: list[str] | None = field(
        default=None,
        metadata={
            "help": "Further run directories whose rows are added (e.g. a large chains-only run for "
            "the teacher beside a smaller run with the model's own continuations)."
        },
    )
    data_interventions: list[str] | None = field(
        default=None, metadata={"help": "Only chains of these interventions (default: all in the run)."}
    )
    data_categories: list[str] | None = field(
        default=None, metadata={"help": "Only chains of these categories (benign, neutral, adversarial)."}
    )
    data_models: list[str] | None = field(default=None, metadata={"help": "Only chains of these models."})
    build_seed: int = field(default=0, metadata={"help": "Seed of the dataset builder (clean-cut choice)."})
    decontaminate_run_dirs: list[str] | None = field(
        default=None, metadata={"help": "Run directories whose problems must not appear in training data."}
    )
    decontaminate_toy_heldout: int = field(
        default=0, metadata={"help": "Also keep out the first N problems of the toy held-out set."}
    )
    eval_fraction: float = field(
        default=0.05,
        metadata={"help": "With eval_strategy != 'no' and no test split: fraction of rows held out for eval."},
    )
    save_dataset_to: str | None = field(
        default=None, metadata={"help": "Save the built training dataset here (`save_to_disk`)."}
    )
    model_spec: str | None = field(
        default=None,
        metadata={"help": "Model conventions (recovery.models registry name); default: guessed from the model."},
    )
    # --- RobustnessCallback (recovery.training.callback)
    robustness: bool = field(default=True, metadata={"help": "Run the robustness mini-benchmark during training."})
    robustness_source: str = field(
        default="toy", metadata={"help": "'toy' (toy held-out problems) or 'run' (chains of robustness_run_dir)."}
    )
    robustness_run_dir: str | None = field(
        default=None,
        metadata={
            "help": "Run directory whose chains the callback measures (source 'run'; only data_models' "
            "chains when data_models is set). Its problems are kept out of the training data."
        },
    )
    robustness_problems: int = field(default=8, metadata={"help": "Problems in the mini-benchmark."})
    robustness_interventions: list[str] | None = field(
        default=None, metadata={"help": "Interventions measured (default: toy trio, or all in the run)."}
    )
    robustness_timesteps: list[float] | None = field(
        default=None, metadata={"help": "Timesteps measured (default: 0.3 0.5 0.7, or all in the run)."}
    )
    # The decoding of the measured continuations: unset, 4 samples of at most 320 tokens at T=0.6, top_p=0.95,
    # seed 0, and for source 'run' the run's own continuation requests (its decoding and per-chain seeds).
    robustness_samples: int | None = field(default=None, metadata={"help": "Continuations per chain (N)."})
    robustness_max_new_tokens: int | None = field(default=None, metadata={"help": "Longest continuation."})
    robustness_temperature: float | None = field(default=None, metadata={"help": "Sampling temperature."})
    robustness_top_p: float | None = field(default=None, metadata={"help": "Nucleus sampling."})
    robustness_seed: int | None = field(
        default=None, metadata={"help": "Seed of the chains and of every request (default 0; source 'run': the run's)."}
    )
    robustness_every_k_steps: int = field(default=0, metadata={"help": "Also run every k optimizer steps (0: off)."})
    robustness_on_evaluate: bool = field(default=True, metadata={"help": "Run whenever the trainer evaluates."})
    robustness_at_train_begin: bool = field(default=False, metadata={"help": "Measure the starting point (step 0)."})
    robustness_include_clean: bool = field(default=True, metadata={"help": "Also measure clean accuracy."})
    robustness_backend: str = field(default="auto", metadata={"help": "auto (TRL's colocated vLLM if any), hf, vllm."})
    robustness_batch_rows: int = field(default=64, metadata={"help": "Sample rows decoded together (HF backend)."})


@dataclass
class SFTScriptArguments(RecoveryScriptArguments):
    """SFT on recovery traces (`recovery.training_data.sft`)."""

    sft_sources: list[str] = field(
        default_factory=lambda: ["own"],
        metadata={"help": "Recoveries from: 'own' (the run's correct continuations) and/or 'teacher'."},
    )
    teacher: str | None = field(
        default=None,
        metadata={"help": "'toy' (the toy task generator) or a model path / hub id continuing the same prefixes."},
    )
    teacher_samples: int = field(default=4, metadata={"help": "Teacher continuations per prefix (shortest kept)."})
    toy_teacher_restart: bool = field(
        default=False,
        metadata={
            "help": "Toy teacher only: after a doubt, redo the chain from its start (needs only the "
            "question) instead of from the last correct step (needs a state read across the "
            "intervention)."
        },
    )
    toy_teacher_checks: bool = field(
        default=True,
        metadata={
            "help": "Toy teacher only: write the self-checking style of the shipped tiny reasoner (a check "
            "paragraph after every operation step, and first a check of the prefix's last step), in the "
            "recoveries and in the clean examples; false for a toy model trained without checks."
        },
    )
    clean_fraction: float = field(default=0.5, metadata={"help": "Fraction of clean traces mixed in."})
    require_doubt: bool = field(default=False, metadata={"help": "Keep only recoveries that express doubt."})
    max_overhead_pct: float | None = field(
        default=100.0, metadata={"help": "Drop recoveries longer than this length overhead (percent; null: no cap)."}
    )
    overhead_basis: str = field(default="whole", metadata={"help": "'whole' (paper) or 'remaining'."})


@dataclass
class GRPOScriptArguments(RecoveryScriptArguments):
    """GRPO on intervened prefixes (`recovery.training_data.grpo`) with `recovery.rewards`."""

    reward_funcs: list[str] = field(
        default_factory=lambda: ["correctness", "doubt", "length"],
        metadata={
            "help": "Rewards: names of recovery.rewards.REWARDS (correctness, doubt, length, recovery) or dotted "
            "import paths. Weight them with GRPOConfig.reward_weights."
        },
    )
    reward_options: dict[str, Any] | str | None = field(
        default=None,
        metadata={
            "help": "Options of each reward by its reward_funcs name: {name: {option: value}} (the reward class's "
            "keyword arguments; JSON on the command line). For the built-ins they go over the keys below."
        },
    )
    clean_fraction: float = field(default=0.0, metadata={"help": "Fraction of clean (un-intervened) prompts."})
    data_success_between: list[float] | None = field(
        default=None,
        metadata={
            "help": "Only chains whose share of correct continuations in the run lies in [low, high] (e.g. "
            "[0.125, 0.875]: groups that disagree, where GRPO's advantage is not zero). Measure the policy "
            "itself on the training problems for an on-policy choice. Default: every chain."
        },
    )
    data_timesteps: list[float] | None = field(
        default=None,
        metadata={
            "help": "Only intervened chains cut at these timesteps (e.g. a curriculum that leaves the earliest "
            "out). Default: every timestep."
        },
    )
    max_prompt_tokens: int | None = field(
        default=None,
        metadata={
            "help": "Longest prompt in the policy's tokens: longer ones are dropped (and counted) when the data "
            "is built; with vLLM it plus max_completion_length must fit vllm_max_model_length (null: what "
            "that leaves)."
        },
    )
    doubt_only_intervened: bool = field(default=True, metadata={"help": "Doubt reward: None on clean prompts."})
    doubt_pay_for: str = field(
        default="recovery",
        metadata={"help": "Doubt reward pays for: recovery (doubt and a correct answer) or expression (any doubt)."},
    )
    doubt_categories: list[str] | None = field(
        default=None, metadata={"help": "Doubt reward: only these intervention categories (e.g. neutral adversarial)."}
    )
    doubt_first_sentences: int = field(default=3, metadata={"help": "Doubt reward: sentences looked at."})
    length_max_overhead: float = field(default=1.0, metadata={"help": "Length reward reaches -1 at this overhead."})
    length_free_overhead: float = field(default=0.0, metadata={"help": "Length reward: overhead allowed for free."})
    length_unit: str = field(default="chars", metadata={"help": "Length reward unit: chars or tokens."})
    correctness_timeout_s: float = field(default=1.0, metadata={"help": "Correctness reward: per-item time limit."})
    recovery_weights: list[float] = field(
        default_factory=lambda: [1.0, 0.2, 0.3],
        metadata={"help": "Weights (correctness, doubt, length) of the combined 'recovery' reward."},
    )


def callback_config(args: RecoveryScriptArguments):
    """The `RobustnessCallbackConfig` described by the ``robustness_*`` keys: the flat recipe keys become the
    run config's sections the mini-benchmark takes (``interventions``, ``continuation``)."""
    from recovery.training.callback import RobustnessCallbackConfig  # lazy: loads transformers

    interventions = None
    names, timesteps = args.robustness_interventions, args.robustness_timesteps
    if args.robustness_source == "run" and bool(names) != bool(timesteps) and args.robustness_run_dir:
        # A run's chains filtered on one of the two: the other is every one the run holds.

        held = open_run(args.robustness_run_dir).config.interventions
        names, timesteps = names or list(held.names), timesteps or list(held.timesteps)
    if names or timesteps or (args.robustness_seed and args.robustness_source != "run"):
        interventions = InterventionsConfig(
            names=list(names or DEFAULT_TOY_INTERVENTIONS),
            timesteps=list(timesteps or DEFAULT_TIMESTEPS),
            seed=args.robustness_seed or 0,
        )
    return RobustnessCallbackConfig(
        source=args.robustness_source,
        run_dir=args.robustness_run_dir,
        models=args.data_models,
        n_problems=args.robustness_problems,
        interventions=interventions,
        continuation=_callback_sampling(args),
        include_clean=args.robustness_include_clean,
        spec=args.model_spec,
        max_batch_rows=args.robustness_batch_rows,
        every_k_steps=args.robustness_every_k_steps,
        on_evaluate=args.robustness_on_evaluate,
        at_train_begin=args.robustness_at_train_begin,
        backend=args.robustness_backend,
    )


def _callback_sampling(args: RecoveryScriptArguments) -> SamplingConfig | None:
    """The mini-benchmark's ``continuation`` from the ``robustness_*`` decoding keys: None when none is set
    and the chains are a run's (the run's own requests), else the defaults (`toy_sampling`, or the run's
    decoding for source 'run') with the keys set."""
    given = {
        "n": args.robustness_samples,
        "max_new_tokens": args.robustness_max_new_tokens,
        "temperature": args.robustness_temperature,
        "top_p": args.robustness_top_p,
        "seed": args.robustness_seed,
    }
    given = {key: value for key, value in given.items() if value is not None}
    from_run = args.robustness_source == "run" and args.robustness_run_dir
    if from_run and not given:
        return None
    base = open_run(args.robustness_run_dir).config.continuation if from_run else toy_sampling()
    return dataclasses.replace(base, **given)
