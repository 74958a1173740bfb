"""Segmentation and cuts under ``protocol: reference`` against the authors' code (issue 29, deliverable 3).

``data/segmentation.json`` holds what rllm_robustness/segmentation.py (``extract_reasoning``,
``segment_trace``, ``normalized_trace_timesteps``, ``trace_prefix_at_timestep``, ``restore_trace_from_segments``)
returned for the rows of `intervention_rows.batch_rows` (written by ``make_interventions.py``).
"""

from __future__ import annotations

import pytest

from recovery.interventions.reference_text import reasoning_of, reference_cut, restored_steps
from recovery.segment import TooFewSteps, join_steps, parse_trace, split_steps
from reference.inputs import TIMESTEPS, load
from reference.intervention_rows import EXTRA_TIMESTEPS, batch_rows

DATA = load("segmentation")["rows"]
ROWS = {row["id"]: row for row in batch_rows()}


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_reasoning_steps_and_timesteps_equal_the_authors(row_id):
    theirs = DATA[row_id]
    reasoning = reasoning_of(ROWS[row_id]["answer_content"])
    assert reasoning == theirs["reasoning"]
    steps = split_steps(reasoning)
    assert [s.text for s in steps] == theirs["segments"]
    assert [s.t for s in steps] == theirs["timesteps"]
    # Restored without an edit, every step comes back padded with its own whitespace as spaces.
    padded = [
        " " * m["leading_spaces"] + seg.strip() + " " * m["trailing_spaces"]
        for seg, m in zip(theirs["segments"], theirs["metadata"], strict=True)
    ]
    assert list(restored_steps(theirs["segments"], theirs["segments"])) == padded


@pytest.mark.parametrize("row_id", sorted(ROWS))
@pytest.mark.parametrize("t", TIMESTEPS + EXTRA_TIMESTEPS)
def test_cut_equals_the_authors(row_id, t):
    theirs = DATA[row_id]["cuts"][str(t)]
    steps = split_steps(reasoning_of(ROWS[row_id]["answer_content"]))
    if theirs["prefix_len"] < 2:  # prepare_inputs_for_batch drops the item
        with pytest.raises(TooFewSteps):
            reference_cut(steps, t, min_steps=2)
        return
    cut = reference_cut(steps, t, min_steps=2)
    assert (cut.index, cut.actual_t) == (theirs["cutoff_index"], theirs["actual_timestep"])


def test_the_default_reasoning_differs_on_a_stray_opening_tag():
    """The project reads the reasoning from the first opening tag; the authors from after the last one."""
    row = ROWS["edge_stray_tag"]
    default = parse_trace(row["id"], row["model_name"], row["answer_content"]).reasoning
    assert default != DATA["edge_stray_tag"]["reasoning"] == reasoning_of(row["answer_content"])


def test_reference_cut_on_blank_reasoning_puts_every_step_at_zero():
    """The authors' timesteps are all 0 when no step has a character (cut_at spreads them evenly)."""
    steps = split_steps("\n\n\n\n")
    assert [s.text for s in steps] == ["", "", ""]
    cut = reference_cut(steps, 0.9, min_steps=2)
    assert (cut.index, cut.actual_t) == (1, 0.0)
    assert join_steps(restored_steps(["a", "b", "c", "fact"], ["a", "b", "c"])) == "a\n\nb\n\nc\nfact"
