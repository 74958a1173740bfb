import math

import numpy as np
import pytest

from recovery.metrics import (
    ChainOutcome,
    UngradableChain,
    aggregate,
    chain_outcome,
    continuation_reasoning,
    length_change,
    majority_threshold,
    robustness,
    summarize,
    token_length,
)
from recovery.types import Grade, Intervened, Verdict


def make_intervened(prefix="aaaa\n\nXXXX", inserted="XXXX", original_prefix=10, original_total=20, **kw):
    base = dict(
        trace_id="tr",
        problem_id="p",
        model="m",
        intervention="wikipedia_text",
        category="neutral",
        target_t=0.5,
        actual_t=0.5,
        cut_index=1,
        n_steps=4,
    )
    base.update(kw)
    return Intervened(
        **base,
        prefix=prefix,
        inserted_text=inserted,
        original_prefix_chars=original_prefix,
        original_reasoning_chars=original_total,
    )


@pytest.mark.parametrize(
    "k,n,expected",
    [
        (0, 8, (False, False, False)),
        (1, 8, (True, False, False)),
        (4, 8, (True, False, False)),
        (5, 8, (True, True, False)),
        (8, 8, (True, True, True)),
        (2, 3, (True, True, False)),
        (1, 1, (True, True, True)),
    ],
)
def test_robustness_levels(k, n, expected):
    r = robustness(k, n)
    assert (r.at_least_once, r.majority, r.all) == expected


def test_majority_threshold_and_bad_counts():
    assert [majority_threshold(n) for n in (1, 2, 3, 4, 8, 9)] == [1, 2, 2, 3, 5, 5]
    with pytest.raises(ValueError):
        robustness(9, 8)
    with pytest.raises(ValueError):
        majority_threshold(0)


def test_length_change_hand_computed():
    iv = make_intervened()
    # kept = 10 - 4 = 6 chars; continuation reasoning 24 chars → total 30 vs original 20 → +50 %;
    # remaining: 24 vs 20 - 10 = 10 → +140 %. Text after </think> is not reasoning.
    lc = length_change(iv, "b" * 24 + "</think>\\boxed{1}")
    assert lc.whole_pct == pytest.approx(50.0)
    assert lc.remaining_pct == pytest.approx(140.0)


def test_length_change_unclosed_continuation_counts_everything():
    assert continuation_reasoning("abc") == "abc"
    assert continuation_reasoning("ab</think>c") == "ab"


def test_length_change_in_tokens():
    class WordTokenizer:
        def encode(self, text, add_special_tokens=False):
            return text.split()

    original = "one two three four\n\nfive six seven eight"
    iv = make_intervened(
        prefix="one two three four\n\nnoise noise",
        inserted="noise noise",
        original_prefix=len("one two three four"),
        original_total=len(original),
    )
    lc = length_change(
        iv, "five six seven eight nine ten</think>", length=token_length(WordTokenizer()), original_reasoning=original
    )
    # kept 4 tokens + 6 new = 10 vs 8 → +25 %; remaining 6 vs 4 → +50 %
    assert (lc.whole_pct, lc.remaining_pct) == (25.0, 50.0)
    with pytest.raises(ValueError, match="original_reasoning"):
        length_change(iv, "x", length=token_length(WordTokenizer()))


def test_chain_outcome_counts_and_lengths():
    iv = make_intervened()
    grades = [Grade("correct"), Grade("wrong"), Grade("no_answer"), Grade("correct"), Grade("timeout")]
    conts = ["b" * 14, "b" * 24, "b" * 4, "b" * 14, "b" * 14]
    o = chain_outcome(iv, "math", grades, conts)
    assert (o.n, o.k) == (5, 2)
    assert not o.levels.majority and o.levels.at_least_once
    # whole: (0 + 50 - 50 + 0 + 0)/5 = 0 ; remaining: (40 + 140 - 60 + 40 + 40)/5 = 40
    assert o.whole_pct == pytest.approx(0.0)
    assert o.remaining_pct == pytest.approx(40.0)


def test_chain_outcome_ungradable_and_mismatch():
    iv = make_intervened()
    with pytest.raises(UngradableChain):
        chain_outcome(iv, "math", [Grade(Verdict.UNPARSABLE_GOLD)] * 3)
    with pytest.raises(ValueError, match="continuations"):
        chain_outcome(iv, "math", [Grade("correct")], ["a", "b"])


