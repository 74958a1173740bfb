"""Fixtures for the interventions tests: a small hand-checkable trace and a fake text generator.

The real intervention LLM (Qwen2.5-32B-Instruct) cannot run here; `FakeGenerator` stands in for it at the
`TextGenerator` boundary, replies deterministically and records every request so tests can assert the
exact App. D.1 prompt and Table 15 decoding that a backend would receive.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from recovery.generation import Decoding, Message
from recovery.ids import content_id
from recovery.types import AnswerType, Problem, Trace

# Four steps of lengths 10, 19, 11, 17 (total 57): timesteps 10/57≈0.175, 29/57≈0.509, 40/57≈0.702, 1.0.
# So t=0.5 cuts at step 1 and t=0.7 at step 2; t=0.1 is moved to step 1 by min_steps=2.
SMALL_STEPS = ("Let x = 2.", "Then y = x + 3 = 5.", "So 2y = 10.", "The answer is 10.")
QUESTION = "What is 2y if x = 2 and y = x + 3?"


class FakeGenerator:
    """Deterministic `TextGenerator`: ``reply`` is a fixed string, a callable(messages, decoding) -> str,
    or None for a reply derived from the user message. Every call is kept in ``calls``."""

    def __init__(self, reply: str | Callable[[Sequence[Message], Decoding], object] | None = None) -> None:
        self.reply = reply
        self.calls: list[tuple[tuple[Message, ...], Decoding]] = []

    def __call__(self, messages: Sequence[Message], decoding: Decoding) -> str:
        self.calls.append((tuple(messages), decoding))
        if callable(self.reply):
            return self.reply(messages, decoding)  # type: ignore[return-value]
        if self.reply is not None:
            return self.reply
        user = messages[-1].content
        if user.startswith("Problem:") and "Original reasoning trace:" in user:
            # A "paraphrase": every shown step rewritten, blank lines kept between steps.
            shown = user.split("Original reasoning trace:\n", 1)[1].rsplit("\nRewritten trace:", 1)[0]
            return "\n\n".join(f"In other words, {step}" for step in shown.split("\n\n"))
        return f"I need to check claim {content_id(user)[:8]}."


def make_trace(steps: Sequence[str], question: str = QUESTION, model: str = "test-model") -> tuple[Problem, Trace]:
    """A (problem, trace) pair whose reasoning is ``steps`` joined with blank lines."""
    problem = Problem(domain="math", question=question, answer="10", answer_type=AnswerType.NUMERIC, source="test")
    reasoning = "\n\n".join(steps)
    text = f"<think>{reasoning}</think>The answer is 10."
    trace = Trace(problem_id=problem.id, model=model, text=text, reasoning=reasoning, answer_text="The answer is 10.")
    return problem, trace


@pytest.fixture
def small_steps() -> tuple[str, ...]:
    return SMALL_STEPS


@pytest.fixture
def small_item() -> tuple[Problem, Trace]:
    return make_trace(SMALL_STEPS)


@pytest.fixture(scope="session")
def fake_generator() -> type[FakeGenerator]:
    """The `FakeGenerator` class (call it to build one with a scripted reply)."""
    return FakeGenerator


@pytest.fixture(scope="session")
def make_item() -> Callable[..., tuple[Problem, Trace]]:
    return make_trace


@pytest.fixture(scope="session")
def paper_text(shared_data) -> str:  # noqa: ANN001 — fixture from tests/conftest.py
    """The paper text next to the shared data, for verbatim checks; skips when absent."""
    path = shared_data.parent / "paper" / "robust-cot-interventions.txt"
    if not path.is_file():
        pytest.skip(f"paper text not found at {path}")
    return path.read_text(encoding="utf-8")
