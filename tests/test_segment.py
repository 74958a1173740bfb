import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recovery.segment import (
    DEFAULT_TIMESTEPS,
    THOUGHT,
    SegmentationError,
    TooFewSteps,
    authors_closed,
    cut_at,
    cuts_for,
    join_steps,
    parse_trace,
    split_reasoning,
    split_steps,
    timestep_grid,
)


def test_split_reasoning_with_tags():
    s = split_reasoning("<think>\nA\n\nB\n</think>\n\\boxed{3}")
    assert (s.reasoning, s.answer_text, s.closed) == ("\nA\n\nB\n", "\n\\boxed{3}", True)
    assert (s.reasoning_start, s.reasoning_end) == (7, 13)


def test_split_reasoning_template_opened_tag():
    # DeepSeek-R1-Distill templates emit <think> themselves; the response starts inside the reasoning.
    s = split_reasoning("A\n\nB</think>answer")
    assert (s.reasoning, s.answer_text, s.closed) == ("A\n\nB", "answer", True)


def test_split_reasoning_thought_tags():
    s = split_reasoning("<thought>x</thought>y", tags=THOUGHT)
    assert (s.reasoning, s.think_close) == ("x", "</thought>")


# Issue 35: a model's own tags decide where its reasoning ends; another family's tags are text, inside the
# reasoning or after the close, with the opener written or opened by the template.
R1_MENTIONS_THOUGHT = "The tag <thought> is mentioned literally.\n\nSo 5.\n</think>\n\\boxed{5}"


@pytest.mark.parametrize("opener", ["", "<think>"])
def test_another_familys_opening_tag_inside_r1_reasoning_is_text(opener):
    s = split_reasoning(opener + R1_MENTIONS_THOUGHT)
    assert s.closed and s.reasoning == "The tag <thought> is mentioned literally.\n\nSo 5.\n"
    assert s.answer_text == "\n\\boxed{5}"


@pytest.mark.parametrize("opener", ["", "<think>"])
def test_an_opening_tag_after_the_close_is_answer_text(opener):
    s = split_reasoning(opener + "So 5.</think>The <think> tag again, and <thought>. \\boxed{5}")
    assert s.closed and s.reasoning == "So 5." and s.answer_text == "The <think> tag again, and <thought>. \\boxed{5}"


@pytest.mark.parametrize("opener", ["", "<thought>"])
def test_exaone_reasoning_ends_at_its_own_tag_only(opener):
    text = opener + "About </think> and <think>.\n\nSo 5.</thought>\\boxed{5}"
    s = split_reasoning(text, tags=THOUGHT)
    assert s.closed and s.reasoning == "About </think> and <think>.\n\nSo 5." and s.answer_text == "\\boxed{5}"
    # Read with R1's tags the same text closes at the literal </think>: the model's tags must be the ones used.
    assert split_reasoning(text).reasoning != s.reasoning


def test_a_foreign_tag_alone_does_not_close():
    s = split_reasoning("<think>I will write </thought> now, still thinking")
    assert not s.closed
    with pytest.raises(SegmentationError, match="no think tag"):
        split_reasoning("Only <thought>x</thought> here")


def test_the_authors_closure_is_the_think_tag_anywhere():
    assert authors_closed("<thought>x</thought>y") is False  # EXAONE's own close is not theirs
    assert authors_closed("x <thought> y</think>5") and authors_closed("plain </think>")


def test_missing_close_is_reported_not_raised():
    s = split_reasoning("<think>never closes")
    assert not s.closed and s.reasoning == "never closes" and s.answer_text == ""


@pytest.mark.parametrize("bad", [None, b"<think>x</think>", 3])
def test_non_text_raises_clear_error(bad):
    with pytest.raises(SegmentationError, match="must be str"):
        split_reasoning(bad, record="row 7")


def test_no_tags_at_all():
    with pytest.raises(SegmentationError, match="row 9: no think tag"):
        split_reasoning("plain text", record="row 9")


def test_unbalanced_tags_take_first_open_and_next_close():
    s = split_reasoning("<think>a</think>b</think>c")
    assert s.reasoning == "a" and s.answer_text == "b</think>c"


