"""Correctness-reward throughput: `recovery.rewards.CorrectnessReward` against TRL's ``accuracy_reward``.

Both score the same deterministic completions (default 10,000; ~70 % numeric answers, ~30 % LaTeX
expressions), written like continuations of an intervened R1-style trace: 1–4k characters of reasoning
with inline LaTeX, ``</think>``, then the answer in one of several forms (see `CASES`). Completions are
conversational (``[{"role": "assistant", "content": ...}]``), as ``accuracy_reward`` requires, and both
functions are called the way GRPOTrainer calls them, in batches (``--batch``).

TRL's ``accuracy_reward`` gets the gold answer as ``solution`` wrapped in ``$…$`` (its math-verify
``parse`` does not read bare LaTeX: ``\\frac{\\sqrt{3}}{2}`` alone parses to nothing and the row would
be skipped); ours gets ``answer`` / ``answer_type`` / ``domain`` columns. Our math-verify workers are
started before timing (their one-off start is printed separately).

Prints items/s for both on the numeric share, the LaTeX share and overall, the speed ratio (target
≥10× on the numeric share), and verdict agreement (count and %) with every disagreement class counted
and explained.

Usage: python bench/rewards.py [--n 10000] [--seed 0] [--batch 256] [--numeric-share 0.7] [--timeout 1]
"""

from __future__ import annotations

import argparse
import logging
import random
import time
from collections import Counter
from dataclasses import dataclass
from math import gcd

from recovery.rewards import CorrectnessReward

# ------------------------------------------------------------------------------------------- test data

_OPENERS = ("Okay, so", "Let me", "Now", "Hmm, so", "Wait, let me double-check:", "Alright,", "So", "First,")
_WORDS = (
    "the value of the expression",
    "each term in the sum",
    "both sides of the equation",
    "the remaining factor",
    "the number of cases",
    "the common denominator",
    "the derivative",
)


@dataclass(frozen=True, slots=True)
class Item:
    case: str  # which answer form (see CASES)
    share: str  # "numeric" or "latex"
    gold: str
    answer_type: str
    completion: str


def _reasoning(rng: random.Random) -> str:
    steps = []
    for _ in range(rng.randint(10, 35)):
        x, y = rng.randint(2, 500), rng.randint(2, 500)
        opener, words = rng.choice(_OPENERS), rng.choice(_WORDS)
        if rng.random() < 0.5:
            steps.append(f"{opener} {words}: \\( {x} + {y} = {x + y} \\), so that part is {x + y}.")
        else:
            steps.append(f"{opener} {words}, which gives {x} \\times {y} = {x * y}; keep it for later.")
    return "\n\n" + "\n\n".join(steps) + "\n"


def _numeric_gold(rng: random.Random) -> tuple[str, str, str]:
    """(gold, a correct rendering, kind) for a numeric answer."""
    kind = rng.choice(("int", "int", "big", "neg", "decimal", "fraction"))
    if kind == "int":
        v = rng.randint(0, 999)
        return str(v), str(v), kind
    if kind == "big":
        v = rng.randint(1000, 10**6)
        return str(v), str(v), kind
    if kind == "neg":
        v = -rng.randint(1, 999)
        return str(v), str(v), kind
    if kind == "decimal":
        v = rng.randint(1, 9999) / 100
        return f"{v:g}", f"{v:g}", kind
    b = rng.randint(2, 30)
    a = rng.randint(1, b - 1)
    g = gcd(a, b)
    a, b = a // g, b // g
    return f"\\frac{{{a}}}{{{b}}}", f"\\frac{{{a}}}{{{b}}}", kind


