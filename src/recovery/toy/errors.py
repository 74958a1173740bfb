"""Plausible mistakes in the toy world: the wrong value a careless reasoner would write at a position.

Used for the natural slips in training traces and by the toy *wrong continuation* and *hallucinated fact*
interventions, so the errors the model learnt to doubt are the same kind it is tested on.
"""

from __future__ import annotations

import random

from recovery.toy.tasks import ArithSpec, Spec, SwapSpec


def wrong_value(spec: Spec, position: int, rng: random.Random) -> object:
    """A value for ``position`` that differs from the correct one (state, or answer at ``n_ops + 1``).

    Arithmetic: off by one or two, or the opposite operation. Swaps: another person holds the ball (the
    swap forgotten or misapplied). At the conclusion: another number near the answer, or another name.
    """
    n = spec.n_ops
    if not 0 <= position <= n + 1:
        raise ValueError(f"position must lie in [0, {n + 1}], got {position}")
    if position == n + 1:
        return _wrong_answer(spec, rng)
    if isinstance(spec, ArithSpec):
        right = spec.state(position)
        candidates = {right - 2, right - 1, right + 1, right + 2}
        if position > 0:
            op, k = spec.ops[position - 1]
            before = spec.state(position - 1)
            candidates.add(before - k if op == "+" else before + k)
        options = sorted(v for v in candidates if v >= 0 and v != right)
        return rng.choice(options)
    right_holder = spec.state(position)
    if position == 0:
        return rng.choice(sorted(n for n in spec.names if n != right_holder))
    # The ball stayed where it was (the swap forgotten or misapplied), or went to the wrong person.
    before = spec.state(position - 1)
    options = sorted({before, *spec.names} - {right_holder})
    return rng.choice(options)


def _wrong_answer(spec: Spec, rng: random.Random) -> str:
    right = spec.answer
    if isinstance(spec, ArithSpec):
        value = int(right)
        return str(rng.choice(sorted(v for v in {value - 2, value - 1, value + 1, value + 2} if v >= 0)))
    assert isinstance(spec, SwapSpec)
    return rng.choice(sorted(x for x in spec.names if x != right))
