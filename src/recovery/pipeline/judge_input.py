"""What the answer judge is shown under the authors' protocol (``protocol: reference``, part ``grading``).

The authors judge a continuation's *complete answer* (prefix, separator, continuation:
`recovery.metrics.reference.complete_answer`; scripts/judge_answers.py ``main``, completions mode), of
which the judge sees the extract after the last ``</think>``. That extract is the continuation's own except
for continuations that never close and are short (`recovery.grading.judge.needs_prefix`), so only their
chains' prefixes are read: one pass over the continuations finds them (column-wise), one over the chains
reads those prefixes. Nothing else of the prefixes is held.
"""

from __future__ import annotations

from collections.abc import Callable

from recovery.generation import ChatTextGenerator
from recovery.grading.judge import AUTHORS_CLOSE, LLMJudge, needs_prefix
from recovery.metrics.reference import complete_answer
from recovery.pipeline.context import StageContext
from recovery.run_dir import Run

__all__ = ["judged_texts", "prefixes_needed", "run_judge"]


def run_judge(ctx: StageContext, authors_input: bool) -> LLMJudge | None:
    """The run's answer judge (``grading.judge`` with the prompt ``grading.judge_prompt``; None when none is
    configured), shown the authors' input when the plan says so for what it judges (`recovery.plan.JudgeInputs`:
    ``grades`` for the grades stage, scripts/judge_answers.py in completions mode; ``selection`` for the filter
    stage, the same script with ``--mode single`` on each whole trace)."""
    grading = ctx.config.grading
    if grading.judge is None:
        return None
    judge = ChatTextGenerator(ctx.generator(grading.judge))
    return LLMJudge(judge, prompt=grading.judge_prompt, authors_input=authors_input)


def prefixes_needed(run: Run, tail_chars: int) -> set[str]:
    """The chains of ``run`` with a continuation that `needs_prefix` (read column-wise)."""
    import pyarrow.compute as pc

    needed: set[str] = set()
    if not run.tables.continuations.exists():
        return needed
    for batch in run.continuation_batches(["chain_id", "text"], batch_size=16384):
        text = pc.fill_null(batch.column(1), "")
        short = pc.less(pc.utf8_length(pc.utf8_trim_whitespace(text)), tail_chars + len(AUTHORS_CLOSE))
        unclosed = pc.invert(pc.match_substring(text, AUTHORS_CLOSE))
        needed.update(batch.column(0).filter(pc.and_(short, unclosed)).to_pylist())
    return needed


def judged_texts(run: Run, tail_chars: int) -> Callable[[str, str], str]:
    """``shown(chain_id, continuation)``: the complete answer of a continuation that `needs_prefix`, else the
    continuation itself (whose extract is the complete answer's)."""
    needed = prefixes_needed(run, tail_chars)
    prefixes: dict[str, str] = {}
    if needed:
        for batch in run.chain_batches(["id", "prefix"], batch_size=8192):
            for chain_id, prefix in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                if chain_id in needed:
                    prefixes[chain_id] = prefix or ""

    def shown(chain_id: str, continuation: str) -> str:
        if chain_id in prefixes and needs_prefix(continuation, tail_chars):
            return complete_answer(prefixes[chain_id], continuation)
        return continuation

    return shown
