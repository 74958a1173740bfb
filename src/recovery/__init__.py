"""recovery: measure how reasoning LLMs recover from interventions on their chain of thought."""

from recovery.types import (
    AnswerType,
    Category,
    Continuation,
    Cut,
    Grade,
    Intervened,
    Problem,
    Step,
    Trace,
    Verdict,
)

__version__ = "0.1.0"

__all__ = [
    "AnswerType",
    "Category",
    "Continuation",
    "Cut",
    "Grade",
    "Intervened",
    "Problem",
    "Step",
    "Trace",
    "Verdict",
    "__version__",
]
