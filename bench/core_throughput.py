"""Throughput of the core library on realistic synthetic traces (~6k chars, ~60 steps).

Prints:
  1. chains/s for parse + the intervention loop (segment, cut, the two rule-based interventions: random
     characters, Wikipedia text) at the paper's five timesteps;
  2. continuations/s for numeric grading, and its speed ratio against math-verify's ``parse`` + ``verify``
     on the same inputs, with the number of verdict disagreements (target: ≥20×, zero disagreements);
  3. RSS while streaming 1× and 5× as many chains (target: no growth — ratio ≈ 1.0).

Usage: python bench/core_throughput.py [--traces 1000] [--grade-items 2000] [--mv-items 500]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recovery.grading import MathVerifyJob, answer_part, grade_response  # noqa: E402
from recovery.interventions import (  # noqa: E402
    ChainSettings,
    Produced,
    TraceJob,
    WikipediaPool,
    create,
    intervene_traces,
)
from recovery.segment import DEFAULT_TIMESTEPS, parse_trace  # noqa: E402
from recovery.types import AnswerType, Problem  # noqa: E402
from synthetic import synthetic_items  # noqa: E402

RULE_BASED = ("random_characters", "wikipedia_text")
SHARED_POOL = (
    Path(__file__).resolve().parents[1]
    / ".."
    / "shared"
    / "data"
    / "wikipedia_paragraphs"
    / "wikitext2_test_paragraphs.jsonl"
)


def current_rss_mb() -> float:
    """Resident set size now (not the peak), from /proc; falls back to the peak elsewhere."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load_pool() -> WikipediaPool:
    if SHARED_POOL.is_file():
        return WikipediaPool.from_jsonl(SHARED_POOL)
    rng = random.Random(0)
    words = "the of river built century army castle song album season city first later during".split()
    return WikipediaPool([" ".join(rng.choice(words) for _ in range(60)) + "." for _ in range(500)], source="synthetic")


def stream_chains(count: int, pool: WikipediaPool, seed: int = 0) -> Iterator[int]:
    """Yield the prefix length of every intervened chain built from ``count`` synthetic traces."""
    interventions = {
        "random_characters": create("random_characters"),
        "wikipedia_text": create("wikipedia_text", pool=pool),
    }
    settings = ChainSettings(interventions, DEFAULT_TIMESTEPS, seed=seed)
    jobs = (
        TraceJob(problem, parse_trace(problem.id, "synthetic-model", response))
        for problem, response in synthetic_items(count, seed=seed)
    )
    for outcome in intervene_traces(jobs, settings):
        if isinstance(outcome, Produced):
            yield len(outcome.chain.prefix)


def bench_chains(traces: int, pool: WikipediaPool) -> None:
    start = time.perf_counter()
    n = sum(1 for _ in stream_chains(traces, pool))
    elapsed = time.perf_counter() - start
    print(
        f"[chains]  {n} chains from {traces} traces in {elapsed:.2f} s → {n / elapsed:,.0f} chains/s "
        f"(segment + cut + {', '.join(RULE_BASED)} at t∈{DEFAULT_TIMESTEPS})"
    )


def numeric_continuations(count: int, seed: int = 0) -> list[tuple[str, Problem, bool]]:
    """(continuation, problem, expected correctness) in the surface forms models write."""
    rng = random.Random(seed)
    tail = "\n\nSo, adding everything up, I am confident in the result.\n</think>\n\n"
    forms = (
        lambda v: f"The final answer is \\(\\boxed{{{v}}}\\).",
        lambda v: f"**Final Answer**\n\\[\n\\boxed{{{v}}}\n\\]",
        lambda v: f"Therefore the answer is $\\boxed{{{v:,}}}$." if isinstance(v, int) else f"$\\boxed{{{v}}}$",
        lambda v: f"The answer is {v}.",
    )
    items = []
    for i in range(count):
        kind = rng.random()
        if kind < 0.6:
            gold: int | float = rng.randint(-5000, 50000)
        else:
            gold = round(rng.uniform(-100, 100), rng.choice((1, 2, 3)))
        correct = rng.random() < 0.7
        shown = (
            gold if correct else (gold + rng.choice((1, -1, 7)) if isinstance(gold, int) else round(gold * 1.5 + 1, 3))
        )
        problem = Problem("math", f"q{i}", str(gold), AnswerType.NUMERIC, "bench/numeric", id=f"n{i}")
        items.append(("Let me finish the computation." + tail + rng.choice(forms)(shown), problem, correct))
    return items


