"""Benchmark: the spread of the full demo over training seeds.

    python bench/demo_spread.py                        # training seeds 0 1 2 → runs/demo-spread/seed-<s>
    python bench/demo_spread.py --seeds 0 1 2 3 --quick
    python bench/demo_spread.py --grpo                 # SFT then GRPO: also what GRPO adds beyond SFT
    python bench/demo_spread.py --grpo-only            # GRPO alone from the base model

One run of the demo is one draw: CPU training is not bit-identical across processors, and a training seed
moves the SFT data order and initialisation. This script measures the base model once (its benchmark run,
clean-accuracy run and training-data runs are shared: ``seed`` fixes problems, interventions and sampling),
then trains and measures again once per training seed (`recovery.demo.run_demo`'s ``train_seed``), and
prints per intervention and pooled the mean and the range of the paired change in majority robustness, the
number of seeds on which an intervention's gain falls under +20 points, and the clean-accuracy change. Each
seed's own intervals (clustered by problem, `recovery.metrics.clustered`) are printed beside it. Resumable:
a seed whose runs are finished is read back, not redone. ``--json`` writes the figures for the README.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
from pathlib import Path

SHARED_RUNS = ("before", "before-clean", "train-own", "train-teacher")
THRESHOLD = 20.0  # points: the gain the demo aims for on every intervention
GRPO_TARGET = 15.0  # points of wrong continuation GRPO adds beyond SFT
GRPO_ONLY_TARGET = 20.0  # pooled points GRPO alone adds over the base model
WRONG_CONTINUATION = "toy/wrong_continuation"


def seed_dir(out: Path, seed: int, first: Path | None) -> Path:
    """``out/seed-<seed>``, holding copies of the base model's runs of the first seed (resumed, not redone)."""
    target = out / f"seed-{seed}"
    if first is not None and first != target:
        for name in SHARED_RUNS:
            if (first / name).is_dir() and not (target / name).exists():
                shutil.copytree(first / name, target / name)
    return target


def figures(result) -> dict:
    """The comparison's changes in points: per intervention, pooled, per category, and clean accuracy."""
    comp = result.comparison
    overall = comp.overall[0]
    clean = (comp.clean_runs or comp.clean)[0]
    return {
        "interventions": {
            r["intervention"]: {"delta": r["delta"], "ci": [r["ci_low"], r["ci_high"]], "pairs": r["pairs"]}
            for r in comp.by_intervention
        },
        "categories": {
            r["category"]: {"delta": r["delta"], "ci": [r["ci_low"], r["ci_high"]]} for r in comp.by_category
        },
        "pooled": {
            "delta": overall["majority_delta"],
            "ci": [overall["majority_ci_low"], overall["majority_ci_high"]],
            "pairs": overall["majority_pairs"],
            "problems": overall["majority_problems"],
            "interval": overall["majority_interval"],
        },
        "clean": {"delta": clean["delta"], "ci": [clean["ci_low"], clean["ci_high"]], "problems": clean["pairs"]},
        "length": {"before": overall["length_before"], "after": overall["length_after"]},
    }


def grpo_figures(comp) -> dict:
    """What GRPO adds beyond SFT (the SFT → SFT+GRPO comparison), in points, and whether it meets the target."""
    wrong = next(r for r in comp.by_intervention if r["intervention"] == WRONG_CONTINUATION)
    overall = comp.overall[0]
    clean = (comp.clean_runs or comp.clean)[0]
    out = {
        "wrong_continuation": {"delta": wrong["delta"], "ci": [wrong["ci_low"], wrong["ci_high"]]},
        "pooled": {"delta": overall["majority_delta"], "ci": [overall["majority_ci_low"], overall["majority_ci_high"]]},
        "clean": {"delta": clean["delta"], "ci": [clean["ci_low"], clean["ci_high"]]},
        "length": {"sft": overall["length_before"], "grpo": overall["length_after"]},
    }
    out["meets_target"] = bool(
        wrong["delta"] >= GRPO_TARGET
        and wrong["ci_low"] > 0
        and clean["delta"] >= -1.0
        and overall["majority_delta"] >= 0
        and overall["length_after"] <= overall["length_before"] + 10.0
    )
    return out


def grpo_line(g: dict) -> str:
    w, p, c, n = g["wrong_continuation"], g["pooled"], g["clean"], g["length"]
    return (
        f"  GRPO beyond SFT: wrong continuation {w['delta']:+.1f} [{w['ci'][0]:+.1f}, {w['ci'][1]:+.1f}], "
        f"pooled {p['delta']:+.1f} [{p['ci'][0]:+.1f}, {p['ci'][1]:+.1f}], clean {c['delta']:+.1f}, "
        f"length overhead {n['sft']:+.1f}% → {n['grpo']:+.1f}%; target {'met' if g['meets_target'] else 'not met'}"
    )


def spread_of(values: list[float]) -> dict:
    return {"mean": statistics.fmean(values), "min": min(values), "max": max(values)}


