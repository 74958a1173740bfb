"""The paper's ablations as numbers and report sections (§5 Tables 7–9, App. A.2 Table 10).

Pure functions of aggregate rows (`recovery.run_dir.read_aggregates`) or chain outcomes
(`recovery.run_dir.chain_outcomes`); reading run directories and storing the sections is
`recovery.analysis.ablation_runs`' job.

- **Append "Wait"** (Tables 7–8): rows of a base run and a run with ``interventions.append_wait`` are
  matched by (model, domain, intervention, target_t); each match gives the percentage-point change of its
  majority robustness. Table 7 averages these changes over interventions per (model, t), Table 8 over
  models per (intervention, t), each cell the unweighted mean of the matched rows (as the paper averages
  "across interventions"/"across models"). Rows found in one run only are listed, never dropped silently.
- **Model swap** (Table 9): a swap run labels its groups ``"A→B"`` (`recovery.run_config.pair_label`); a cell
  (original A, continuing B) is the mean over interventions of the majority robustness at the chosen t.
- **Consecutive interventions** (Table 10): accuracy = correct continuations / graded continuations of the
  chains at the chosen t, one run per k.
"""

from __future__ import annotations

from recovery.analysis.ablations.pivots import (
    MAJORITY,
    T_DIGITS,
    Pivot,
    mean_pivot,
    pivot_table,
)
from recovery.analysis.ablations.repeats import (
    RepeatCell,
    RepeatsResult,
    repeat_cells,
    repeats_figure,
    repeats_pivot,
    repeats_section,
)
from recovery.analysis.ablations.swap import (
    SwapCell,
    SwapResult,
    swap_cells,
    swap_figure,
    swap_matrix,
    swap_section,
)
from recovery.analysis.ablations.wait import (
    Unmatched,
    WaitComparison,
    WaitDelta,
    match_wait,
    unmatched_table,
    wait_by_intervention,
    wait_by_model,
    wait_figure,
    wait_section,
)

__all__ = [
    "MAJORITY",
    "T_DIGITS",
    "Pivot",
    "mean_pivot",
    "pivot_table",
    "WaitDelta",
    "Unmatched",
    "WaitComparison",
    "match_wait",
    "wait_by_model",
    "wait_by_intervention",
    "wait_section",
    "unmatched_table",
    "wait_figure",
    "SwapCell",
    "SwapResult",
    "swap_cells",
    "swap_matrix",
    "swap_section",
    "swap_figure",
    "RepeatCell",
    "RepeatsResult",
    "repeat_cells",
    "repeats_pivot",
    "repeats_section",
    "repeats_figure",
]
