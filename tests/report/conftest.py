"""Small hand-made report inputs whose table cells can be checked by hand."""

from __future__ import annotations

import math

import pytest

from recovery.report import ReportData

NAN = math.nan


def _make_row(
    model, domain, intervention, t, n=10, maj=(0.5, 0.5, 0.2, 0.8), alo=None, all_=None, whole=(NAN, NAN), **extra
):
    """One `AggregateRow.flat()`-shaped dict; ``alo``/``all_`` default to the majority numbers."""
    row = {"model": model, "domain": domain, "intervention": intervention, "target_t": t, "n_chains": n}
    for name, stats in (("at_least_once", alo or maj), ("majority", maj), ("all", all_ or maj)):
        row.update(dict(zip((f"{name}_mean", f"{name}_std", f"{name}_ci_low", f"{name}_ci_high"), stats)))
    row.update(
        {"whole_pct_mean": whole[0], "whole_pct_std": whole[1], "whole_pct_ci_low": NAN, "whole_pct_ci_high": NAN}
    )
    row.update(
        {"remaining_pct_mean": NAN, "remaining_pct_std": NAN, "remaining_pct_ci_low": NAN, "remaining_pct_ci_high": NAN}
    )
    row.update(extra)
    return row


def _small_rows():
    """Two models on math; m2 lacks wikipedia_text at t=0.5 (a missing cell)."""
    return [
        _make_row("m1", "math", "wrong_continuation", 0.1, 10, (0.5, 0.5, 0.2, 0.8), whole=(10.0, 2.0)),
        _make_row("m1", "math", "wrong_continuation", 0.5, 30, (0.9, 0.3, 0.8, 1.0), whole=(20.0, 4.0)),
        _make_row(
            "m1",
            "math",
            "wikipedia_text",
            0.1,
            20,
            (0.932, 0.2512, 0.9, 0.96),
            (1.0, 0.0, 1.0, 1.0),
            (0.75, 0.433, 0.55, 0.9),
            whole=(12.5, 3.0),
        ),
        _make_row("m1", "math", "wikipedia_text", 0.5, 20, (1.0, 0.0, 1.0, 1.0), whole=(-5.0, 1.0)),
        _make_row("m1", "math", "complete_step", 0.1, 10, (1.0, 0.0, 1.0, 1.0), whole=(1.0, 0.5)),
        _make_row("m1", "math", "complete_step", 0.5, 10, (1.0, 0.0, 1.0, 1.0), whole=(3.0, 0.5)),
        _make_row("m2", "math", "wrong_continuation", 0.1, 10, (0.3, 0.458, 0.1, 0.6), whole=(30.0, 5.0)),
        _make_row("m2", "math", "wrong_continuation", 0.5, 10, (0.6, 0.49, 0.3, 0.9), whole=(NAN, NAN)),
        _make_row("m2", "math", "wikipedia_text", 0.1, 10, (0.8, 0.4, 0.5, 1.0), whole=(40.0, 8.0)),
        _make_row("m2", "math", "complete_step", 0.1, 10, (1.0, 0.0, 1.0, 1.0), whole=(2.0, 1.0)),
        _make_row("m2", "math", "complete_step", 0.5, 10, (NAN, NAN, NAN, NAN), whole=(NAN, NAN)),
    ]


@pytest.fixture
def small_data() -> ReportData:
    return ReportData.from_dicts(
        _small_rows(),
        clean=[
            {"model": "m1", "domain": "math", "n": 100, "accuracy": 0.95},
            {"model": "m2", "domain": "math", "n": 50, "accuracy": 0.9},
        ],
        skips=[
            {"stage": "filter", "reason": "no_close_tag", "count": 3},
            {"stage": "continuations", "reason": "empty|generation", "count": 2},
        ],
        meta={
            "config": {"name": "tiny", "decoding": {"temperature": 0.6}},
            "models": ["m2", "m1"],
            "dataset": "bbh",
            "n": 20,
            "timesteps": [0.1, 0.5],
            "seed": 0,
            "created_by": "recovery 0.1.0",
        },
    )


@pytest.fixture(scope="session")
def make_row():
    """The row builder, as a fixture so test modules need not import conftest."""
    return _make_row


@pytest.fixture(scope="session")
def small_rows():
    """The rows behind ``small_data`` (session scope: tests only read them)."""
    return _small_rows()
