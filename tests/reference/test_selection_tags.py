"""Issue 35 against the authors' code (data: make_selection.py): which traces close, and what the selection judge
is shown, when a text holds tags of another family.

The authors count a trace as closed when ``</think>`` is anywhere in it (scripts/filter_correct.py), whatever the
model; their selection judge (scripts/judge_answers.py ``--mode single``) sees the question with the reasoning
instruction and the text after the last ``</think>``. Under ``protocol: reference`` the filter stage keeps the
same traces and sends the same judge prompts, byte for byte. Under the project's protocol a model's own tags
(its spec) decide, and another family's tags are text.
"""

from __future__ import annotations

from collections import Counter

from recovery.generation import GenerationResult, Sample
from recovery.model_config import ModelConfig
from recovery.run_config import FilterConfig, GradingConfig
from reference.inputs import load
from reference.selection_rows import CHAT_MODEL, EXAONE_MODEL, MODELS, TAG_MODELS, model_rows, tag_case_rows
from reference.selection_run import run_filter

STORED = load("selection")
ALL_MODELS = (*MODELS, EXAONE_MODEL, CHAT_MODEL)


class RecordingJudge:
    """The judge model: replies to each prompt as the authors' run was replied to, records what it is sent."""

    concurrency = 1
    name = "recording-judge"

    def __init__(self) -> None:
        self.replies = {entry["prompt"]: entry["reply"] for entry in STORED["single_judge"]}
        self.seen: list[tuple[str, str]] = []

    def generate(self, requests):
        for r in requests:
            system, user = r.messages[0].content, r.messages[-1].content
            self.seen.append((system, user))
            reply = self.replies.get(user, "<a prompt the authors never sent>")
            yield GenerationResult(r.request_id, (Sample(reply, 1, "stop"),), prompt_tokens=0)

    def close(self) -> None:
        pass


def _rows(models: tuple[str, ...]) -> dict[str, list[dict]]:
    rows = {**model_rows(), **tag_case_rows()} if set(models) - set(TAG_MODELS) else dict(tag_case_rows())
    if set(models) - set(TAG_MODELS):
        rows[MODELS[1]] = model_rows()[MODELS[1]] + tag_case_rows()[MODELS[1]]
    return {model: rows[model] for model in models}


def _filtered(tmp_path, protocol: str, models: tuple[str, ...], judge: RecordingJudge | None = None):
    """Run the filter stage on the rows of ``models`` under ``protocol`` (`selection_run.run_filter`), only the
    closure deciding, with ``judge`` as the run's answer judge when given."""
    filters = FilterConfig(intersect_models=False, drop_longest_fraction=0.0)
    grading = GradingConfig(judge=ModelConfig(name="judge")) if judge is not None else None
    return run_filter(
        tmp_path / protocol, protocol, _rows(models), filters, grading=grading, make_generator=lambda _m: judge
    )


def test_reference_closure_keeps_what_the_authors_kept(tmp_path):
    kept, unparsed = _filtered(tmp_path, "reference", TAG_MODELS)
    assert kept == STORED["tag_cases_kept"]
    # A trace without any tag of its model's never reaches the filter; the authors drop it too (not closed).
    assert unparsed == {(CHAT_MODEL, "chat_plain_answer")}
    assert all(pid not in STORED["tag_cases_kept"][model] for model, pid in unparsed)


def test_the_projects_closure_is_the_models_own_tags(tmp_path):
    kept, _ = _filtered(tmp_path, "default", TAG_MODELS)
    assert kept[MODELS[1]] == STORED["tag_cases_kept"][MODELS[1]]  # R1: <thought> anywhere is text
    # EXAONE closes with its own </thought> (a </think> it mentions is text); the authors look for </think> alone,
    # so they keep only the trace that mentions it.
    assert kept[EXAONE_MODEL] == ["exaone_own_tags", "exaone_own_tags_no_opener", "exaone_think_close_inside"]
    assert STORED["tag_cases_kept"][EXAONE_MODEL] == ["exaone_think_close_inside"]
    assert kept[CHAT_MODEL] == ["chat_literal_close"]  # its spec's </think>: the one tag that closes anything


def test_the_selection_judge_under_reference_sees_the_authors_prompts(tmp_path):
    judge = RecordingJudge()
    _, unparsed = _filtered(tmp_path, "reference", ALL_MODELS, judge)
    theirs = [
        (e["system"], e["prompt"]) for e in STORED["single_judge"] if (e["model"], e["problem_id"]) not in unparsed
    ]
    assert len(theirs) == len(STORED["single_judge"]) - 1 == 27
    assert Counter(judge.seen) == Counter(theirs)  # every trace judged once, with the authors' very prompt
    stray = next(e for e in STORED["single_judge"] if e["problem_id"] == "r1_stray_close_after_answer")
    assert stray["prompt"].count("The answer is \\boxed{10}. </thought> stray tag") == 1