def _latex_gold(rng: random.Random) -> tuple[str, str, str, str]:
    """(gold, an equivalent but different rendering, a wrong one, template) for an expression answer."""
    a, b, c = rng.randint(2, 9), rng.choice((2, 3, 5, 6, 7, 10, 11, 13)), rng.randint(2, 9)
    template = rng.choice(("sqrt_frac", "coef_sqrt", "pi_frac", "poly"))
    if template == "sqrt_frac":
        return (
            f"\\frac{{\\sqrt{{{b}}}}}{{{c}}}",
            f"\\frac{{1}}{{{c}}}\\sqrt{{{b}}}",
            f"\\frac{{\\sqrt{{{b + 1}}}}}{{{c}}}",
            template,
        )
    if template == "coef_sqrt":
        return f"{a}\\sqrt{{{b}}}", f"\\sqrt{{{a * a * b}}}", f"{a + 1}\\sqrt{{{b}}}", template
    if template == "pi_frac":
        return f"\\frac{{{a}\\pi}}{{{c}}}", f"\\frac{{{a}}}{{{c}}}\\pi", f"\\frac{{{a + 1}\\pi}}{{{c}}}", template
    return f"x^2 + {a + c}x + {a * c}", f"(x + {a})(x + {c})", f"x^2 + {a + c + 1}x + {a * c}", template


#: Answer forms: name → (share, weight within the share, what the completion looks like).
CASES: dict[str, tuple[str, int, str]] = {
    "boxed_correct": ("numeric", 30, r"</think> … \boxed{gold}"),
    "boxed_wrong": ("numeric", 20, r"</think> … \boxed{gold ± k}"),
    "boxed_commas": ("numeric", 5, r"\boxed{12,345} (thousands separators)"),
    "fraction_for_decimal": (
        "numeric",
        5,
        r"\boxed{\frac{a}{b}} for a decimal gold (or the decimal for a fraction gold)",
    ),
    "percent": ("numeric", 4, r"\boxed{25\%} for gold 0.25"),
    "units_text": ("numeric", 4, r"\boxed{12 \text{ cm}}"),
    "phrase_no_box": ("numeric", 10, "</think> The final answer is 12. (no box)"),
    "unclosed_boxed": ("numeric", 8, r"\boxed{gold} inside the reasoning, never closed"),
    "no_answer": ("numeric", 6, "</think> with no answer after it"),
    "boxed_in_reasoning_then_other": ("numeric", 8, r"\boxed{wrong} in the reasoning, </think>, \boxed{gold}"),
    "expr_identical": ("latex", 30, r"\boxed{gold} written like the gold (\dfrac allowed)"),
    "expr_equivalent": ("latex", 35, r"\boxed{equivalent form} (needs a symbolic check)"),
    "expr_wrong": ("latex", 25, r"\boxed{a different expression}"),
    "expr_unclosed": ("latex", 10, r"\boxed{equivalent} in a reasoning that never closes"),
}

#: Why the two rewards disagree, by our verdict or by case: the explanation printed beside each class of
#: disagreement this bench counts.
NOTES: dict[str, str] = {
    "timeout": "our math-verify call hit its hard per-item limit (--timeout, 1 s by default, as the reward) "
    "while the machine was busy; accuracy_reward has no outer limit. With --timeout 3 these agree.",
    "phrase_no_box": "ours reads 'The final answer is X' (core extraction rule 2); accuracy_reward parses with "
    "try_extract_without_anchor=False and finds no LaTeX anchor in plain text → 0.",
    "unclosed_boxed": "the completion never closed </think>: ours gives 0 (no final answer — by design, like TRL's "
    "own reasoning_accuracy_reward); accuracy_reward parses the whole text and credits the box.",
    "expr_unclosed": "as unclosed_boxed, for expressions.",
}


