"""Doubt windows against the authors' code (issue 29, part ``doubt``; data: make_metrics.py, which ran their
scripts/analyze_doubt.py with its defaults on the continuations).

Their units are the first 20 spaCy sentences of the whole continuation (blank-line segments first), each
cut to 1,000 characters; the judge sees each with newlines as spaces, and a reply counts as doubt exactly
when it starts with "yes" (anything else is No, never skipped). Under ``protocol: reference`` this
project's doubt analysis classifies the same units with the same prompts and reads the same flags; its
default (the reasoning only, its own splitter, a lenient reader that skips unclear replies) differs.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

pytest.importorskip("spacy")

from recovery.analysis.cli_doubt import doubt_analysis, run_doubt_protocol
from recovery.analysis.doubt_curve import DoubtConfig
from recovery.analysis.doubt_judge import DoubtJudge, DoubtJudgeConfig, JudgeReply, make_judge
from recovery.model_config import ModelConfig
from recovery.plan import unit_rules
from reference.metrics_run import build_run, data, sha

DOUBT = data()["doubt_by_continuation"]
TEXTS = data()["continuation_texts"]
REPLIES = {p: r for entry in DOUBT.values() for p, r in zip(entry["prompts_sha256"], entry["replies"], strict=True)}


class ScriptedDoubtJudge:
    """The doubt judge model: the reply the authors' run got for the same prompt; records what it was shown."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def __call__(self, messages, decoding) -> str:
        system, user = messages[0].content, messages[-1].content
        self.seen.append((system, user))
        return REPLIES.get(sha(user), "<prompt the authors never sent>")


def test_reference_units_prompts_and_flags_are_the_authors():
    rules = unit_rules("reference")
    judge = DoubtJudge(ScriptedDoubtJudge(), authors=True)
    capped = False
    for digest, entry in DOUBT.items():
        units = rules.continuation_units(TEXTS[digest], 20)
        assert units == entry["units"]
        prompts = [judge.messages(u) for u in units]
        assert {system.content for system, _ in prompts} <= {data()["doubt_system_prompt"]}
        assert [sha(user.content) for _, user in prompts] == entry["prompts_sha256"]
        assert [int(f) for f in judge.classify(units)] == entry["flags"]
        capped |= any(len(u) == 1000 for u in units)
    assert capped and len(DOUBT) == len(TEXTS)  # the 1,000-character cap is exercised; every text analysed


def test_the_default_units_and_reading_differ():
    rules = unit_rules("default")
    assert (rules.splitter, rules.whole_continuation, rules.max_unit_chars) == ("default", False, None)
    differ = [rules.continuation_units(TEXTS[d], 20) != e["units"] for d, e in DOUBT.items()]
    assert sum(differ) >= len(differ) // 2
    # The reference splitter alone is not the authors' window either: it stops at the closing tag.
    reasoning_only = unit_rules("default", "reference")
    assert any(reasoning_only.continuation_units(TEXTS[d], 20) != e["units"] for d, e in DOUBT.items())
    lenient = DoubtJudge(ScriptedDoubtJudge())
    assert lenient.parse("**Yes**") == JudgeReply(True) and lenient.parse("Maybe").doubt is None
    authors = DoubtJudge(ScriptedDoubtJudge(), authors=True)
    assert authors.parse("**Yes**") == JudgeReply(False) and authors.parse("Maybe") == JudgeReply(False)
    assert lenient.messages("a\nb")[1].content != authors.messages("a\nb")[1].content


def test_the_judge_config_takes_the_authors_reply_budget_under_reference():
    config = DoubtJudgeConfig(model=ModelConfig(name="judge"))
    assert make_judge(config, lambda m: ScriptedDoubtJudge()).max_new_tokens == 8
    assert make_judge(config, lambda m: ScriptedDoubtJudge(), protocol="reference").max_new_tokens == 10
    chosen = DoubtJudgeConfig(model=ModelConfig(name="judge"), max_new_tokens=32)
    assert make_judge(chosen, lambda m: ScriptedDoubtJudge(), protocol="reference").max_new_tokens == 32


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory):
    return build_run(tmp_path_factory.mktemp("doubt") / "run", "reference")


def test_the_doubt_analysis_of_a_reference_run_follows_the_authors_by_default(reference_run, tmp_path):
    assert run_doubt_protocol(reference_run.path) == "reference"
    assert run_doubt_protocol(tmp_path) == "default"  # no run config: the project's
    judge = ScriptedDoubtJudge()
    judge_config = tmp_path / "judge.yaml"
    judge_config.write_text("model: {name: judge}\n", encoding="utf-8")
    result, _ = doubt_analysis(
        reference_run.path, judge_config=judge_config, make_generator=lambda m: judge, progress=False, render=False
    )
    assert (result.protocol, result.splitter) == ("reference", "reference")
    table = pq.read_table(reference_run.path / "analysis" / "doubt" / "sentences.parquet").to_pylist()
    continuation_of = {r["id"]: r["text"] for r in reference_run.table("continuations").iter_rows(["id", "text"])}
    by_continuation: dict[str, list[dict]] = {}
    for row in table:
        by_continuation.setdefault(row["continuation_id"], []).append(row)
    assert len(by_continuation) == len(continuation_of)  # none skipped: every reply is a verdict
    for cid, rows in by_continuation.items():
        entry = DOUBT[sha(continuation_of[cid])]
        rows.sort(key=lambda r: r["sentence_index"])
        assert [r["sentence"] for r in rows] == entry["units"]
        assert [int(r["doubt"]) for r in rows] == entry["flags"]
    summary = json.loads((reference_run.path / "analysis" / "doubt" / "summary.json").read_text(encoding="utf-8"))
    assert summary["protocol"] == "reference" and not [s for s in summary["skips"] if "detector" in s[1]]
    assert {system for system, _ in judge.seen} == {data()["doubt_system_prompt"]}


def test_a_default_analysis_summary_does_not_name_the_protocol(tmp_path):
    run = build_run(tmp_path / "run", "default")
    result, _ = doubt_analysis(run.path, progress=False, render=False)
    assert result.protocol == "default" and result.splitter == "default"
    summary = json.loads((run.path / "analysis" / "doubt" / "summary.json").read_text(encoding="utf-8"))
    assert "protocol" not in summary
    overridden, _ = doubt_analysis(run.path, protocol="reference", progress=False, render=False)
    assert overridden.protocol == "reference" and DoubtConfig(protocol="reference").rules.max_unit_chars == 1000
