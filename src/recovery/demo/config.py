"""What the demo measures and trains: the toy interventions, the disjoint problem seeds of evaluation and
training data, the sizes of the full and quick variants, and the benchmark config of one toy run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from recovery.model_config import ModelConfig
from recovery.parallel import available_cpus
from recovery.run_config import DatasetConfig, InterventionsConfig, RunConfig, SamplingConfig, TracesConfig

TOY_INTERVENTIONS = (
    "toy/complete_step",
    "toy/paraphrase",
    "toy/random_characters",
    "toy/wikipedia_text",
    "toy/wrong_continuation",
    "toy/hallucinated_fact",
    "toy/unrelated_cot",
)
# The tiny reasoner's traces are ~100 tokens; 320 new tokens leave room for a long recovery.
TOY_MAX_NEW_TOKENS = 320
# Toy item idx of seed s is Random(s + idx); the tiny reasoner trained on seeds 0..25,599 and holds out
# 1000 items of seed 1,000,000 (recovery.toy.dataset.HELDOUT_SEED). Evaluation takes held-out items 0..,
# the own-continuation training run held-out items 500.., and the teacher run fresh problems from seed
# 2,000,000 on (as many as it likes): the three sets are disjoint, so the demo never trains on what it
# measures.
EVAL_SEED = 1_000_000
TRAIN_SEED = EVAL_SEED + 500
TEACHER_SEED = 2_000_000
MAX_OWN_PROBLEMS = 500


@dataclass(frozen=True)
class GRPOSize:
    """The demo's GRPO stage (`recovery.demo.training.grpo_recipe`).

    GRPO learns only from prompt groups whose completions disagree: a group that always fails or always
    succeeds has zero advantage. So the prompts are chosen on-policy: the model GRPO starts from is first
    measured on the training problems (``choice_problems`` × ``choice_samples`` continuations per chain, the
    benchmark's own per-chain robustness), and only chains whose share of correct continuations lies in
    ``success_between`` become prompts, with ``clean_fraction`` of clean prefixes beside them. The robustness
    callback measures the policy every ``robustness_every`` steps (and at step 0) on its own toy problems."""

    steps: int
    prompts_per_step: int
    generations: int = 8
    # Measured on the full demo (README, "GRPO on the demo"): at 3e-5, or with a quarter of clean prompts, the
    # policy learnt to restart after its first line everywhere, its own traces then held a restart and later
    # wrong steps were recovered less; 2e-5 with half clean prompts kept the traces as they were.
    learning_rate: float = 2.0e-5
    beta: float = 0.04  # KL weight to the starting model
    temperature: float = 0.8  # above the evaluation's 0.6: groups the SFT model always fails then disagree
    clean_fraction: float = 0.5
    success_between: tuple[float, float] = (0.0, 0.875)
    # Intervened prompts only at these timesteps (None: the demo's own); clean prompts keep every timestep.
    prompt_timesteps: tuple[float, ...] | None = None
    choice_problems: int = 24
    choice_samples: int = 8
    robustness_every: int = 20
    robustness_problems: int = 8
    robustness_samples: int = 2
    # correctness, doubt, length weights of the combined reward (`recovery.rewards.RecoveryReward`)
    reward_weights: tuple[float, float, float] = (1.0, 0.2, 0.3)

    def __post_init__(self) -> None:
        if self.robustness_every and self.steps % self.robustness_every:
            raise ValueError(
                f"GRPO steps ({self.steps}) must be a multiple of robustness_every ({self.robustness_every}), "
                "so the robustness curve ends at the last step"
            )

    @property
    def batch_size(self) -> int:
        """Completions per step (TRL's ``per_device_train_batch_size`` on one process)."""
        return self.prompts_per_step * self.generations


@dataclass(frozen=True)
class DemoSize:
    """How much the demo measures and trains.

    Generation dominates the time on a CPU, so the model's own continuations (rejection sampling) come from
    a small run, while the toy teacher — which writes recoveries without generating — works on the chains
    of a larger chains-only run (its traces are also the clean examples mixed in).
    """

    eval_problems: int
    own_problems: int
    teacher_problems: int
    timesteps: tuple[float, ...]
    samples: int
    own_samples: int
    sft_steps: int
    grpo: GRPOSize = GRPOSize(
        steps=2, prompts_per_step=2, generations=2, robustness_every=0
    )  # with --grpo / --grpo-only
    # The tiny reasoner already writes the self-checking style, so SFT only teaches the reaction to a check
    # that disagrees and the way back after inserted text: a short run at a high rate, half of its examples
    # clean traces, which keep clean accuracy close to the base model's.
    sft_learning_rate: float = 1.0e-3
    sft_clean_fraction: float = 0.5
    # Clean accuracy on this many problems (original traces only, which are quick to generate): the robustness
    # run's problems are too few to tell a small change.
    clean_problems: int = 0
    # Generation processes per measurement (the tiny model's data-parallel replicas); None: one per CPU. A
    # performance setting only: replicas give the samples one process gives.
    replicas: int | None = None

    @classmethod
    def of(cls, quick: bool) -> DemoSize:
        if quick:
            return cls(
                eval_problems=12,
                own_problems=12,
                teacher_problems=400,
                timesteps=(0.3, 0.5, 0.7),
                samples=4,
                own_samples=2,
                sft_steps=120,
                grpo=GRPOSize(steps=20, prompts_per_step=4, choice_problems=12, choice_samples=4, robustness_every=10),
                clean_problems=100,
            )
        # Sized for a run of minutes on a 2-core CPU (the README gives the measured time).
        return cls(
            eval_problems=16,
            own_problems=16,
            teacher_problems=600,
            timesteps=(0.1, 0.3, 0.5, 0.7, 0.9),
            samples=8,
            own_samples=2,
            sft_steps=300,
            grpo=GRPOSize(steps=60, prompts_per_step=8),
            clean_problems=200,
        )


def replicas(size: DemoSize | None = None) -> int:
    """Tiny-model replicas for generation: ``size.replicas`` when set, else one per CPU (up to 4); each
    decodes on one thread."""
    if size is not None and size.replicas is not None:
        return size.replicas
    return max(1, min(available_cpus(), 4))


def demo_config(
    out: str | Path,
    *,
    quick: bool = False,
    seed: int = 0,
    model: ModelConfig | None = None,
    problems_seed: int = EVAL_SEED,
    limit: int | None = None,
    samples: int | None = None,
    size: DemoSize | None = None,
) -> RunConfig:
    """A toy benchmark run: the paper's protocol (Table 15 decoding, five timesteps) at toy scale."""
    size = size or DemoSize.of(quick)
    return RunConfig(
        run_dir=str(out),
        title="recovery demo: tiny reasoner on the toy world",
        dataset=DatasetConfig(name="toy", limit=limit or size.eval_problems, options={"seed": problems_seed + seed}),
        models=[
            model
            or ModelConfig(name="tiny-reasoner", settings={"batch_size": 16, "data_parallel_size": replicas(size)})
        ],
        traces=TracesConfig(
            sampling=SamplingConfig(n=1, temperature=0.6, top_p=0.95, max_new_tokens=TOY_MAX_NEW_TOKENS, seed=seed)
        ),
        interventions=InterventionsConfig(names=list(TOY_INTERVENTIONS), timesteps=list(size.timesteps), seed=seed),
        continuation=SamplingConfig(
            n=samples or size.samples, temperature=0.6, top_p=0.95, max_new_tokens=TOY_MAX_NEW_TOKENS, seed=seed
        ),
    )
