"""Linear probes on residual-stream activations: does a model's hidden state tell an intervened prefix
from its own, untouched reasoning? (paper App. C, Fig. 12)

Protocol (paper App. C): a dataset of prefixes that end at a random step boundary of a non-intervened
trace (label 0, group ``"none"``) and of intervened prefixes (label 1), 600 + 600 per intervention; a
blank line (``"\\n\\n"``) is appended after the final step so the activations are read "just before the
start of a new thought". Each prefix is pre-filled after the model's chat prompt (template + think opener,
`recovery.prompt_building.build_prompt_ids`); the **pre-attention residual stream of the final token** is recorded
at every decoder layer with forward pre-hooks (the input of layer ``l`` is the residual ``h^(l)``; layer 0
sees the token embeddings). One logistic-regression probe per (layer, intervention) is trained on a
seeded, stratified 80/20 split (paper: 960 train, 240 test) and its test accuracy reported.

Choices the paper leaves open, made here and stated in the report section:

- clean prefixes are drawn trace by trace (round robin over the shuffled traces, a random unused cut
  each), so long traces do not dominate; a cut keeps at least ``interventions.min_steps`` steps and never
  the whole reasoning (the intervened prefixes stop before the end too), unless the trace has no other;
- when an intervention has fewer chains than asked, the probe uses as many clean prefixes as intervened
  ones, so chance stays 0.5 (the table shows the test set's majority share as ``chance``);
- features are standardised before the (L2, C=1) logistic regression: residual streams of real models
  have a few dimensions with huge norms that would otherwise dominate the optimisation;
- prompts longer than ``max_prompt_tokens`` (default: the model's context) are truncated **from the
  left**, keeping the end of the prefix that the final token sees; the number truncated is reported.

Raw results go to ``RUN_DIR/analysis/probes/<model>/`` (``examples.parquet``, ``accuracies.parquet``,
``activation_summary.parquet``, ``probes.json``, optionally ``activations.npy``); the report section
"Activation probes" is rebuilt from every model probed so far (`probes_section`).

Modules, one job each: `dataset` (prefixes and their prompts), `activations` (loading the model, recording
residuals with hooks), `training` (splits, probes, activation statistics), `run` (`run_probes`), `report`
(the section and figure), `config` (`ProbeConfig`). Everything public is re-exported here.
"""

from recovery.analysis.activation_probes.activations import find_decoder_layers, load_probe_model, record_residuals
from recovery.analysis.activation_probes.config import ANALYSIS_NAME, SECTION_TITLE, ProbeConfig
from recovery.analysis.activation_probes.dataset import (
    CLEAN,
    THOUGHT_BREAK,
    ProbeExample,
    build_probe_dataset,
    probe_prompts,
)
from recovery.analysis.activation_probes.report import probe_figure, probes_section
from recovery.analysis.activation_probes.run import ProbeResult, run_probes
from recovery.analysis.activation_probes.training import (
    ProbeScore,
    activation_summary,
    probe_accuracies,
    split_indices,
    train_probe,
)

__all__ = [
    "ANALYSIS_NAME",
    "CLEAN",
    "ProbeConfig",
    "ProbeExample",
    "ProbeResult",
    "ProbeScore",
    "SECTION_TITLE",
    "THOUGHT_BREAK",
    "activation_summary",
    "build_probe_dataset",
    "find_decoder_layers",
    "load_probe_model",
    "probe_accuracies",
    "probe_figure",
    "probe_prompts",
    "probes_section",
    "record_residuals",
    "run_probes",
    "split_indices",
    "train_probe",
]
