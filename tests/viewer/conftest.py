"""Two small real toy runs for the viewer's tests, built once per session (`toy_runs`): the same problems, traces
and chains, continued twice per chain. In ``before`` one continuation of each chain is graded wrong (every chain
"mixed"); in ``after`` both are right (every chain "recovered"), so every pair improved."""

from __future__ import annotations

import pytest

from toy_runs import ToyRunSpec

INTERVENTIONS = ("toy/wrong_continuation", "toy/complete_step", "toy/hallucinated_fact")
BEFORE = ToyRunSpec(INTERVENTIONS, variants=("wrong_answer", "teacher"), aggregate=True)
AFTER = ToyRunSpec(INTERVENTIONS, variants=("teacher", "teacher"), aggregate=True)


@pytest.fixture(scope="session")
def before_run(toy_run_for):
    return toy_run_for(BEFORE)


@pytest.fixture(scope="session")
def after_run(toy_run_for):
    return toy_run_for(AFTER)
