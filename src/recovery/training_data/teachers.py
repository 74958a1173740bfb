"""Teachers: something that continues an intervened prefix correctly.

The paper's Table 9 shows a strong model recovers ~98% of a weak model's intervened traces; its
continuations of the *weak model's* intervened prefix are recovery examples the weak model can be trained
on. A `Teacher` maps (problem, prefix) to zero or more continuation texts, each appended verbatim after
the prefix; the SFT builder grades and filters them like the model's own samples.

* `ToyTeacher` — the toy world's task generator (`recovery.toy.recovery_continuation`), always correct.
* `GeneratorTeacher` — any `recovery.backends` generator (HF, vLLM, an OpenAI-compatible server) running a
  stronger model, prompted with the chat the student's run continued from (`run_prompts`: under
  ``protocol: reference`` the authors' system message, user turn and prompt style) and the prefix as its
  assistant prefill (the backend renders the teacher's own chat template).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from recovery.generation import GenerationRequest, Generator, SamplingParams, batched
from recovery.ids import content_id, request_seed
from recovery.prompt_building import ChatPrompts, ProjectPrompts
from recovery.toy import recovery_continuation
from recovery.types import Problem


@runtime_checkable
class Teacher(Protocol):
    """Continues intervened prefixes. ``continue_prefixes`` returns, per (problem, prefix) item, the
    continuation texts (possibly none, e.g. after a generation error), in item order."""

    name: str

    def continue_prefixes(self, items: Sequence[tuple[Problem, str]]) -> list[list[str]]: ...


class ToyTeacher:
    """The toy world's teacher: one correct recovery per prefix (a short doubt phrase when the last step
    is wrong or not a toy step, then the remaining steps, ``</think>`` and the boxed answer).

    ``doubt`` forces (True) or forbids (False) the doubt phrase; None lets the teacher decide. ``restart``
    redoes the whole chain after a doubt instead of resuming from the last correct step. ``checks`` writes
    the self-checking style (the shipped tiny reasoner's). Such a teacher also writes the clean examples
    (``writes_clean``): a model trained without checks that is to learn them must see the same style in
    both, and for one that has them the teacher's clean traces are its own style anyway.
    """

    name = "toy-teacher"

    def __init__(
        self, *, doubt: bool | None = None, doubt_phrase: str | None = None, restart: bool = False, checks: bool = True
    ) -> None:
        self.doubt = doubt
        self.doubt_phrase = doubt_phrase
        self.restart = restart
        self.checks = checks

    @property
    def writes_clean(self) -> bool:
        """Whether the clean examples are this teacher's too (its self-checking style, see the class doc)."""
        return self.checks

    def __call__(self, problem: Problem, prefix: str) -> str:

        return recovery_continuation(
            problem, prefix, doubt=self.doubt, doubt_phrase=self.doubt_phrase, restart=self.restart, checks=self.checks
        ).text

    def continue_prefixes(self, items: Sequence[tuple[Problem, str]]) -> list[list[str]]:
        return [[self(problem, prefix)] for problem, prefix in items]


class GeneratorTeacher:
    """A stronger model behind a `recovery.backends.Generator`, continuing the same intervened prefix.

    ``sampling.n`` continuations per prefix (the SFT builder keeps the shortest one that passes the
    filters); each request is seeded from (``sampling.seed``, problem, prefix), so results do not depend
    on batching. ``chat`` must be the prompts the student saw (`recovery.training_data.run_prompts` of its run; default: the project's).
    """

    def __init__(
        self,
        generator: Generator,
        *,
        sampling: SamplingParams | None = None,
        chat: ChatPrompts | None = None,
        batch_size: int = 64,
        name: str | None = None,
    ) -> None:
        self.generator = generator
        self.sampling = sampling or SamplingParams(n=4, temperature=0.6, top_p=0.95)
        self.chat = chat or ProjectPrompts()
        self.batch_size = batch_size
        self.name = name or f"teacher:{getattr(generator, 'name', type(generator).__name__)}"
        self.errors = 0

    def _request(self, index: int, problem: Problem, prefix: str) -> GenerationRequest:
        base = self.sampling.seed or 0
        seed = request_seed(base, "teacher", content_id(problem.id, prefix))
        return self.chat.request(str(index), problem, prefix, dataclasses.replace(self.sampling, seed=seed))

    def continue_prefixes(self, items: Sequence[tuple[Problem, str]]) -> list[list[str]]:
        out: list[list[str]] = [[] for _ in items]
        indexed = list(enumerate(items))
        for batch in batched(indexed, self.batch_size):
            requests = [self._request(i, problem, prefix) for i, (problem, prefix) in batch]
            for result in self.generator.generate(requests):
                if result.error or not result.samples:
                    self.errors += 1
                    continue
                out[int(result.request_id)] = [s.text for s in result.samples if s.finish_reason != "error"]
        return out
