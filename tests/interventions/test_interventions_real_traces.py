"""Smoke test: all seven interventions over the 153 real DeepSeek-R1-Distill traces, skips counted.

The rule-based ones run for real; the LLM-backed ones use the fake generator (the boundary a real backend
plugs into), so this checks segmentation, placement and bookkeeping on real-world step shapes.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from recovery.interventions import (
    PAPER_INTERVENTIONS,
    ChainSettings,
    Produced,
    Skip,
    TraceJob,
    WikipediaPool,
    intervene_traces,
)
from recovery.segment import DEFAULT_TIMESTEPS, cut_at, parse_trace, split_steps
from recovery.types import AnswerType, Problem


@pytest.fixture(scope="module")
def real_items(shared_data):  # noqa: ANN001, ANN201
    path = shared_data / "real_traces" / "thought_anchors_math_cots.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} missing")
    items = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        problem = Problem(
            domain="math",
            question=row["problem"],
            answer=row["gt_answer"],
            answer_type=AnswerType.EXPRESSION,
            source="thought_anchors_math",
            metadata={"row_id": row["id"]},
        )
        items.append((problem, parse_trace(problem.id, "deepseek-r1-distill", row["solution"])))
    return items


@pytest.fixture(scope="module")
def pool(shared_data):  # noqa: ANN001, ANN201
    path = shared_data / "wikipedia_paragraphs" / "wikitext2_test_paragraphs.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} missing")
    return WikipediaPool.from_jsonl(path)


def test_all_seven_over_real_traces(real_items, pool, fake_generator) -> None:  # noqa: ANN001
    assert len(real_items) == 153
    settings = ChainSettings.from_names(
        PAPER_INTERVENTIONS,
        {"wikipedia_text": {"pool": pool}},
        timesteps=DEFAULT_TIMESTEPS,
        seed=0,
        generator=fake_generator(),
    )
    outcomes = list(intervene_traces([TraceJob(problem, trace) for problem, trace in real_items], settings))
    out = [o.chain for o in outcomes if isinstance(o, Produced)]
    produced = Counter(item.intervention for item in out)
    skipped = Counter((o.intervention, o.reason) for o in outcomes if isinstance(o, Skip))
    expected_items = 153 * len(DEFAULT_TIMESTEPS) * 7
    assert produced.total() + skipped.total() == expected_items
    assert len(out) == produced.total()
    # Failures must come from the fixed vocabulary; rule-based interventions only skip short traces.
    for (name, reason), count in skipped.items():
        if name in ("random_characters", "wikipedia_text", "complete_step", "wrong_continuation"):
            assert reason in ("too_few_steps", "step_too_short"), (name, reason, count)
    assert produced["random_characters"] >= 0.95 * 153 * len(DEFAULT_TIMESTEPS)
    assert produced["wikipedia_text"] == 153 * len(DEFAULT_TIMESTEPS) - skipped[("wikipedia_text", "too_few_steps")]
    traces = {trace.id: trace for _, trace in real_items}
    for item in out:
        steps = split_steps(traces[item.trace_id].reasoning)
        assert item.cut_index == cut_at(steps, item.target_t).index
        kept = [s.text for s in steps[: item.cut_index]]
        if item.intervention != "paraphrase":
            assert item.prefix.startswith("\n\n".join(kept))
        if item.intervention == "random_characters":
            n = round(0.5 * len(steps[item.cut_index].text))
            assert len(item.inserted_text) == n
            assert len(item.prefix) == item.original_prefix_chars + n
        assert "</think>" not in item.prefix
    print(f"produced: {dict(produced)}; skipped: {dict(skipped)}")