def test_split_steps_hand_computed():
    steps = split_steps("aa\n\nbb\n\ncccc")
    assert [s.text for s in steps] == ["aa", "bb", "cccc"]
    assert [s.t for s in steps] == [0.25, 0.5, 1.0]
    assert [(s.start, s.end) for s in steps] == [(0, 2), (4, 6), (8, 12)]


def test_cut_hand_computed():
    steps = split_steps("aa\n\nbb\n\ncc\n\ndd")  # t = .25 .5 .75 1
    assert cut_at(steps, 0.5).index == 1
    assert cut_at(steps, 0.7).index == 2
    assert cut_at(steps, 0.9).index == 3
    assert cut_at(steps, 0.1).index == 1  # min_steps=2 moves it forward from 0
    assert cut_at(steps, 0.1, min_steps=1).index == 0
    # Exact tie between 0.25 and 0.5 → first (smaller index), then min_steps.
    assert cut_at(steps, 0.375, min_steps=1).index == 0
    c = cut_at(steps, 0.7)
    assert (c.target_t, c.actual_t) == (0.7, 0.75)


def test_too_few_steps():
    with pytest.raises(TooFewSteps):
        cut_at(split_steps("only one step"), 0.5)


def test_bad_timestep():
    with pytest.raises(ValueError):
        cut_at(split_steps("a\n\nb"), 1.5)


def test_timestep_grid():
    assert timestep_grid() == DEFAULT_TIMESTEPS
    assert timestep_grid(0.1, 0.9, 0.1) == (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def test_large_trace_is_fast():
    text = ("step " * 40 + "\n\n") * 200_000  # ~40 MB
    steps = split_steps(text)
    assert join_steps(steps) == text


# ---------------------------------------------------------------------------------------- properties

_texts = st.text(alphabet=st.sampled_from(list("ab \n\t.é")), max_size=200)


@given(_texts)
@settings(max_examples=300, deadline=None)
def test_round_trip_is_byte_exact(text):
    steps = split_steps(text)
    assert join_steps(steps) == text
    for s in steps:
        assert text[s.start : s.end] == s.text
    assert steps[-1].t == 1.0


@given(st.lists(st.text(alphabet="xyz ", min_size=1, max_size=30), min_size=1, max_size=40), st.floats(0, 1))
@settings(max_examples=300, deadline=None)
def test_cut_selection_properties(pieces, t):
    steps = split_steps("\n\n".join(pieces))
    if len(steps) < 2:
        with pytest.raises(TooFewSteps):
            cut_at(steps, t)
        return
    cut = cut_at(steps, t)
    assert cut.index >= 1
    best = min(abs(s.t - t) for s in steps)
    if cut.index > 1:  # not moved by min_steps: it must be a nearest step, and the first of them
        assert abs(steps[cut.index].t - t) == best
        assert all(abs(s.t - t) > best for s in steps[: cut.index])
    assert cut.actual_t == steps[cut.index].t


@given(st.lists(st.text(alphabet="xy", min_size=1, max_size=20), min_size=3, max_size=30))
@settings(max_examples=100, deadline=None)
def test_cuts_are_monotone_in_t(pieces):
    steps = split_steps("\n\n".join(pieces))
    indices = [c.index for c in cuts_for(steps, timestep_grid(0.1, 0.9, 0.1))]
    assert indices == sorted(indices)


# ---------------------------------------------------------------------------------------- real data


def test_all_real_traces_round_trip(shared_data, capsys):
    path = shared_data / "real_traces" / "thought_anchors_math_cots.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 153
    unclosed = 0
    for row in rows:
        trace = parse_trace(row["problem_id"], "deepseek-r1-distill", row["solution"])
        steps = split_steps(trace.reasoning)
        assert join_steps(steps) == trace.reasoning
        assert (
            trace.text[: len(trace.text) - len(trace.answer_text)].endswith(trace.reasoning + trace.think_close)
            or not trace.closed
        )
        if not trace.closed:
            unclosed += 1
            continue
        for cut in cuts_for(steps):
            assert 1 <= cut.index < len(steps)
    # Hand-counted from the data's own has_think_close flags.
    assert unclosed == sum(not r["has_think_close"] for r in rows) == 9
    with capsys.disabled():
        print(f"\nreal traces: {len(rows)} segmented, {unclosed} lack a closing tag and are skipped")
