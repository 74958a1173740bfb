"""A run's plan: its protocol resolved once, part by part (`recovery.plan.run_plan`), and the one factory of the
generation requests it sends (`recovery.plan.requests`).

- `recovery.plan.styles`: the protocol styles as objects (`Style`), one module each (the project's,
  the authors'), each building every part; a new style is one module and one registration.
- `recovery.plan.run_plan`: `plan_for(config)` → `RunPlan`: the prompts, budget, interventions' rules,
  selection, length measure, judge inputs, doubt units and resolved grading of a run, each asked once of the
  style its part runs in.
- `recovery.plan.parts`, `recovery.plan.doubt`: the parts' types (selection, length, judge inputs, doubt
  units).
- `recovery.plan.requests`: the trace and continuation requests of a plan (messages, prefill, rendering,
  sampling, seed, window), for the stages, the mini-benchmark and the probes alike.

This package is the only one that asks which style a part runs in (the architecture test holds it).
"""

from recovery.plan.doubt import UnitRules
from recovery.plan.parts import JudgeInputs, LengthMeasure, SelectionPlan, TraceReading
from recovery.plan.requests import ContinuationRequests, continuation_request, sampling_params, trace_request
from recovery.plan.run_plan import RunPlan, plan_for, protocol_label, resolved_config
from recovery.plan.styles import Style, style_named, unit_rules

__all__ = [
    "ContinuationRequests",
    "JudgeInputs",
    "LengthMeasure",
    "RunPlan",
    "SelectionPlan",
    "Style",
    "TraceReading",
    "UnitRules",
    "continuation_request",
    "plan_for",
    "protocol_label",
    "resolved_config",
    "sampling_params",
    "style_named",
    "trace_request",
    "unit_rules",
]