def bench_grading(grade_items: int, mv_items: int) -> None:
    """The grader as the pipeline runs it (math-verify on), against math-verify called as its users call it on
    the same raw strings: ``verify(parse("$gold$"), parse(answer part))``. The numeric share is what the grader
    settles without math-verify; the speed ratio is taken on it, and the verdicts are compared on all items."""
    from math_verify import parse, verify

    from recovery.grading.grade import plan_response

    items = numeric_continuations(grade_items)
    settled_here = [not isinstance(plan_response(t, p), MathVerifyJob) for t, p, _ in items]
    numeric = [item for item, here in zip(items, settled_here) if here]
    start = time.perf_counter()
    fast = [grade_response(text, problem) for text, problem, _ in numeric]
    fast_s = time.perf_counter() - start
    wrong_expectation = sum(g.correct != expected for g, (_, _, expected) in zip(fast, numeric))
    print(
        f"[grading] numeric share settled without math-verify: {len(numeric)} of {grade_items} "
        f"({len(numeric) / grade_items:.0%}); {len(numeric) / fast_s:,.0f}/s; "
        f"{wrong_expectation} verdicts differ from the known truth"
    )

    subset = items[:mv_items]
    ours = [grade_response(text, problem) for text, problem, _ in subset]
    start = time.perf_counter()
    mv = []
    for text, problem, _ in subset:
        gold = parse(f"${problem.answer}$")
        pred = parse(answer_part(text))
        mv.append(bool(gold) and bool(pred) and verify(gold, pred))
    mv_s = time.perf_counter() - start
    disagreements = sum(g.correct != m for g, m in zip(ours, mv))
    mv_numeric_s = mv_s / len(subset)
    print(
        f"[grading] math-verify parse+verify: {len(subset)} continuations in {mv_s:.3f} s → {len(subset) / mv_s:,.0f}/s"
    )
    print(
        f"[grading] speed ratio on the numeric share, grader/math-verify: {mv_numeric_s / (fast_s / len(numeric)):.1f}× "
        f"(target ≥ 20×); verdict disagreements with math-verify on all {len(subset)} items: {disagreements}"
    )


def bench_rss(traces: int, pool: WikipediaPool) -> None:
    baseline = current_rss_mb()
    n1 = sum(1 for _ in stream_chains(traces, pool, seed=1))
    after_1x = current_rss_mb()
    n5 = sum(1 for _ in stream_chains(5 * traces, pool, seed=2))
    after_5x = current_rss_mb()
    print(
        f"[memory]  RSS before {baseline:.0f} MB; after streaming {n1} chains {after_1x:.0f} MB; "
        f"after {n5} more {after_5x:.0f} MB → growth ratio {after_5x / after_1x:.3f} (target ≈ 1.0)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=1000)
    parser.add_argument("--grade-items", type=int, default=5000)
    parser.add_argument("--mv-items", type=int, default=500)
    args = parser.parse_args()
    pool = load_pool()
    print(f"Wikipedia pool: {len(pool.paragraphs)} paragraphs ({pool.source or 'synthetic'})")
    bench_chains(args.traces, pool)
    bench_grading(args.grade_items, args.mv_items)
    bench_rss(max(args.traces // 5, 50), pool)


if __name__ == "__main__":
    main()
