"""Training data from a benchmark run: GRPO prompts, SFT recovery traces, and their export with cards.

* `build_grpo_dataset` / `grpo_rows` — intervened prefixes rendered (raw text, the policy's own chat
  template) so the policy continues its own trace, with the columns the rewards need.
* `build_sft_dataset` / `sft_rows` — prompt/completion recovery traces from the model's own correct
  continuations (rejection sampling) and/or a `Teacher`, filtered (`QualityConfig`), mixed with clean
  traces, deduplicated and decontaminated (`EvalSet`); every drop counted (`Drops`).
* `export_run` — every dataset of a run as Parquet + ``save_to_disk`` + a dataset card from
  ``recovery/data_cards/``; `push_folder` / `push_export` push only when asked and never lose local files.

`datasets` is imported only when a `Dataset` is built.
"""

from recovery.training_data.clean import FROM_START, CleanCut, clean_count, clean_cut
from recovery.training_data.decontam import EvalSet, normalise_question
from recovery.training_data.drops import Drops
from recovery.training_data.export import KINDS, ExportConfig, ExportedDataset, ExportResult, export_run, push_export
from recovery.training_data.grpo import GRPO_COLUMNS, BuiltRows, GRPOPromptConfig, build_grpo_dataset, grpo_rows
from recovery.training_data.hub import PushResult, hub_offline, push_command, push_folder
from recovery.training_data.quality import Assessment, Candidate, QualityConfig, assess, final_answer_problem, select
from recovery.training_data.render import (
    PromptRenderer,
    renderers_for_run,
    run_prompts,
    tokenizer_adds_bos,
)
from recovery.training_data.sft import SFT_COLUMNS, SFTConfig, SFTResult, build_sft_dataset, sft_rows
from recovery.training_data.source import GradedContinuation, RunData, load_run
from recovery.training_data.teachers import GeneratorTeacher, Teacher, ToyTeacher

__all__ = [
    "FROM_START",
    "GRPO_COLUMNS",
    "KINDS",
    "SFT_COLUMNS",
    "Assessment",
    "BuiltRows",
    "Candidate",
    "CleanCut",
    "Drops",
    "EvalSet",
    "ExportConfig",
    "ExportResult",
    "ExportedDataset",
    "GRPOPromptConfig",
    "GeneratorTeacher",
    "GradedContinuation",
    "PromptRenderer",
    "PushResult",
    "QualityConfig",
    "RunData",
    "SFTConfig",
    "SFTResult",
    "Teacher",
    "ToyTeacher",
    "assess",
    "build_grpo_dataset",
    "build_sft_dataset",
    "clean_count",
    "clean_cut",
    "export_run",
    "final_answer_problem",
    "grpo_rows",
    "hub_offline",
    "load_run",
    "normalise_question",
    "push_command",
    "push_export",
    "push_folder",
    "renderers_for_run",
    "run_prompts",
    "select",
    "sft_rows",
    "tokenizer_adds_bos",
]
