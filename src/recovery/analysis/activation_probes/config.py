"""What a probe run does (`ProbeConfig`, defaults from the paper's App. C) and where its results go."""

from __future__ import annotations

from dataclasses import dataclass

ANALYSIS_NAME = "probes"
SECTION_TITLE = "Activation probes"


@dataclass
class ProbeConfig:
    """What `run_probes` does. Defaults follow the paper (App. C): 600 + 600 per intervention, 80/20."""

    model: str | None = None  # the run's model to probe; default: the only model with chains
    interventions: list[str] | None = None  # default: every intervention in the chains table
    n_clean: int = 600
    n_per_intervention: int = 600
    test_fraction: float = 0.2
    seed: int = 0
    batch_size: int = 8
    max_prompt_tokens: int | None = None  # default: the model's context length
    C: float = 1.0  # inverse L2 strength of the logistic regression (sklearn's default)
    max_iter: int = 2000
    save_activations: bool = False  # also write activations.npy (float16, layers × examples × width)
    progress: bool = True

    def __post_init__(self) -> None:
        if self.n_clean < 1 or self.n_per_intervention < 1:
            raise ValueError("n_clean and n_per_intervention must be ≥ 1")
        if not 0 < self.test_fraction < 1:
            raise ValueError(f"test_fraction must lie in (0, 1), got {self.test_fraction}")
        if self.batch_size < 1:
            raise ValueError("batch_size must be ≥ 1")
        if self.max_prompt_tokens is not None and self.max_prompt_tokens < 2:
            raise ValueError("max_prompt_tokens must be ≥ 2")