def make_items(n: int, seed: int = 0, numeric_share: float = 0.7) -> list[Item]:
    """``n`` items, item ``i`` drawn from ``Random(seed * 1_000_003 + i)`` — the same on every run."""
    numeric = [(k, w) for k, (s, w, _) in CASES.items() if s == "numeric"]
    latex = [(k, w) for k, (s, w, _) in CASES.items() if s == "latex"]
    items = []
    for i in range(n):
        rng = random.Random(seed * 1_000_003 + i)
        reasoning = _reasoning(rng)
        if rng.random() < numeric_share:
            case = rng.choices([k for k, _ in numeric], [w for _, w in numeric])[0]
            gold, shown, kind = _numeric_gold(rng)
            if case == "boxed_correct":
                text = f"{reasoning}</think>\n\nTherefore the final answer is \\(\\boxed{{{shown}}}\\)."
            elif case == "boxed_wrong":
                wrong = (
                    str(int(float(gold)) + rng.choice((-3, -1, 1, 2, 10))) if kind != "fraction" else "\\frac{1}{31}"
                )
                text = f"{reasoning}</think>\n\nSo the answer is $\\boxed{{{wrong}}}$."
            elif case == "boxed_commas":
                v = rng.randint(1000, 10**7)
                gold, text = str(v), f"{reasoning}</think>\n\nThe total is $\\boxed{{{v:,}}}$."
            elif case == "fraction_for_decimal":
                b = rng.choice((2, 4, 5, 8, 20, 25))
                a = rng.randint(1, 3 * b)
                gold = f"{a / b:g}"
                text = f"{reasoning}</think>\n\nHence $\\boxed{{\\frac{{{a}}}{{{b}}}}}$."
            elif case == "percent":
                p = rng.randint(1, 99)
                gold, text = f"{p / 100:g}", f"{reasoning}</think>\n\nThe probability is $\\boxed{{{p}\\%}}$."
            elif case == "units_text":
                v = rng.randint(2, 500)
                gold, text = str(v), f"{reasoning}</think>\n\nThe length is $\\boxed{{{v} \\text{{ cm}}}}$."
            elif case == "phrase_no_box":
                text = f"{reasoning}</think>\n\nThe final answer is {shown}."
            elif case == "unclosed_boxed":
                text = f"{reasoning}So we get \\(\\boxed{{{shown}}}\\). Let me make sure of that.\n\nThe sum"
            elif case == "no_answer":
                text = f"{reasoning}</think>\n\nI could not finish the computation."
            else:  # boxed_in_reasoning_then_other
                text = (
                    f"\n\nFirst guess: $\\boxed{{{rng.randint(1000, 2000)}}}$. Wait, no.{reasoning}</think>\n\n"
                    f"Final: $\\boxed{{{shown}}}$."
                )
            items.append(Item(case, "numeric", gold, "numeric", text))
        else:
            case = rng.choices([k for k, _ in latex], [w for _, w in latex])[0]
            gold, equivalent, wrong, _ = _latex_gold(rng)
            if case == "expr_identical":
                shown = gold.replace("\\frac", "\\dfrac") if rng.random() < 0.3 else gold
                text = f"{reasoning}</think>\n\nThe answer is $\\boxed{{{shown}}}$."
            elif case == "expr_equivalent":
                text = f"{reasoning}</think>\n\nThe answer is $\\boxed{{{equivalent}}}$."
            elif case == "expr_wrong":
                text = f"{reasoning}</think>\n\nThe answer is $\\boxed{{{wrong}}}$."
            else:
                text = f"{reasoning}Thus $\\boxed{{{equivalent}}}$, I think; now check the other"
            items.append(Item(case, "latex", gold, "expression", text))
    return items


# ------------------------------------------------------------------------------------------------ timing


def _batches(items: list[Item], size: int):
    for start in range(0, len(items), size):
        yield items[start : start + size]


def run_ours(reward: CorrectnessReward, items: list[Item], batch: int) -> tuple[list, list, float]:
    out: list = []
    verdicts: list = []
    log_extra = lambda column, values: verdicts.extend(values) if column.endswith("/verdict") else None
    started = time.perf_counter()
    for chunk in _batches(items, batch):
        out.extend(
            reward(
                prompts=[[{"role": "user", "content": "q"}]] * len(chunk),
                completions=[[{"role": "assistant", "content": it.completion}] for it in chunk],
                completion_ids=[[0]] * len(chunk),
                answer=[it.gold for it in chunk],
                answer_type=[it.answer_type for it in chunk],
                domain=["math"] * len(chunk),
                log_extra=log_extra,
            )
        )
    return out, verdicts, time.perf_counter() - started


def run_trl(items: list[Item], batch: int) -> tuple[list, float]:
    from trl.rewards import accuracy_reward

    out: list = []
    started = time.perf_counter()
    for chunk in _batches(items, batch):
        out.extend(
            accuracy_reward(
                completions=[[{"role": "assistant", "content": it.completion}] for it in chunk],
                solution=[f"${it.gold}$" for it in chunk],
            )
        )
    return out, time.perf_counter() - started


