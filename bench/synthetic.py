"""Synthetic R1-like traces for benchmarks: realistic size and shape, generated deterministically.

Each trace has ~60 blank-line-separated steps and ~6,000 characters of reasoning (the median of the real
DeepSeek-R1-Distill traces in ``shared/data/real_traces`` is 37 steps / 4.7k chars; the issue's workload
asks for ~60 steps / ~6k), opens with "Okay, so", mixes prose, LaTeX, arithmetic and the occasional
"Wait," and ends with ``</think>`` and a boxed numeric answer.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from recovery.types import AnswerType, Problem

_OPENERS = (
    "Okay, so I need to figure out",
    "Let me think about",
    "First, I should consider",
    "Hmm, so now I need to compute",
    "Wait, let me double-check",
    "Alright, the next thing is",
    "So, putting that together,",
    "Let me verify this by computing",
)
_WORDS = (
    "the value of the expression",
    "each term in the sum",
    "both sides of the equation",
    "the remaining factor",
    "the number of cases",
    "the total",
    "the previous result",
    "the common denominator",
    "the derivative",
)


def synthetic_problem(index: int, seed: int = 0) -> Problem:
    """A numeric problem whose answer is derived from ``(seed, index)``."""
    rng = random.Random(seed * 1_000_003 + index)
    a, b = rng.randint(10, 999), rng.randint(2, 99)
    return Problem(
        domain="math",
        question=f"Compute {a} times {b} and report the result.",
        answer=str(a * b),
        answer_type=AnswerType.NUMERIC,
        source="bench/synthetic",
        id=f"synthetic-{seed}-{index}",
    )


def synthetic_response(problem: Problem, index: int, seed: int = 0, steps: int = 60) -> str:
    """An R1-style response: ``<think>`` + ``steps`` paragraphs (~100 chars each) + ``</think>`` + answer."""
    rng = random.Random(seed * 7_919 + index)
    paragraphs = []
    for i in range(steps):
        x, y = rng.randint(1, 500), rng.randint(1, 500)
        opener = rng.choice(_OPENERS)
        words = rng.choice(_WORDS)
        if i % 4 == 0:
            body = f"{opener} {words}: \\( {x} + {y} = {x + y} \\), so that part is {x + y}."
        else:
            body = f"{opener} {words}, which gives {x} \\times {y} = {x * y}; keep it for later."
        paragraphs.append(body)
    reasoning = "\n" + "\n\n".join(paragraphs) + "\n"
    return f"<think>{reasoning}</think>\n\nTherefore the final answer is \\(\\boxed{{{problem.answer}}}\\)."


def synthetic_items(count: int, seed: int = 0) -> Iterator[tuple[Problem, str]]:
    """Stream ``count`` (problem, response) pairs without holding them all in memory."""
    for index in range(count):
        problem = synthetic_problem(index, seed)
        yield problem, synthetic_response(problem, index, seed)
