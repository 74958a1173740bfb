"""The toy world's problem families: procedurally generated multi-step problems with exact answers.

Two families, both solved by applying labelled steps one at a time to a small state:

* ``arith`` — chained arithmetic with a running total: *Start with 7. Step A: add 5. Step B: subtract 3.
  What is the final number?* The answer is an integer (`AnswerType.NUMERIC`).
* ``swap`` — object tracking (the shell game, with people): one of three people holds a ball, pairs of
  them swap what they hold in labelled steps, and the question asks who holds the ball at the end
  (`AnswerType.EXACT`, a name).

Every step carries a letter label ("Step B") that appears both in the question and in the trace. The tiny
model then finds the next operation by matching the label (a content lookup, which small transformers
learn quickly) instead of counting positions in the question (the long-range copy that made an earlier
design mis-copy operands).

Item ``idx`` of a dataset with seed ``seed`` is drawn from ``random.Random(seed + idx)`` alone (the
reasoning-gym convention), so the same (seed, idx) gives the same problem, byte for byte, in any order.
The question text is the source of truth: `parse_question` recovers the structured spec from it, so
problems survive a round trip through a record store that drops ``metadata``.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from recovery.types import AnswerType, Problem

DOMAIN = "toy"
FAMILIES: tuple[str, ...] = ("arith", "swap")
LABELS = "ABCDEFGH"
# Short, distinct names: each becomes a single token in the tiny model's vocabulary.
NAMES: tuple[str, ...] = ("Ann", "Ben", "Cal", "Dee", "Eve", "Fay", "Gus", "Hal")
ARITH_QUESTION = "What is the final number?"
SWAP_QUESTION = "Who holds the ball at the end?"


class ToyParseError(ValueError):
    """A text is not a toy-world question (or step) this module can read."""


@dataclass(frozen=True, slots=True)
class ArithSpec:
    """A running-total problem: ``start`` then ``ops`` like ``("+", 5)`` or ``("-", 3)``."""

    start: int
    ops: tuple[tuple[str, int], ...]

    family = "arith"

    @property
    def n_ops(self) -> int:
        return len(self.ops)

    def state(self, k: int) -> int:
        """The running total after the first ``k`` operations (``state(0) == start``)."""
        value = self.start
        for op, n in self.ops[:k]:
            value = value + n if op == "+" else value - n
        return value

    @property
    def answer(self) -> str:
        return str(self.state(self.n_ops))

    @property
    def answer_type(self) -> AnswerType:
        return AnswerType.NUMERIC


@dataclass(frozen=True, slots=True)
class SwapSpec:
    """An object-tracking problem (the shell game with people): ``names[holder]`` holds the ball at the
    start, and each swap ``(i, j)`` makes ``names[i]`` and ``names[j]`` swap what they hold."""

    names: tuple[str, ...]
    holder: int
    swaps: tuple[tuple[int, int], ...]

    family = "swap"

    @property
    def n_ops(self) -> int:
        return len(self.swaps)

    def state(self, k: int) -> str:
        """Who holds the ball after the first ``k`` swaps."""
        holder = self.holder
        for i, j in self.swaps[:k]:
            if holder == i:
                holder = j
            elif holder == j:
                holder = i
        return self.names[holder]

    @property
    def answer(self) -> str:
        return self.state(self.n_ops)

    @property
    def answer_type(self) -> AnswerType:
        return AnswerType.EXACT


Spec = ArithSpec | SwapSpec


@dataclass(frozen=True, slots=True)
class ToyTaskConfig:
    """Sizes of generated problems. Item ``idx`` belongs to family ``families[idx % len(families)]``."""

    families: tuple[str, ...] = FAMILIES
    min_ops: int = 3  # arith: operations per problem
    max_ops: int = 5
    max_operand: int = 9
    max_value: int = 20  # arith running totals stay in [0, max_value] (a small addition table to learn)
    min_swaps: int = 3
    max_swaps: int = 4
    n_people: int = 3

    def __post_init__(self) -> None:
        unknown = set(self.families) - set(FAMILIES)
        if not self.families or unknown:
            raise ValueError(f"families must be a non-empty subset of {FAMILIES}, got {self.families}")
        if not 1 <= self.min_ops <= self.max_ops <= len(LABELS):
            raise ValueError(f"need 1 ≤ min_ops ≤ max_ops ≤ {len(LABELS)}")
        if not 1 <= self.min_swaps <= self.max_swaps <= len(LABELS):
            raise ValueError(f"need 1 ≤ min_swaps ≤ max_swaps ≤ {len(LABELS)}")
        if not 2 <= self.n_people <= len(NAMES):
            raise ValueError(f"n_people must lie in [2, {len(NAMES)}]")
        if self.max_value < 2 * self.max_operand:
            raise ValueError("max_value must be at least twice max_operand")


# ------------------------------------------------------------------------------------------ generation


def _sample_arith(rng: random.Random, cfg: ToyTaskConfig) -> ArithSpec:
    start = rng.randint(1, cfg.max_operand)
    value = start
    ops: list[tuple[str, int]] = []
    for _ in range(rng.randint(cfg.min_ops, cfg.max_ops)):
        n = rng.randint(1, cfg.max_operand)
        allowed = [op for op in ("+", "-") if 0 <= (value + n if op == "+" else value - n) <= cfg.max_value]
        op = rng.choice(allowed)  # never empty: max_value ≥ 2·max_operand
        value = value + n if op == "+" else value - n
        ops.append((op, n))
    return ArithSpec(start=start, ops=tuple(ops))


def _sample_swap(rng: random.Random, cfg: ToyTaskConfig) -> SwapSpec:
    names = tuple(rng.sample(NAMES, cfg.n_people))
    holder = rng.randrange(cfg.n_people)
    swaps: list[tuple[int, int]] = []
    for _ in range(rng.randint(cfg.min_swaps, cfg.max_swaps)):
        i, j = sorted(rng.sample(range(cfg.n_people), 2))
        swaps.append((i, j))
    return SwapSpec(names=names, holder=holder, swaps=tuple(swaps))


def sample_spec(family: str, rng: random.Random, config: ToyTaskConfig | None = None) -> Spec:
    """Draw one problem spec of ``family`` from ``rng``."""
    cfg = config or ToyTaskConfig()
    if family == "arith":
        return _sample_arith(rng, cfg)
    if family == "swap":
        return _sample_swap(rng, cfg)
    raise ValueError(f"unknown toy family {family!r}; known: {FAMILIES}")


def question_text(spec: Spec) -> str:
    """The problem statement shown to the model."""
    if isinstance(spec, ArithSpec):
        steps = " ".join(
            f"Step {LABELS[i]}: {'add' if op == '+' else 'subtract'} {n}." for i, (op, n) in enumerate(spec.ops)
        )
        return f"Start with {spec.start}. {steps} {ARITH_QUESTION}"
    people = ", ".join(spec.names[:-1]) + f" and {spec.names[-1]}"
    steps = " ".join(
        f"Step {LABELS[k]}: {spec.names[i]} and {spec.names[j]} swap." for k, (i, j) in enumerate(spec.swaps)
    )
    return f"{people} pass a ball around. {spec.names[spec.holder]} holds it first. {steps} {SWAP_QUESTION}"


def make_problem(spec: Spec, *, seed: int | None = None, idx: int | None = None) -> Problem:
    """Wrap a spec as a `recovery.types.Problem` (domain ``toy``, source ``toy/<family>``)."""
    metadata: dict[str, object] = {"family": spec.family, "n_ops": spec.n_ops}
    if seed is not None:
        metadata["seed"] = seed
    if idx is not None:
        metadata["idx"] = idx
    return Problem(
        domain=DOMAIN,
        question=question_text(spec),
        answer=spec.answer,
        answer_type=spec.answer_type,
        source=f"toy/{spec.family}",
        metadata=metadata,
    )


def generate_problem(idx: int, *, seed: int = 0, config: ToyTaskConfig | None = None) -> Problem:
    """Problem ``idx`` of the toy dataset with ``seed``: drawn from ``random.Random(seed + idx)`` only.

    >>> generate_problem(3, seed=1).question == generate_problem(3, seed=1).question
    True
    """
    cfg = config or ToyTaskConfig()
    family = cfg.families[idx % len(cfg.families)]
    rng = random.Random(seed + idx)
    return make_problem(sample_spec(family, rng, cfg), seed=seed, idx=idx)


def generate_problems(n: int, *, seed: int = 0, start: int = 0, config: ToyTaskConfig | None = None) -> list[Problem]:
    """Problems ``start .. start+n-1`` of the dataset with ``seed``."""
    return [generate_problem(idx, seed=seed, config=config) for idx in range(start, start + n)]


# ------------------------------------------------------------------------------------------ parsing

_NAME = "|".join(NAMES)
_ARITH_RE = re.compile(r"Start with (\d+)\.((?: Step [A-H]: (?:add|subtract) \d+\.)+) " + re.escape(ARITH_QUESTION))
_ARITH_OP_RE = re.compile(r"Step ([A-H]): (add|subtract) (\d+)\.")
_SWAP_RE = re.compile(
    rf"((?:(?:{_NAME}), )*(?:{_NAME})) and ({_NAME}) pass a ball around\. ({_NAME}) holds it first\."
    rf"((?: Step [A-H]: (?:{_NAME}) and (?:{_NAME}) swap\.)+) " + re.escape(SWAP_QUESTION)
)
_SWAP_OP_RE = re.compile(rf"Step ([A-H]): ({_NAME}) and ({_NAME}) swap\.")


def parse_question(question: str) -> Spec:
    """Recover the spec from a question written by `question_text`; raises `ToyParseError` otherwise.

    >>> spec = parse_question("Start with 7. Step A: add 5. Step B: subtract 3. What is the final number?")
    >>> spec.answer
    '9'
    """
    m = _ARITH_RE.fullmatch(question.strip())
    if m:
        ops = tuple(("+" if word == "add" else "-", int(n)) for _, word, n in _ARITH_OP_RE.findall(m.group(2)))
        return ArithSpec(start=int(m.group(1)), ops=ops)
    m = _SWAP_RE.fullmatch(question.strip())
    if not m:
        raise ToyParseError(f"not a toy question: {question[:80]!r}")
    names = tuple(m.group(1).split(", ")) + (m.group(2),)
    if len(set(names)) != len(names) or m.group(3) not in names:
        raise ToyParseError(f"inconsistent people in {question[:80]!r}")
    swaps = []
    for _, a, b in _SWAP_OP_RE.findall(m.group(4)):
        if a not in names or b not in names or a == b:
            raise ToyParseError(f"swap of unknown people in {question[:80]!r}")
        swaps.append(tuple(sorted((names.index(a), names.index(b)))))
    return SwapSpec(names=names, holder=names.index(m.group(3)), swaps=tuple(swaps))  # type: ignore[arg-type]


def spec_of(problem: Problem) -> Spec:
    """The spec of a toy `Problem` (parsed from its question, which is authoritative)."""
    try:
        return parse_question(problem.question)
    except ToyParseError as err:
        raise ToyParseError(f"problem {problem.id} is not a toy problem: {err}") from None


def is_toy_problem(problem: Problem) -> bool:
    """True when `spec_of` can read ``problem``."""
    try:
        parse_question(problem.question)
    except ToyParseError:
        return False
    return True