def _label(reward) -> str:
    return "None" if reward is None else ("1" if reward >= 0.5 else "0")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--numeric-share", type=float, default=0.7)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=1.0, help="our hard per-item math-verify limit (s)")
    args = parser.parse_args()
    logging.getLogger("math_verify").setLevel(logging.ERROR)

    items = make_items(args.n, args.seed, args.numeric_share)
    numeric = [it for it in items if it.share == "numeric"]
    latex = [it for it in items if it.share == "latex"]
    mean_chars = sum(len(it.completion) for it in items) / max(1, len(items))
    print(
        f"{len(items):,} completions (seed {args.seed}): {len(numeric):,} numeric, {len(latex):,} LaTeX; "
        f"mean {mean_chars:,.0f} characters; batches of {args.batch}"
    )

    reward = CorrectnessReward(workers=args.workers, timeout_s=args.timeout)
    started = time.perf_counter()
    reward(
        completions=["</think>\\boxed{\\sqrt{3}/2}"],
        answer=["\\frac{\\sqrt{3}}{2}"],
        answer_type=["expression"],
        domain=["math"],
    )  # start the math-verify workers
    print(f"math-verify workers started in {time.perf_counter() - started:.2f} s (once per process; not timed below)")

    rows = []
    results: dict[str, dict[str, list]] = {}
    for share, subset in (("numeric", numeric), ("latex", latex)):
        if not subset:
            continue
        ours, verdicts, t_ours = run_ours(reward, subset, args.batch)
        trl, t_trl = run_trl(subset, args.batch)
        results[share] = {"ours": ours, "trl": trl, "verdicts": verdicts}
        rows.append((share, len(subset), len(subset) / t_ours, len(subset) / t_trl, t_trl / t_ours))
    total_ours = sum(n / r for _, n, r, _, _ in rows)
    total_trl = sum(n / r for _, n, _, r, _ in rows)
    rows.append(("all", len(items), len(items) / total_ours, len(items) / total_trl, total_trl / total_ours))
    reward.close()

    print()
    print(f"{'share':<8} {'items':>7} {'ours items/s':>14} {'TRL items/s':>13} {'speed-up':>9}")
    for share, n, r_ours, r_trl, ratio in rows:
        print(f"{share:<8} {n:>7,} {r_ours:>14,.0f} {r_trl:>13,.0f} {ratio:>8.1f}×")
    numeric_ratio = rows[0][4] if rows and rows[0][0] == "numeric" else float("nan")
    print(f"numeric share: {numeric_ratio:.1f}× faster (target ≥10×: {'met' if numeric_ratio >= 10 else 'NOT met'})")

    # -- agreement ---------------------------------------------------------------------------------------
    by_item = {}
    for share, subset in (("numeric", numeric), ("latex", latex)):
        if share in results:
            r = results[share]
            for it, o, t, v in zip(subset, r["ours"], r["trl"], r["verdicts"]):
                by_item[id(it)] = (it, o, t, v)
    agree = sum(_label(o) == _label(t) for _, o, t, _ in by_item.values())
    print()
    print(f"verdict agreement: {agree:,} / {len(by_item):,} ({100 * agree / max(1, len(by_item)):.2f} %)")
    classes = Counter((it.case, _label(o), _label(t), v) for it, o, t, v in by_item.values() if _label(o) != _label(t))
    if classes:
        print(f"{'case':<30} {'ours':>4} {'TRL':>4} {'our verdict':<12} {'count':>6}  note")
        for (case, o, t, v), count in sorted(classes.items(), key=lambda kv: -kv[1]):
            note = NOTES.get(v, NOTES.get(case, "(no note yet)"))
            print(f"{case:<30} {o:>4} {t:>4} {v:<12} {count:>6}  {note}")
    unexplained = sum(c for (case, _, _, v), c in classes.items() if v not in NOTES and case not in NOTES)
    print(f"disagreements without an explanation above: {unexplained}")
    per_case = Counter(it.case for it, _, _, _ in by_item.values())
    print()
    print("items per case: " + ", ".join(f"{k} {v}" for k, v in sorted(per_case.items())))


if __name__ == "__main__":
    main()
