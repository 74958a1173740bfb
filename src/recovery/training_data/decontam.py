"""Decontamination against evaluation problems.

A training row is contaminated when its problem is an evaluation problem: the same id, or the same
question once normalised (Unicode NFKC, case-folded, whitespace collapsed — so a re-imported copy of a
benchmark item with different ids or spacing is still caught). Drops are counted per reason.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from recovery.run_dir import open_run
from recovery.types import Problem

_SPACE = re.compile(r"\s+")


def normalise_question(text: str) -> str:
    """The comparison form of a question.

    >>> normalise_question("  What is\\n2 + 2?  ") == normalise_question("what is 2 + 2?")
    True
    """
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


@dataclass
class EvalSet:
    """Problem ids and normalised questions of the evaluation problems to keep out of training data."""

    ids: set[str] = field(default_factory=set)
    questions: set[str] = field(default_factory=set)
    name: str = "eval"

    @classmethod
    def from_problems(cls, problems: Iterable[Problem], *, name: str = "eval") -> EvalSet:
        out = cls(name=name)
        out.add(problems)
        return out

    @classmethod
    def from_run(cls, run_dir: str | Path, *, name: str | None = None) -> EvalSet:
        """The problems of another run directory (e.g. the held-out evaluation run)."""
        run = open_run(run_dir)
        problems = list(run.problems().values())
        if not problems:
            raise FileNotFoundError(f"{run.path} has no problems table to decontaminate against")
        return cls.from_problems(problems, name=name or str(run.path))

    def add(self, problems: Iterable[Problem]) -> None:
        for problem in problems:
            self.ids.add(problem.id)
            self.questions.add(normalise_question(problem.question))

    def union(self, other: EvalSet) -> EvalSet:
        return EvalSet(self.ids | other.ids, self.questions | other.questions, f"{self.name}+{other.name}")

    def __len__(self) -> int:
        return len(self.ids)

    def reason(self, problem: Problem) -> str | None:
        """``"eval_problem_id"`` / ``"eval_question"`` when ``problem`` is contaminated, else None."""
        if problem.id in self.ids:
            return "eval_problem_id"
        if normalise_question(problem.question) in self.questions:
            return "eval_question"
        return None
