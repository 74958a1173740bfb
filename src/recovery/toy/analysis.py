"""How far a (possibly intervened) reasoning prefix of a toy problem is still right.

The teacher and the context-aware toy interventions need the same two facts about a prefix: the last
position whose correct state it established, and whether its last step is something a careful reasoner
would doubt (a wrong claim, or text that is not a toy step at all).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from recovery.toy.steps import claim_is_correct, is_check, parse_step
from recovery.toy.tasks import Spec


@dataclass(frozen=True, slots=True)
class PrefixState:
    """``last_ok``: highest position with a correct claim (-1: none yet). ``last_kind``: what the final
    step is — ``"ok"`` (a correct claim), ``"wrong"`` (a claim with a wrong state or operation),
    ``"noise"`` (not a toy step) or ``"empty"`` (no steps, or only the opening sentence)."""

    last_ok: int
    last_kind: str

    @property
    def suspicious(self) -> bool:
        """True when the last step deserves a doubt expression."""
        return self.last_kind in ("wrong", "noise")

    def next_position(self, spec: Spec) -> int:
        """The position the next step should establish (the conclusion at most)."""
        return min(self.last_ok + 1, spec.n_ops + 1)


def analyse_prefix(spec: Spec, steps: Sequence[str]) -> PrefixState:
    """Scan the steps in order. The first step may be a free-form opening sentence; any other step that
    `parse_step` cannot read is noise; a self-check (`recovery.toy.steps.is_check`) is passed over. Correct
    claims advance ``last_ok`` (redoing an earlier position keeps it); wrong claims leave it where it was."""
    last_ok = -1
    last_kind = "empty"
    for index, text in enumerate(steps):
        if is_check(text):  # a self-check restates a step: it establishes nothing new
            continue
        claim = parse_step(text, spec)
        if claim is None:
            last_kind = "empty" if index == 0 else "noise"
            continue
        if claim_is_correct(claim, spec):
            last_ok = max(last_ok, claim.position)
            last_kind = "ok"
        else:
            last_kind = "wrong"
    return PrefixState(last_ok=last_ok, last_kind=last_kind)
