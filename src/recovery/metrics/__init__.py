"""Robustness and length-overhead metrics (paper §4.1, §4.3, App. F). Pure functions, no I/O.

Sample level → chain level → corpus level, kept apart as in lighteval/inspect: a chain's N graded
continuations give K correct; K gives the three robustness levels; chains are aggregated per
(model, domain, intervention, timestep) into mean ± population std with a confidence interval.

- `recovery.metrics.chain`: robustness levels and length change, on arrays and for one chain.
- `recovery.metrics.intervals`: Wilson and bootstrap intervals (`summarize`).
- `recovery.metrics.corpus`: a group's statistics (`summarize_chains`) and `aggregate`.
- `recovery.metrics.reference`: the authors' complete answer and length overhead (``protocol: reference``).
"""

from recovery.metrics.chain import (
    ChainOutcome,
    LengthChange,
    LengthFn,
    RobustnessLevels,
    UngradableChain,
    chain_outcome,
    char_length,
    continuation_reasoning,
    length_change,
    length_change_from_counts,
    length_change_pct,
    majority_threshold,
    reasoning_lengths,
    robustness,
    robustness_levels,
    token_length,
)
from recovery.metrics.corpus import DEFAULT_GROUP_BY, LEVELS, AggregateRow, aggregate, summarize_chains
from recovery.metrics.intervals import Summary, summarize, wilson_interval, z_score
from recovery.metrics.reference import (
    complete_answer,
    reference_length_change,
    reference_length_pct,
    separator_for,
)

__all__ = [
    "DEFAULT_GROUP_BY",
    "LEVELS",
    "AggregateRow",
    "ChainOutcome",
    "LengthChange",
    "LengthFn",
    "RobustnessLevels",
    "Summary",
    "UngradableChain",
    "aggregate",
    "chain_outcome",
    "char_length",
    "complete_answer",
    "continuation_reasoning",
    "length_change",
    "length_change_from_counts",
    "length_change_pct",
    "majority_threshold",
    "reasoning_lengths",
    "reference_length_change",
    "reference_length_pct",
    "robustness",
    "robustness_levels",
    "separator_for",
    "summarize",
    "summarize_chains",
    "token_length",
    "wilson_interval",
    "z_score",
]
