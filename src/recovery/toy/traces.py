"""R1-style reasoning traces for toy problems, as the tiny reasoner is trained to write them.

A response (what the model generates after the chat template's generation prompt, which already opens
``<think>``, as DeepSeek-R1-Distill's does) looks like::

    Okay, I will keep a running total.

    Start with 7.

    Step A: add 5. 7 + 5 = 12.

    Step B: subtract 3. 12 - 3 = 8.

    Wait, let me check. Step B: subtract 3. 12 - 3 = 9.

    So the final number is 9.
    </think>

    The answer is \\boxed{9}.

Steps are separated by blank lines, so `recovery.segment.split_steps` cuts them exactly. A configurable
fraction of traces (``slip_rate``) contains one natural slip — a wrong state — followed by a doubt phrase
and the corrected step, as real RLLM traces do.

In the *self-checking style* (``checks=True``, the shipped model's) every operation step is followed by
its check, the operation redone from the state before it (``Check: 12 - 3 = 9.``;
`recovery.toy.steps.render_check`). The check is what lets a reasoner notice a wrong step written in its
own style. A slip's wrong step is checked like any other, so its check disagrees with it, and only then
come the doubt and the corrected step (the *reaction*, ``reaction_step``). Without slips every check
would repeat the step before it, and a model learns to copy a result instead of redoing the operation.
"""

from __future__ import annotations

from dataclasses import dataclass

from recovery.ids import item_rng
from recovery.segment import STEP_SEPARATOR, parse_trace
from recovery.toy.errors import wrong_value
from recovery.toy.steps import (
    DOUBT_CHECK,
    DOUBT_WRONG,
    OPENERS,
    answer_line,
    render_check,
    render_position,
    with_checks,
)
from recovery.toy.tasks import Spec, spec_of
from recovery.types import Problem, Trace

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
TRACE_MODEL = "toy-generator"
DEFAULT_SLIP_RATE = 0.15
SLIP_DOUBTS: tuple[str, ...] = (DOUBT_CHECK, DOUBT_WRONG)


@dataclass(frozen=True, slots=True)
class ToyTrace:
    """A generated trace. ``response`` is the text after the generation prompt (no opening tag)."""

    problem: Problem
    steps: tuple[str, ...]
    answer: str
    slip_position: int | None = None  # the position that was first written wrongly, if any
    slip_step: int | None = None  # the index in ``steps`` of that wrong step
    reaction_step: int | None = None  # the index of the doubt and corrected step that answer it

    @property
    def reasoning(self) -> str:
        """The reasoning between the think tags; it ends with a newline, as R1's does."""
        return STEP_SEPARATOR.join(self.steps) + "\n"

    @property
    def response(self) -> str:
        return finish_response(self.reasoning, self.answer)

    def as_trace(self, model: str = TRACE_MODEL) -> Trace:
        """This trace as a core `recovery.types.Trace`."""
        return parse_trace(self.problem.id, model, self.response)


def finish_response(reasoning: str, answer: str) -> str:
    """Close the think block after ``reasoning`` and give the boxed final answer."""
    return f"{reasoning}{THINK_CLOSE}\n\n{answer_line(answer)}"


def solution_steps(spec: Spec, opener: str, *, checks: bool = False) -> list[str]:
    """The correct canonical steps: opener, start, one step per operation (each followed by its check with
    ``checks``), conclusion."""
    steps = [render_position(spec, p) for p in range(spec.n_ops + 2)]
    return [opener, *(with_checks(spec, steps, 0) if checks else steps)]


def step_index(spec: Spec, position: int, *, checks: bool = False) -> int:
    """Where the step of ``position`` sits in `solution_steps` (after the opener, and with ``checks`` after
    the checks of the operation steps before it)."""
    if not 0 <= position <= spec.n_ops + 1:
        raise ValueError(f"position must lie in [0, {spec.n_ops + 1}], got {position}")
    return 1 + position + (max(0, position - 1) if checks else 0)


def write_trace(
    problem: Problem, *, seed: int = 0, slip_rate: float = DEFAULT_SLIP_RATE, checks: bool = False
) -> ToyTrace:
    """The trace for ``problem``: a function of (seed, problem id, ``checks``) only.

    With probability ``slip_rate`` one operation step is first written with a plausible wrong state and
    followed by a doubt phrase and the corrected step (with ``checks``: after the wrong step's check, which
    disagrees with it). ``checks`` writes the self-checking style (module doc); the draws are the same with
    and without it.
    """
    if not 0.0 <= slip_rate <= 1.0:
        raise ValueError(f"slip_rate must lie in [0, 1], got {slip_rate}")
    spec = spec_of(problem)
    rng = item_rng(seed, "toy-trace", problem.id)
    opener = rng.choice(OPENERS[spec.family])
    steps = solution_steps(spec, opener, checks=checks)
    slip_position: int | None = None
    slip_step: int | None = None
    reaction_step: int | None = None
    # Draw the slip decision and its details unconditionally, so slip_rate changes which traces slip
    # but not the opener or anything else drawn for a trace.
    slip_draw = rng.random()
    position = rng.randint(1, spec.n_ops)
    wrong = wrong_value(spec, position, rng)
    doubt = rng.choice(SLIP_DOUBTS)
    if slip_draw < slip_rate:
        slip_position = position
        slip_step = step_index(spec, position, checks=checks)
        wrong_steps = [render_position(spec, position, state=wrong)]
        if checks:
            wrong_steps.append(render_check(spec, position))
        steps[slip_step:slip_step] = wrong_steps
        reaction_step = slip_step + len(wrong_steps)
        steps[reaction_step] = f"{doubt} {steps[reaction_step]}"
    return ToyTrace(
        problem=problem,
        steps=tuple(steps),
        answer=spec.answer,
        slip_position=slip_position,
        slip_step=slip_step,
        reaction_step=reaction_step,
    )