def spread(per_seed: dict[int, dict]) -> dict:
    """Mean, min and max of each change over the seeds, and the seeds where an intervention gains < +20."""

    stats = spread_of
    seeds = sorted(per_seed)
    names = list(per_seed[seeds[0]]["interventions"])
    out = {"seeds": seeds, "interventions": {}, "categories": {}}
    for name in names:
        values = [per_seed[s]["interventions"][name]["delta"] for s in seeds]
        out["interventions"][name] = {
            **stats(values),
            "below_threshold": [s for s, v in zip(seeds, values) if v < THRESHOLD],
        }
    for cat in per_seed[seeds[0]]["categories"]:
        out["categories"][cat] = stats([per_seed[s]["categories"][cat]["delta"] for s in seeds])
    out["pooled"] = stats([per_seed[s]["pooled"]["delta"] for s in seeds])
    out["clean"] = stats([per_seed[s]["clean"]["delta"] for s in seeds])
    out["length_after"] = stats([per_seed[s]["length"]["after"] for s in seeds])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/demo-spread"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--quick", action="store_true", help="the demo's --quick size")
    parser.add_argument("--json", type=Path, help="also write the per-seed figures and their spread here")
    training = parser.add_mutually_exclusive_group()
    training.add_argument("--grpo", action="store_true", help="SFT then GRPO (recovery demo --grpo)")
    training.add_argument("--grpo-only", action="store_true", help="GRPO alone (recovery demo --grpo-only)")
    args = parser.parse_args()
    if len(args.seeds) < 2:
        parser.error("--seeds: a spread needs at least two training seeds")

    from recovery.demo import run_demo

    per_seed: dict[int, dict] = {}
    first = None
    for seed in args.seeds:
        target = seed_dir(args.out, seed, first)
        start = time.perf_counter()
        result = run_demo(
            target, quick=args.quick, progress=False, train_seed=seed, grpo=args.grpo, grpo_only=args.grpo_only
        )
        first = first or target
        per_seed[seed] = {**figures(result), "seconds": round(time.perf_counter() - start, 1)}
        p = per_seed[seed]["pooled"]
        print(
            f"training seed {seed}: pooled {p['delta']:+.1f} [{p['ci'][0]:+.1f}, {p['ci'][1]:+.1f}] "
            f"({p['pairs']} chains of {p['problems']} problems, {p['interval']}); "
            f"{per_seed[seed]['seconds']:.0f} s",
            flush=True,
        )
        if result.grpo_comparison is not None:
            per_seed[seed]["grpo"] = grpo_figures(result.grpo_comparison)
            print(grpo_line(per_seed[seed]["grpo"]), flush=True)
        if args.grpo_only:
            per_seed[seed]["meets_target"] = p["delta"] >= GRPO_ONLY_TARGET and p["ci"][0] > 0
    summary = spread(per_seed)
    print(f"\nPaired change in majority robustness over training seeds {summary['seeds']} (points):")
    print(f"{'intervention':<24} {'mean':>7} {'min':>7} {'max':>7}  seeds under +{THRESHOLD:.0f}")
    for name, s in summary["interventions"].items():
        under = ", ".join(map(str, s["below_threshold"])) or "none"
        print(f"{name:<24} {s['mean']:+7.1f} {s['min']:+7.1f} {s['max']:+7.1f}  {under}")
    for cat, s in summary["categories"].items():
        print(f"{'category ' + cat:<24} {s['mean']:+7.1f} {s['min']:+7.1f} {s['max']:+7.1f}")
    for label, key in (("pooled", "pooled"), ("clean accuracy", "clean")):
        s = summary[key]
        print(f"{label:<24} {s['mean']:+7.1f} {s['min']:+7.1f} {s['max']:+7.1f}")
    s = summary["length_after"]
    print(f"{'length overhead after %':<24} {s['mean']:+7.1f} {s['min']:+7.1f} {s['max']:+7.1f}")
    if args.grpo:
        met = [seed for seed in summary["seeds"] if per_seed[seed]["grpo"]["meets_target"]]
        wrong = [per_seed[seed]["grpo"]["wrong_continuation"]["delta"] for seed in summary["seeds"]]
        summary["grpo"] = {"wrong_continuation": spread_of(wrong), "seeds_meeting_target": met}
        print(
            f"GRPO beyond SFT, wrong continuation: mean {statistics.fmean(wrong):+.1f} (min {min(wrong):+.1f}, "
            f"max {max(wrong):+.1f}); target (+{GRPO_TARGET:.0f}, interval above 0, clean, pooled and length "
            f"kept) met on seeds {met or 'none'} of {summary['seeds']}"
        )
    if args.grpo_only:
        met = [seed for seed in summary["seeds"] if per_seed[seed]["meets_target"]]
        summary["seeds_meeting_target"] = met
        print(f"GRPO alone: pooled ≥ +{GRPO_ONLY_TARGET:.0f} with the interval above 0 on seeds {met or 'none'}")
    if args.json:
        args.json.write_text(json.dumps({"per_seed": per_seed, "spread": summary}, indent=2) + "\n")


if __name__ == "__main__":
    main()
