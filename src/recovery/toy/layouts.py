"""Varied layouts for the tiny reasoner's training examples, so that it reads the question by content.

Trained on one fixed layout, the tiny reasoner learns to find the question's numbers and operations at
fixed distances instead of by their labels: a few instruction sentences after the question, or a longer
opener prefilled before its first step, then break its accuracy. An intervention shifts the same
distances, so such a model cannot recover from any of them, whatever it is fine-tuned on; and a recovery
that restarts the chain copies a wrong start number.

`vary_layout` moves the distances with text that carries no content of the problem: instruction sentences
after the question (in the user turn) and extra sentences in the trace's opener. Training on a share of
such examples (stage 2 of the tiny reasoner's recipe) makes the model read the question by content, also
with sentences it never saw in training (`tests/toy/test_toy_model.py`). None of the sentences resembles
an intervention: the model is not taught to skip inserted text or to doubt.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

# Instructions a user might add after a question. Different from the sentences the evaluation uses
# (tests/toy/test_toy_model.py checks that the shipped model generalises beyond these).
QUESTION_FILLERS: tuple[str, ...] = (
    "Show your reasoning.",
    "Work through each step in order.",
    "This is a practice puzzle.",
    "Write down each intermediate result.",
    "There is exactly one correct answer.",
    "Give the final answer in a box.",
    "Read the question carefully.",
    "Do not skip any step.",
)
# Planning sentences a reasoner might write before its first step.
OPENER_SENTENCES: tuple[str, ...] = (
    "Let me read the question again.",
    "I will go through it slowly.",
    "Each step changes the state.",
    "There are a few steps here.",
    "I should not rush this.",
    "Let me write every step down.",
)
MAX_FILLERS = 4
MAX_OPENER_SENTENCES = 3


@dataclass(frozen=True, slots=True)
class Layout:
    """A question and its trace steps laid out anew. ``inserted_step`` is the index of a step that was
    inserted (a paragraph of opener sentences), or None: steps after it moved one index on."""

    question: str
    steps: tuple[str, ...]
    inserted_step: int | None = None

    def moved(self, index: int) -> int:
        """Where the original step ``index`` sits now."""
        if self.inserted_step is not None and index >= self.inserted_step:
            return index + 1
        return index


def vary_layout(question: str, steps: tuple[str, ...] | list[str], rng: random.Random) -> Layout:
    """One of three variations, each a third of the time: 1-4 instruction sentences after the question;
    1-3 planning sentences in the opener (appended to it, or as a paragraph of their own); or both.

    ``steps[0]`` must be the opener, as in `recovery.toy.traces.ToyTrace.steps`.
    """
    if not steps:
        raise ValueError("a trace needs at least its opener step to vary its layout")
    new_steps = list(steps)
    inserted: int | None = None
    kind = rng.randrange(3)  # 0: question only, 1: opener only, 2: both
    if kind in (0, 2):
        fillers = [rng.choice(QUESTION_FILLERS) for _ in range(rng.randint(1, MAX_FILLERS))]
        question = " ".join([question, *fillers])
    if kind in (1, 2):
        extra = " ".join(rng.choice(OPENER_SENTENCES) for _ in range(rng.randint(1, MAX_OPENER_SENTENCES)))
        if rng.random() < 0.5:
            new_steps[0] = f"{new_steps[0]} {extra}"
        else:
            new_steps.insert(1, extra)
            inserted = 1
    return Layout(question=question, steps=tuple(new_steps), inserted_step=inserted)