def test_summarize_matches_paper_std_convention():
    # Table 18, EXAONE-Deep-32B, Add Random Text, t=0.1: 0.932 ± 0.251 — population std of 0/1 outcomes.
    values = [1] * 932 + [0] * 68
    s = summarize(values)
    assert s.mean == pytest.approx(0.932)
    assert s.std == pytest.approx(0.2518, abs=1e-4)
    assert s.ci_low < 0.932 < s.ci_high
    # Normal-approximation 95 % half-width is 1.96 * 0.2518 / sqrt(1000) ≈ 0.0156.
    assert (s.ci_high - s.ci_low) / 2 == pytest.approx(0.0156, abs=0.003)


def test_summarize_continuous_and_deterministic():
    values = np.arange(100, dtype=float)
    a, b = summarize(values, seed=3), summarize(values, seed=3)
    assert a == b
    assert a.mean == 49.5 and a.ci_low < 49.5 < a.ci_high
    assert math.isnan(summarize([]).mean)


def test_aggregate_groups_and_sorts():
    outcomes = [
        ChainOutcome("c1", "m", "math", "paraphrase", "benign", 0.3, 8, 8, 10.0, 20.0),
        ChainOutcome("c2", "m", "math", "paraphrase", "benign", 0.3, 8, 4, 30.0, None),
        ChainOutcome("c3", "m", "math", "paraphrase", "benign", 0.1, 8, 5),
    ]
    rows = aggregate(reversed(outcomes), n_boot=200)
    assert [r.key["target_t"] for r in rows] == [0.1, 0.3]
    r = rows[1]
    assert r.n_chains == 2
    assert (r.at_least_once.mean, r.majority.mean, r.all.mean) == (1.0, 0.5, 0.5)
    assert r.whole_pct.mean == 20.0 and r.remaining_pct.n == 1
    flat = r.flat()
    assert flat["majority_mean"] == 0.5 and flat["intervention"] == "paraphrase"
    assert rows == aggregate(outcomes, n_boot=200)  # order-independent
    with pytest.raises(ValueError, match="cannot group"):
        aggregate(outcomes, by=("colour",))


def test_aggregate_by_other_fields():
    outcomes = [
        ChainOutcome("a", "m1", "math", "paraphrase", "benign", 0.1, 8, 8, -60.0),
        ChainOutcome("b", "m1", "math", "wikipedia_text", "neutral", 0.1, 8, 8, 120.0),
        ChainOutcome("c", "m2", "math", "paraphrase", "benign", 0.1, 8, 8, -40.0),
    ]
    rows = aggregate(outcomes, by=("model", "intervention"), n_boot=50)
    assert [(r.key["model"], r.key["intervention"], r.whole_pct.mean) for r in rows] == [
        ("m1", "paraphrase", -60.0),
        ("m1", "wikipedia_text", 120.0),
        ("m2", "paraphrase", -40.0),
    ]


def test_length_change_in_real_tokens_measures_the_original_at_the_same_cut(shared_data, r1_tokenizer):
    """Under the real R1-distill tokenizer, an unchanged prefix continued by the original trace's own remainder
    is 0 % in tokens as in characters, though the cut splits a token ("." + "\\n\\n") of the whole trace."""
    import json

    from recovery.segment import parse_trace

    line = (shared_data / "real_traces" / "thought_anchors_math_cots.jsonl").read_text().splitlines()[0]
    row = json.loads(line)
    reasoning = parse_trace(row["problem_id"], "r1", row["solution"]).reasoning
    steps = reasoning.split("\n\n")
    k = next(k for k in range(len(steps) // 2, len(steps)) if steps[k - 1].endswith("."))
    cut = len("\n\n".join(steps[:k]))
    assert reasoning[cut - 1] == "." and reasoning[cut : cut + 2] == "\n\n"
    prefix, rest = reasoning[:cut], reasoning[cut:]
    tokens = token_length(r1_tokenizer)
    assert tokens(prefix) + tokens(rest) == tokens(reasoning) + 1  # ".ĊĊ" is split by the cut
    iv = make_intervened(prefix=prefix, inserted="", original_prefix=cut, original_total=len(reasoning))
    same = length_change(iv, rest + "</think>\n\n\\boxed{1}", length=tokens, original_reasoning=reasoning)
    assert (same.whole_pct, same.remaining_pct) == (0.0, 0.0)
    twice = length_change(iv, rest + rest + "</think>", length=tokens, original_reasoning=reasoning)
    assert twice.remaining_pct == pytest.approx(100.0 * (tokens(rest + rest) / tokens(rest) - 1))
    new, before = tokens(prefix) + tokens(rest + rest), tokens(prefix) + tokens(rest)
    assert twice.whole_pct == pytest.approx(100.0 * (new / before - 1))
