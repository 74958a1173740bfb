"""How single reasoning steps of the toy world are written and read back.

A solution is a sequence of *positions*: ``0`` is the start state, ``i + 1`` is the state after operation
``i``, and position ``n_ops + 1`` is the conclusion. Each position can be written in three styles:

* ``canonical`` — the tiny reasoner's own terse style (``Step B: subtract 3. 12 - 3 = 9.``);
* ``paraphrase`` — the same content re-worded, used by the toy *paraphrase* intervention;
* ``other`` — "another model's" wordier style, used by the toy *complete step* intervention.

`parse_step` reads any of the three styles (optionally behind a leading doubt sentence such as
``Wait, let me check.``) into a `Claim`, which `claim_is_correct` checks against the problem. The teacher
and the interventions use these to find out how far an arbitrary prefix is still right.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from recovery.toy.tasks import LABELS, NAMES, ArithSpec, Spec, SwapSpec

STYLES: tuple[str, ...] = ("canonical", "paraphrase", "other")

# Doubt phrases: short, fixed, and part of the tokenizer's training text, so each costs only a few tokens.
DOUBT_CHECK = "Wait, let me check."
DOUBT_WRONG = "Wait, that is wrong."
DOUBT_UNRELATED = "Wait, that is not related."
DOUBT_PHRASES: tuple[str, ...] = (DOUBT_CHECK, DOUBT_WRONG, DOUBT_UNRELATED)

OPENERS: dict[str, tuple[str, ...]] = {
    "arith": ("Okay, let me keep a running total.", "Okay, step by step.", "Alright, one step at a time."),
    "swap": ("Okay, let me follow the ball.", "Okay, step by step.", "Alright, one swap at a time."),
}
PARAPHRASED_OPENERS: dict[str, str] = {
    "arith": "I need to apply each operation to the number in order.",
    "swap": "I need to follow who holds the ball after every swap.",
}
ANSWER_TEMPLATE = "The answer is \\boxed{{{answer}}}."

# The two fixed-form steps of each family, by style: (the start state, the conclusion).
FIXED_STEPS: dict[str, dict[str, tuple[str, str]]] = {
    "arith": {
        "canonical": ("Start with {}.", "So the final number is {}."),
        "paraphrase": ("We begin at {}.", "Therefore the result is {}."),
        "other": ("The starting number is {}.", "This means the final number is {}."),
    },
    "swap": {
        "canonical": ("Start: {} holds the ball.", "So {} holds the ball."),
        "paraphrase": ("At first the ball is with {}.", "Therefore the ball ends with {}."),
        "other": ("At the start, {} has the ball.", "This means {} has the ball at the end."),
    },
}


def _label(i: int) -> str:
    return LABELS[i]


# ------------------------------------------------------------------------------------------ writing


def render_position(spec: Spec, position: int, style: str = "canonical", *, state=None, answer=None) -> str:
    """The step text for ``position`` in ``style``.

    ``state`` overrides the state written for positions ``0..n_ops`` (to write a *wrong* step), and
    ``answer`` overrides the concluding answer at position ``n_ops + 1``.
    """
    if style not in STYLES:
        raise ValueError(f"unknown style {style!r}; known: {STYLES}")
    n = spec.n_ops
    if not 0 <= position <= n + 1:
        raise ValueError(f"position must lie in [0, {n + 1}], got {position}")
    start, conclusion = FIXED_STEPS[spec.family][style]
    if position == n + 1:
        return conclusion.format(answer if answer is not None else spec.answer)
    value = state if state is not None else spec.state(position)
    value = int(value) if isinstance(spec, ArithSpec) else str(value)
    if position == 0:
        return start.format(value)
    if isinstance(spec, ArithSpec):
        return _render_arith(spec, position, style, value)
    return _render_swap(spec, position, style, value)


def _render_arith(spec: ArithSpec, position: int, style: str, value: int) -> str:
    """Operation step ``position`` (≥ 1) of an arithmetic problem."""
    i = position - 1
    a = spec.state(i)
    op, n = spec.ops[i]
    label = _label(i)
    if style == "canonical":
        # The operation is first copied verbatim from the question (an easy induction copy for a tiny
        # model), then applied to the previous total.
        return f"Step {label}: {'add' if op == '+' else 'subtract'} {n}. {a} {op} {n} = {value}."
    if style == "paraphrase":
        return f"In step {label}, {a} {'plus' if op == '+' else 'minus'} {n} makes {value}."
    verb = "adding" if op == "+" else "subtracting"
    return f"Next comes step {label}: taking {a} and {verb} {n} gives {value}."


def _render_swap(spec: SwapSpec, position: int, style: str, holder: str) -> str:
    """Swap step ``position`` (≥ 1) of a ball-swap problem."""
    i = position - 1
    a, b = (spec.names[k] for k in spec.swaps[i])
    label = _label(i)
    if style == "canonical":  # the step is copied verbatim from the question, then the new holder
        return f"Step {label}: {a} and {b} swap. {holder} holds the ball."
    if style == "paraphrase":
        return f"In step {label}, {a} and {b} trade, so the ball is now with {holder}."
    return f"Next comes step {label}: {a} and {b} exchange what they hold, which leaves the ball with {holder}."


CHECK_OPENER = "Check:"


def render_check(spec: Spec, position: int) -> str:
    """The check paragraph after operation step ``position`` (1..n_ops) in the self-checking style: the
    operation redone from the state before it (``Check: 12 - 3 = 9.``; swaps: ``Check: Ann had the ball,
    so Cal holds the ball.``). A check that disagrees with the step it follows is what makes a wrong step
    noticeable: the tiny reasoner redoes a step well but cannot tell a wrong written result from a right
    one."""
    if not 1 <= position <= spec.n_ops:
        raise ValueError(f"a check follows an operation step: position must lie in [1, {spec.n_ops}], got {position}")
    if isinstance(spec, ArithSpec):
        op, k = spec.ops[position - 1]
        return f"{CHECK_OPENER} {spec.state(position - 1)} {op} {k} = {spec.state(position)}."
    return f"{CHECK_OPENER} {spec.state(position - 1)} had the ball, so {spec.state(position)} holds the ball."


def with_checks(spec: Spec, steps: list[str], first: int) -> list[str]:
    """``steps`` (the steps of positions ``first``, ``first + 1``, …) with the check paragraph after each
    operation step: the self-checking style of a run of steps."""
    out: list[str] = []
    for position, text in enumerate(steps, start=first):
        out.append(text)
        if 1 <= position <= spec.n_ops:
            out.append(render_check(spec, position))
    return out


def is_check(text: str) -> bool:
    """True for a check paragraph (`render_check`), whatever it concludes."""
    return text.strip().startswith(CHECK_OPENER)


def check_is_correct(text: str, spec: Spec) -> bool:
    """True when ``text`` is the check of one of the problem's operation steps, with the right result."""
    return text.strip() in {render_check(spec, p) for p in range(1, spec.n_ops + 1)}


