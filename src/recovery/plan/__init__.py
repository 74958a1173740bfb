"""A run's plan: its protocol resolved once, part by part (`recovery.plan.run_plan`), and the one factory of the
generation requests it sends (`recovery.plan.requests`).

- `recovery.plan.run_plan`: `plan_for(config)` → `RunPlan`: the prompts, budget, interventions' rules,
  selection, length measure, judge inputs, doubt units and resolved grading of a run.
- `recovery.plan.parts`, `recovery.plan.doubt`: the parts that are values (selection, length, judge inputs,
  doubt units).
- `recovery.plan.requests`: the trace and continuation requests of a plan (messages, prefill, prompt style,
  sampling, seed, window), for the stages, the Ray executor, the mini-benchmark and the probes alike.

This package is the only one that asks which protocol a part runs in (the architecture test holds it).
"""

from recovery.plan.doubt import DEFAULT_JUDGE_TOKENS, UnitRules, unit_rules
from recovery.plan.parts import JudgeInputs, LengthMeasure, SelectionPlan
from recovery.plan.requests import ContinuationRequests, continuation_request, sampling_params, trace_request
from recovery.plan.run_plan import RunPlan, authors_grading, plan_for, protocol_label, resolved_config

__all__ = [
    "DEFAULT_JUDGE_TOKENS",
    "ContinuationRequests",
    "JudgeInputs",
    "LengthMeasure",
    "RunPlan",
    "SelectionPlan",
    "UnitRules",
    "authors_grading",
    "continuation_request",
    "plan_for",
    "protocol_label",
    "resolved_config",
    "sampling_params",
    "trace_request",
    "unit_rules",
]
