"""Segmentation of reasoning traces (paper §3.2).

Reasoning is the text between the think tags; steps are the pieces between blank lines (``"\\n\\n"``),
kept verbatim so ``"\\n\\n".join(step.text for step in steps)`` re-creates the reasoning byte for byte.
The timestep of step *i* is the cumulative character length of steps ``0..i`` over the total; the cut for
a target *t* is the step whose timestep is nearest, but the prefix always keeps ``min_steps`` steps.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from recovery.types import Cut, Step, Trace

STEP_SEPARATOR = "\n\n"
DEFAULT_TIMESTEPS: tuple[float, ...] = (0.1, 0.3, 0.5, 0.7, 0.9)
DEFAULT_MIN_STEPS = 2
# A model's think tags, (opener, closer): most reasoning models write <think>; EXAONE-Deep writes <thought>.
ThinkTags = tuple[str, str]
THINK: ThinkTags = ("<think>", "</think>")
THOUGHT: ThinkTags = ("<thought>", "</thought>")
# The one closing tag the authors' code looks for, in any model's text (`authors_closed`).
AUTHORS_CLOSE = THINK[1]
# The families the model conventions know (`recovery.models`); a response is read with its own model's pair only.
THINK_TAGS: tuple[ThinkTags, ...] = (THINK, THOUGHT)


class SegmentationError(ValueError):
    """A trace cannot be segmented; the message names the record and the problem."""


class TooFewSteps(SegmentationError):
    """The reasoning has fewer steps than the prefix must keep; such traces are skipped and counted."""


@dataclass(frozen=True, slots=True)
class ReasoningSplit:
    """Where the reasoning sits inside a response.

    ``response[reasoning_start:reasoning_end] == reasoning``. ``closed`` is False when no closing tag was
    found (then ``reasoning`` runs to the end and ``answer_text`` is empty).
    """

    reasoning: str
    answer_text: str
    closed: bool
    think_open: str
    think_close: str
    reasoning_start: int
    reasoning_end: int


#: What a `Trace` keeps of its response's `ReasoningSplit` (the positions are not kept).
TRACE_PARTS = ("reasoning", "answer_text", "closed", "think_open", "think_close")


def split_reasoning(response: str, *, tags: ThinkTags = THINK, record: str = "<response>") -> ReasoningSplit:
    """Locate the reasoning in a model response by the model's own think tags ``tags`` (its spec's opener and
    closer, `recovery.models.ModelSpec.think_tags`); tags of another family are text, wherever they stand.

    The opening tag may be absent when the chat template already opened it (DeepSeek-R1-Distill, QwQ): then
    reasoning starts at the beginning of the response and ends at the first closing tag, and an opening tag
    after that closing tag is answer text. A missing closing tag is reported through ``closed=False``, not
    raised. Raises `SegmentationError` when the input is not text or holds neither of the model's tags.

    >>> s = split_reasoning("<think>\\nA\\n\\nB\\n</think>\\nThe answer is 3.")
    >>> (s.reasoning, s.answer_text, s.closed)
    ('\\nA\\n\\nB\\n', '\\nThe answer is 3.', True)
    >>> split_reasoning("About <thought> tags.</think>5").reasoning     # another family's tag is text
    'About <thought> tags.'
    """
    if not isinstance(response, str):
        raise SegmentationError(f"{record}: response must be str, got {type(response).__name__}")
    open_tag, close_tag = tags
    opened, closed_at = response.find(open_tag), response.find(close_tag)
    if opened >= 0 and (closed_at < 0 or opened < closed_at):
        start = opened + len(open_tag)
        end = response.find(close_tag, start)
        if end < 0:
            return ReasoningSplit(response[start:], "", False, open_tag, close_tag, start, len(response))
        return ReasoningSplit(
            response[start:end], response[end + len(close_tag) :], True, open_tag, close_tag, start, end
        )
    if closed_at >= 0:  # no opening tag before the close: the template opened the block
        answer = response[closed_at + len(close_tag) :]
        return ReasoningSplit(response[:closed_at], answer, True, open_tag, close_tag, 0, closed_at)
    raise SegmentationError(f"{record}: no think tag found (looked for {open_tag} and {close_tag})")


def answer_after_reasoning(text: str, tags: ThinkTags = THINK) -> str | None:
    """What follows the reasoning of ``text`` (a response, or a continuation that starts inside the reasoning)
    by its model's tags, or None when the reasoning never closed.

    >>> answer_after_reasoning("so 4.</think>The answer is 4."), answer_after_reasoning("still thinking")
    ('The answer is 4.', None)
    >>> answer_after_reasoning("so 4.</thought>4", ("<thought>", "</thought>"))
    '4'
    """
    try:
        split = split_reasoning(text, tags=tags)
    except SegmentationError:
        return None
    return split.answer_text if split.closed else None


def authors_closed(text: str) -> bool:
    """Whether the authors' code counts a response as closed (``protocol: reference``): ``</think>`` anywhere in
    it, whatever the model's family (scripts/filter_correct.py ``has_closing_think``; scripts/judge_answers.py
    cuts at the same tag).

    >>> authors_closed("a <thought> b</think>5"), authors_closed("<thought>a</thought>5")
    (True, False)
    """
    return AUTHORS_CLOSE in text


def tags_closed_by(think_close: str) -> ThinkTags:
    """The think tags of the family whose closer is ``think_close`` (a known family's pair; else the closer
    with no opener, for a model that only ever closes a block its template opened).

    >>> tags_closed_by("</thought>"), tags_closed_by("[/REASON]")
    (('<thought>', '</thought>'), ('', '[/REASON]'))
    """
    for pair in THINK_TAGS:
        if pair[1] == think_close:
            return pair
    return ("", think_close)


def parse_trace(problem_id: str, model: str, response: str, *, tags: ThinkTags = THINK, trace_id: str = "") -> Trace:
    """Build a `Trace` from a raw model response, read with the model's own think ``tags`` (see
    `split_reasoning` for the rules).

    ``trace_id`` is the trace's id when the caller read it from a stored row: hashing a long response again
    costs more than parsing it.
    """
    split = split_reasoning(response, tags=tags, record=f"trace of {problem_id!r} by {model!r}")
    kept = {name: getattr(split, name) for name in TRACE_PARTS}
    return Trace(problem_id=problem_id, model=model, text=response, id=trace_id, **kept)


def split_steps(reasoning: str, *, separator: str = STEP_SEPARATOR) -> tuple[Step, ...]:
    """Split reasoning into steps on ``separator``, keeping every character.

    >>> [s.text for s in split_steps("a\\n\\nbb\\n\\n\\nc")]
    ['a', 'bb', '\\nc']
    >>> [round(s.t, 2) for s in split_steps("a\\n\\nbbb")]
    [0.25, 1.0]
    """
    if not isinstance(reasoning, str):
        raise SegmentationError(f"reasoning must be str, got {type(reasoning).__name__}")
    pieces = reasoning.split(separator)
    total = sum(len(p) for p in pieces)
    steps: list[Step] = []
    offset = 0
    cumulative = 0
    for index, piece in enumerate(pieces):
        cumulative += len(piece)
        t = cumulative / total if total else (index + 1) / len(pieces)
        # Positional arguments: a trace has dozens of steps, and keywords cost a third more per Step.
        steps.append(Step(index, piece, offset, offset + len(piece), t))
        offset += len(piece) + len(separator)
    return tuple(steps)


def join_steps(steps: Iterable[Step | str], *, separator: str = STEP_SEPARATOR) -> str:
    """Inverse of `split_steps`: join step texts with the separator."""
    if not isinstance(steps, (tuple, list)):
        steps = tuple(steps)
    try:
        return separator.join(steps)  # all strings (every intervened prefix): joined in C, no generator
    except TypeError:
        return separator.join(s if isinstance(s, str) else s.text for s in steps)


def cut_at(steps: Sequence[Step], t: float, *, min_steps: int = DEFAULT_MIN_STEPS) -> Cut:
    """The cut for target timestep ``t``: the step with minimal ``|t_i - t|`` (first on ties), moved
    forward so the prefix keeps at least ``min_steps`` steps. Raises `TooFewSteps` for short traces.

    >>> steps = split_steps("aa\\n\\nbb\\n\\ncc\\n\\ndd")   # t = 0.25, 0.5, 0.75, 1.0
    >>> cut_at(steps, 0.7).index, cut_at(steps, 0.1).index
    (2, 1)
    """
    if not 0.0 <= t <= 1.0:
        raise ValueError(f"timestep must lie in [0, 1], got {t}")
    if min_steps < 1:
        raise ValueError(f"min_steps must be ≥ 1, got {min_steps}")
    if len(steps) < min_steps:
        raise TooFewSteps(f"reasoning has {len(steps)} step(s), fewer than min_steps={min_steps}")
    best = _nearest_step(steps, t)
    index = max(best, min_steps - 1)
    return Cut(index=index, target_t=t, actual_t=steps[index].t)


def _nearest_step(steps: Sequence[Step], t: float) -> int:
    """Index of the step whose ``t`` is closest to ``t``, the first on ties, by binary search.

    Step timesteps never decrease (they are cumulative), so only the steps either side of the insertion
    point can be nearest; equal timesteps (empty steps) resolve to the first of their run.
    """
    ts = [s.t for s in steps]
    right = bisect.bisect_left(ts, t)
    if right == len(ts):
        return bisect.bisect_left(ts, ts[-1])
    if right == 0:
        return 0
    left = bisect.bisect_left(ts, ts[right - 1])
    return left if abs(ts[left] - t) <= abs(ts[right] - t) else right


def cuts_for(
    steps: Sequence[Step], timesteps: Iterable[float] = DEFAULT_TIMESTEPS, *, min_steps: int = DEFAULT_MIN_STEPS
) -> tuple[Cut, ...]:
    """`cut_at` for every timestep of a grid (several targets may share a cut on short traces)."""
    return tuple(cut_at(steps, t, min_steps=min_steps) for t in timesteps)


def timestep_grid(start: float = 0.1, stop: float = 0.9, step: float = 0.2) -> tuple[float, ...]:
    """An evenly spaced grid, rounded to avoid float drift: ``timestep_grid(0.1, 0.9, 0.1)`` → 0.1 … 0.9."""
    if step <= 0 or start > stop:
        raise ValueError(f"bad grid start={start} stop={stop} step={step}")
    count = int(round((stop - start) / step)) + 1
    return tuple(round(start + i * step, 10) for i in range(count))
