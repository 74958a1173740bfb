"""The toy world's teacher: a correct recovery continuation for any (intervened) reasoning prefix.

For real RLLMs a stronger model writes how a chain should go on after an intervention; in the toy world
the task generator knows the answer and writes it. Given the prefix the model resumes from, the teacher

1. reads how far the prefix is still right (`analyse_prefix`): the last correctly established position,
   and whether the last step is wrong or not a toy step at all;
2. if so, opens with a short doubt phrase that costs a handful of the tiny model's tokens
   (``Wait, that is wrong.`` after a wrong claim, ``Wait, let me check.`` after anything else) and redoes
   the next step correctly — exactly the shape of the natural slips in the training traces;
3. writes the remaining steps in the model's own style, closes ``</think>`` and gives the boxed answer.

The continuation is the text to append to the prefix, byte for byte: ``prefix + continuation`` is a
complete response. It feeds the recovery-trace builder of the training stage.
"""

from __future__ import annotations

from dataclasses import dataclass

from recovery.segment import STEP_SEPARATOR, split_steps
from recovery.toy.analysis import PrefixState, analyse_prefix
from recovery.toy.steps import (
    DOUBT_CHECK,
    DOUBT_WRONG,
    is_check,
    parse_step,
    render_check,
    render_position,
    with_checks,
)
from recovery.toy.tasks import spec_of
from recovery.toy.traces import finish_response
from recovery.types import Intervened, Problem


@dataclass(frozen=True, slots=True)
class Recovery:
    """A teacher continuation: ``text`` is appended to the prefix; ``doubt`` is the phrase used (or
    ``None``); ``resumed_at`` is the first position the continuation writes (``n_ops + 2`` when the
    prefix already holds a correct conclusion and only the answer is added)."""

    text: str
    doubt: str | None
    resumed_at: int
    state: PrefixState


def recovery_continuation(
    problem: Problem,
    prefix: str,
    *,
    doubt: bool | None = None,
    doubt_phrase: str | None = None,
    restart: bool = False,
    checks: bool = False,
) -> Recovery:
    """The correct continuation of ``prefix`` (reasoning text without the opening think tag).

    ``doubt=None`` doubts only when the prefix's last step is wrong or is not a toy step; ``True`` /
    ``False`` force it. ``doubt_phrase`` overrides the phrase. ``restart=True`` redoes the whole chain from
    its start after a doubt (instead of from the last correct step): longer, but it needs nothing from
    the disrupted prefix, only the question. ``checks=True`` writes the self-checking style: every
    operation step it writes is followed by its check paragraph (`recovery.toy.steps.render_check`), and
    when the prefix ends with an operation step, the continuation opens by checking that step, so a wrong
    one is doubted after a check that disagrees with it.

    >>> from recovery.toy.tasks import parse_question
    >>> from recovery.toy.tasks import make_problem
    >>> p = make_problem(parse_question("Start with 7. Step A: add 5. Step B: subtract 3. What is the final number?"))
    >>> print(recovery_continuation(p, "Okay.\\n\\nStart with 7.\\n\\nStep A: add 5. 7 + 5 = 13.").text)
    <BLANKLINE>
    <BLANKLINE>
    Wait, that is wrong. Step A: add 5. 7 + 5 = 12.
    <BLANKLINE>
    Step B: subtract 3. 12 - 3 = 9.
    <BLANKLINE>
    So the final number is 9.
    </think>
    <BLANKLINE>
    The answer is \\boxed{9}.
    """
    spec = spec_of(problem)
    steps = [s.text for s in split_steps(prefix)] if prefix.strip() else []
    state = analyse_prefix(spec, steps)
    use_doubt = state.suspicious if doubt is None else doubt
    phrase = None
    if use_doubt:
        phrase = doubt_phrase or (DOUBT_WRONG if state.last_kind == "wrong" else DOUBT_CHECK)
    first = 0 if (phrase and restart) else state.last_ok + 1  # may be past the conclusion when already reached
    new_steps = [render_position(spec, p) for p in range(first, spec.n_ops + 2)]
    if not new_steps and phrase:  # the conclusion is already there: redo it only when doubting
        first = spec.n_ops + 1
        new_steps = [render_position(spec, first)]
    if phrase:
        new_steps[0] = f"{phrase} {new_steps[0]}"
    if checks:
        new_steps = with_checks(spec, new_steps, first)
        last = parse_step(steps[-1], spec) if steps and not is_check(steps[-1]) else None
        if last is not None and 1 <= last.position <= spec.n_ops:
            new_steps.insert(0, render_check(spec, last.position))
    if new_steps:
        body = _separator_after(prefix) + STEP_SEPARATOR.join(new_steps) + "\n"
    else:  # R1 traces end the reasoning with a newline before </think>
        body = "" if prefix.endswith("\n") else "\n"
    return Recovery(text=finish_response(body, spec.answer), doubt=phrase, resumed_at=first, state=state)


def _separator_after(prefix: str) -> str:
    """What must follow ``prefix`` so the next text starts a new step."""
    if not prefix.strip():
        return ""
    if prefix.endswith(STEP_SEPARATOR):
        return ""
    if prefix.endswith("\n"):
        return "\n"
    return STEP_SEPARATOR


def teach(intervened: Intervened, problem: Problem, **kwargs) -> Recovery:
    """`recovery_continuation` for an `Intervened` record (its ``prefix``); ``kwargs`` as there."""
    if intervened.problem_id != problem.id:
        raise ValueError(
            f"intervened chain {intervened.id} belongs to problem {intervened.problem_id}, not {problem.id}"
        )
    return recovery_continuation(problem, intervened.prefix, **kwargs)