def answer_line(answer: str) -> str:
    """The text after ``</think>``'s blank line: ``The answer is \\boxed{…}.``"""
    return ANSWER_TEMPLATE.format(answer=answer)


# ------------------------------------------------------------------------------------------ reading


@dataclass(frozen=True, slots=True)
class Claim:
    """What one step asserts: the state at ``position`` (or the answer, for the conclusion).

    ``value`` is the running total or the ball's holder; ``operands`` is ``(a, op, n)`` for an arithmetic
    operation step and ``(name_a, name_b)`` for a swap step, as written; ``doubt`` tells whether the step
    opened with a doubt sentence.
    """

    position: int
    value: object
    style: str
    operands: tuple = ()
    doubt: bool = False


_DOUBT_RE = re.compile(r"^((?:Wait|Hmm|Hold on)\b[^.!?]*[.!?])\s*")
_N = r"(-?\d+)"
_L = r"([A-H])"
_NAME = "(" + "|".join(NAMES) + ")"

_Pattern = tuple[str, str, re.Pattern[str]]  # (style, kind: "start" / "op" / "end", pattern)


def _step_patterns(family: str, value: str, op_patterns: tuple[tuple[str, str], ...]) -> tuple[_Pattern, ...]:
    """Every step ``family`` writes, as patterns: the start states and conclusions read from `FIXED_STEPS`
    (``value`` is the group that stands for their ``{}``), and the operation steps ``(style, regex)``."""
    fixed = FIXED_STEPS[family].items()
    starts = [(style, "start", re.compile(_fixed_regex(start, value))) for style, (start, _) in fixed]
    ops = [(style, "op", re.compile(regex)) for style, regex in op_patterns]
    ends = [(style, "end", re.compile(_fixed_regex(end, value))) for style, (_, end) in fixed]
    return (*starts, *ops, *ends)


