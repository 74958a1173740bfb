"""Grading verdicts idle vs under CPU load: timeouts, verdict changes and the ratio of wall times.

The same batch of easy symbolic items (each needs math-verify; none takes more than a few milliseconds
of CPU) is graded twice by `recovery.grading.Grader`: once on the machine as it is, once while
``--busy`` busy-loop processes compete for the CPUs. A grader whose budget is wall-clock time turns
easy items into timeouts under load; one that budgets CPU time should give the same verdicts in both
runs. The workers are started and warmed before each run's clock starts, as a long-lived grader's are.

Prints, for each run: items, timeouts, verdict counts and wall time; then the verdicts that differ
between the runs, the timeout counts idle vs loaded, the loaded/idle wall-time ratio and the wall time
per item. No assertions: the figures are for reading (and for comparing two versions of the code).

Usage: python bench/grading_under_load.py [--n 400] [--busy 4] [--workers 2] [--timeout 1.0]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from recovery.grading import Grader


def easy_items(n: int) -> list[tuple[str, str, str]]:
    """``n`` distinct (predicted, gold, "expression") triples that the fast paths leave to math-verify."""
    items: list[tuple[str, str, str]] = []
    i = 0
    while len(items) < n:
        a, b, c = 2 + i % 7, 3 + i % 11, (2, 3, 5, 6, 7)[i % 5]
        form = i % 5
        if form == 0:  # (a/b)√c written two ways
            items.append((f"\\frac{{{a}}}{{{b}}}\\sqrt{{{c}}}", f"\\frac{{{a}\\sqrt{{{c}}}}}{{{b}}}", "expression"))
        elif form == 1:  # k√m against √(k²m), wrong every other time
            k = a + i // 35
            items.append((f"{k}\\sqrt{{{c}}}", f"\\sqrt{{{k * k * c + (i // 5) % 2}}}", "expression"))
        elif form == 2:  # an expanded square
            s = a + i // 35
            items.append((f"x^2+{2 * s}x+{s * s}", f"(x+{s})^2", "expression"))
        elif form == 3:  # an interval with a fraction against its decimal form
            lo = i // 5
            items.append((f"[{lo}, \\frac{{{2 * b + 1}}}{{2}})", f"[{lo}, {b + 0.5})", "expression"))
        else:  # a sum of fractions
            items.append(
                (
                    f"\\frac{{1}}{{{a}}}+\\frac{{1}}{{{b + i // 55}}}",
                    f"\\frac{{{a + b + i // 55}}}{{{a * (b + i // 55)}}}",
                    "expression",
                )
            )
        i += 1
    return items


@contextmanager
def busy_loops(count: int) -> Iterator[list[subprocess.Popen]]:
    """``count`` processes spinning on the CPU for the duration of the block (always killed after it)."""
    loops: list[subprocess.Popen] = []
    try:
        for _ in range(count):
            loops.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
        time.sleep(1.0)  # let the scheduler see them
        yield loops
    finally:
        for p in loops:
            p.kill()
        for p in loops:
            p.wait()


def grade(items: list[tuple[str, str, str]], workers: int, timeout_s: float) -> tuple[list, float]:
    with Grader(workers=workers, timeout_s=timeout_s, cache_size=0) as grader:
        grader.start()
        start = time.perf_counter()
        grades = grader.grade_answers(items)
        return grades, time.perf_counter() - start


def summary(name: str, grades: list, wall: float) -> int:
    counts = Counter(g.verdict.value for g in grades)
    print(
        f"[{name}] {len(grades)} items, {counts.get('timeout', 0)} timeouts, verdicts {dict(counts)}, "
        f"wall {wall:.2f} s ({1000 * wall / len(grades):.1f} ms/item), load average {os.getloadavg()[0]:.1f}"
    )
    return counts.get("timeout", 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--busy", type=int, default=4, help="busy-loop processes during the loaded run")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=1.0, help="Grader timeout_s (CorrectnessReward's default)")
    args = parser.parse_args()

    items = easy_items(args.n)
    idle, idle_wall = grade(items, args.workers, args.timeout)
    idle_timeouts = summary("idle", idle, idle_wall)
    with busy_loops(args.busy):
        loaded, loaded_wall = grade(items, args.workers, args.timeout)
        loaded_timeouts = summary(f"loaded, {args.busy} busy loops", loaded, loaded_wall)
    changed = [(item, a, b) for item, a, b in zip(items, idle, loaded) if a.verdict != b.verdict]
    print(f"verdicts that differ idle vs loaded: {len(changed)} of {len(items)}")
    for (pred, gold, _), a, b in changed[:5]:
        print(f"  {pred!r} vs {gold!r}: idle {a.verdict.value} ({a.detail}); loaded {b.verdict.value} ({b.detail})")
    print(f"timeouts idle vs loaded: {idle_timeouts} vs {loaded_timeouts}")
    print(f"wall time loaded/idle: {loaded_wall / idle_wall:.2f}×")
    if loaded and loaded[0].detail:
        print(f"a loaded verdict's detail: {loaded[0].detail!r}")


if __name__ == "__main__":
    main()