def _fixed_regex(template: str, value: str) -> str:
    return re.escape(template).replace(re.escape("{}"), value)


_ARITH_PATTERNS = _step_patterns(
    "arith",
    _N,
    (
        ("canonical", rf"Step {_L}: (add|subtract) (\d+)\. {_N} ([+-]) {_N} = {_N}\."),
        ("paraphrase", rf"In step {_L}, {_N} (plus|minus) {_N} makes {_N}\."),
        ("other", rf"Next comes step {_L}: taking {_N} and (adding|subtracting) {_N} gives {_N}\."),
    ),
)
_OP_WORDS = {"+": "+", "-": "-", "plus": "+", "minus": "-", "adding": "+", "subtracting": "-", "?": "?"}

_SWAP_PATTERNS = _step_patterns(
    "swap",
    _NAME,
    (
        ("canonical", rf"Step {_L}: {_NAME} and {_NAME} swap\. {_NAME} holds the ball\."),
        ("paraphrase", rf"In step {_L}, {_NAME} and {_NAME} trade, so the ball is now with {_NAME}\."),
        (
            "other",
            rf"Next comes step {_L}: {_NAME} and {_NAME} exchange what they hold, which leaves the ball with {_NAME}\.",
        ),
    ),
)


def parse_step(text: str, spec: Spec) -> Claim | None:
    """Read one step written in any style (see module doc); ``None`` when it is not a toy step.

    >>> from recovery.toy.tasks import parse_question
    >>> spec = parse_question("Start with 7. Step A: add 5. Step B: subtract 3. What is the final number?")
    >>> parse_step("Wait, let me check. Step B: subtract 3. 12 - 3 = 9.", spec)
    Claim(position=2, value=9, style='canonical', operands=(12, '-', 3), doubt=True)
    """
    body = text.strip()
    doubt = False
    m = _DOUBT_RE.match(body)
    if m:
        doubt = True
        body = body[m.end() :]
    if isinstance(spec, ArithSpec):
        for style, kind, pattern in _ARITH_PATTERNS:
            g = pattern.fullmatch(body)
            if not g:
                continue
            if kind == "start":
                return Claim(0, int(g.group(1)), style, (), doubt)
            if kind == "end":
                return Claim(spec.n_ops + 1, g.group(1), style, (), doubt)
            if style == "canonical":  # the copied operation must agree with the one applied
                label, said_op, said_n, a, word, n, r = g.groups()
                if (_OP_WORDS[word], n) != ("+" if said_op == "add" else "-", said_n):
                    word = "?"
            else:
                label, a, word, n, r = g.groups()
            position = LABELS.index(label) + 1
            if position > spec.n_ops:
                return None
            return Claim(position, int(r), style, (int(a), _OP_WORDS[word], int(n)), doubt)
        return None
    for style, kind, pattern in _SWAP_PATTERNS:
        g = pattern.fullmatch(body)
        if not g:
            continue
        if kind == "start":
            return Claim(0, g.group(1), style, (), doubt)
        if kind == "end":
            return Claim(spec.n_ops + 1, g.group(1), style, (), doubt)
        label, a, b, holder = g.groups()
        position = LABELS.index(label) + 1
        if position > spec.n_ops:
            return None
        return Claim(position, holder, style, (a, b), doubt)
    return None


def claim_is_correct(claim: Claim, spec: Spec) -> bool:
    """True when the claim's state (and the operation it writes down) match the problem exactly."""
    n = spec.n_ops
    if claim.position == n + 1:
        return str(claim.value) == spec.answer
    if claim.value != spec.state(claim.position):
        return False
    if claim.position == 0:
        return True
    i = claim.position - 1
    if isinstance(spec, ArithSpec):
        op, k = spec.ops[i]
        return claim.operands == (spec.state(i), op, k)
    a, b = spec.swaps[i]
    return set(claim.operands) == {spec.names[a], spec.names[b]}
