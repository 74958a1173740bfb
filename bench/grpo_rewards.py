"""Benchmark: what each part of the recovery reward adds to GRPO after SFT (correctness only, + doubt, + length).

    python bench/demo_spread.py --grpo                  # first: the SFT models and their choice runs, per seed
    python bench/grpo_rewards.py                        # then: runs/demo-spread/seed-{0,1,2}
    python bench/grpo_rewards.py --demo runs/demo       # or the directory of one `recovery demo --grpo`

For every demo directory (one training seed) and every reward variant, GRPO trains from that directory's SFT
model exactly as the demo's GRPO stage does (same prompts, chosen on the SFT model's own continuations; same
size, learning rate, KL weight and seed), only the combined reward's weights differ:

* ``correctness``: correctness only (1, 0, 0);
* ``+doubt``: correctness and the doubt bonus for a recovery that doubted right after the intervention (1, 0.2, 0);
* ``+length``: the demo's reward, with the length-overhead penalty on correct answers (1, 0.2, 0.3).

Each trained model is measured on the demo's evaluation problems and compared with the SFT model's run (paired
chains, intervals clustered by problem): wrong continuation's change, the pooled change, clean accuracy, CoT
length overhead, and the doubt rate after the intervention among continuations that recovered and those that
did not (`recovery.analysis.doubt_stages`), and wrong continuation's change per timestep. The ``+length``
variant reuses the demo's own GRPO run when the directory holds it. Resumable: a variant whose run is finished
is read back. ``--set KEY=VALUE`` changes the GRPO stage itself (learning rate, clean fraction, prompt choice,
temperature...) for a probe of its settings: ``--variants +length --set learning_rate=3e-5``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

VARIANTS: dict[str, tuple[float, float, float]] = {
    "correctness": (1.0, 0.0, 0.0),
    "+doubt": (1.0, 0.2, 0.0),
    "+length": (1.0, 0.2, 0.3),
}
WRONG_CONTINUATION = "toy/wrong_continuation"
# What a demo directory must hold: the evaluation run, the SFT model, its run and its choice run.
NEEDED = ("before", "model-sft/model.safetensors", "after/summary.json", "train-sft/summary.json")


def overridden(size, settings: list[str]):
    """``size`` with its GRPO stage's fields set from ``KEY=VALUE`` strings (typed as the field's default), and
    a short tag naming them for the run directories (empty without settings)."""
    import hashlib
    from dataclasses import fields, replace

    known = {f.name: f for f in fields(size.grpo)}
    values = {}
    for item in settings:
        key, sep, raw = item.partition("=")
        if not sep or key not in known or key == "reward_weights":
            raise SystemExit(
                f"--set {item!r}: give KEY=VALUE with KEY one of {sorted(set(known) - {'reward_weights'})}"
            )
        current = getattr(size.grpo, key)
        values[key] = (
            tuple(float(v) for v in raw.split(","))
            if current is None or isinstance(current, tuple)
            else type(current)(raw)
        )
    if not values:
        return size, ""
    tag = hashlib.sha1(repr(sorted(values.items())).encode()).hexdigest()[:6]
    return replace(size, grpo=replace(size.grpo, **values)), f"-{tag}"


def variant_run(demo: Path, name: str, weights: tuple[float, float, float], size, seed: int, tag: str = "") -> Path:
    """The benchmark run of the GRPO model trained with ``weights`` (trained and measured unless finished)."""
    from dataclasses import replace

    from recovery.demo import demo_config, measure
    from recovery.demo.report import CHOICE_SFT_RUN, GRPO_RUN
    from recovery.demo.run import tuned_model
    from recovery.demo.training import GRPO_MODEL, SFT_MODEL, GRPOStage, train_grpo
    from recovery.run_dir import is_run_dir

    if not tag and weights == size.grpo.reward_weights and is_run_dir(demo / GRPO_RUN):
        return demo / GRPO_RUN  # the demo's own GRPO stage used these weights
    slug = {"correctness": "c", "+doubt": "cd", "+length": "cdl"}[name] + tag
    model, run = f"{GRPO_MODEL}-{slug}", demo / f"{GRPO_RUN}-{slug}"
    if not is_run_dir(run) or not (demo / model / "model.safetensors").is_file():
        grpo = replace(size.grpo, reward_weights=weights)
        train_grpo(
            GRPOStage(demo, demo / CHOICE_SFT_RUN, demo / "before", demo / SFT_MODEL, grpo, seed, model, size.timesteps)
        )
    config = demo_config(run, seed=0, size=size, model=tuned_model(demo / model, f"tiny-reasoner-grpo-{slug}", size))
    measure(config, progress=False)
    return run


def variant_figures(demo: Path, run: Path) -> dict:
    """The SFT → variant comparison in points, and doubt after the intervention in the variant's run."""
    from recovery.analysis.doubt_curve import analyze_doubt
    from recovery.analysis.doubt_stages import StageDoubt
    from recovery.demo.report import SFT_RUN
    from recovery.report.compare import compute_comparison

    comp = compute_comparison(demo / SFT_RUN, run, ("SFT", "GRPO"))
    wrong = next(r for r in comp.by_intervention if r["intervention"] == WRONG_CONTINUATION)
    per_t = {f"{r['target_t']:g}": r["delta"] for r in comp.by_cell if r["intervention"] == WRONG_CONTINUATION}
    overall = comp.overall[0]
    clean = comp.clean[0]
    doubt = StageDoubt("GRPO", analyze_doubt(run, progress=False))
    return {
        "wrong_continuation": [wrong["delta"], wrong["ci_low"], wrong["ci_high"]],
        "wrong_continuation_by_t": per_t,
        "pooled": [overall["majority_delta"], overall["majority_ci_low"], overall["majority_ci_high"]],
        "clean": clean["delta"],
        "length_sft": overall["length_before"],
        "length": overall["length_after"],
        "doubt_recovered": doubt.rate(recovered=True)[0],
        "doubt_not_recovered": doubt.rate(recovered=False)[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", type=Path, nargs="+", help="demo directories (default: the spread's seeds)")
    parser.add_argument("--spread", type=Path, default=Path("runs/demo-spread"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--quick", action="store_true", help="the demo's --quick size")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument(
        "--set",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="change the demo's GRPO stage (recovery.demo.GRPOSize), e.g. learning_rate=3e-5 clean_fraction=0.25 "
        "success_between=0.125,0.875; the variants' runs get their own directories",
    )
    args = parser.parse_args()

    from recovery.demo import DemoSize

    size, tag = overridden(DemoSize.of(args.quick), args.set)
    demos = args.demo or [args.spread / f"seed-{s}" for s in args.seeds]
    seeds = [None] * len(demos) if args.demo else args.seeds
    missing = [f"{demo}/{name}" for demo in demos for name in NEEDED if not (demo / name).exists()]
    if missing:
        parser.error(f"not a finished `recovery demo --grpo` directory: {missing[0]} is missing")
    figures: dict[str, dict[str, dict]] = {name: {} for name in args.variants}
    for demo, seed in zip(demos, seeds):
        for name in args.variants:
            run = variant_run(demo, name, VARIANTS[name], size, 0 if seed is None else seed, tag)
            figures[name][str(demo)] = f = variant_figures(demo, run)
            w, p = f["wrong_continuation"], f["pooled"]
            print(
                f"{demo} {name:<12} wrong continuation {w[0]:+6.1f} [{w[1]:+.1f}, {w[2]:+.1f}]  pooled {p[0]:+6.1f} "
                f"[{p[1]:+.1f}, {p[2]:+.1f}]  clean {f['clean']:+5.1f}  length {f['length_sft']:+.1f}% → "
                f"{f['length']:+.1f}%  doubt recovered {f['doubt_recovered']:.3f} / not {f['doubt_not_recovered']:.3f}",
                flush=True,
            )
            by_t = ", ".join(f"t={t} {d:+.1f}" for t, d in f["wrong_continuation_by_t"].items())
            print(f"    wrong continuation by timestep: {by_t}", flush=True)
    print(f"\nMean over {len(demos)} demo directories (changes in points, GRPO variant vs the SFT model):")
    print(
        f"{'reward':<12} {'wrong cont.':>11} {'pooled':>7} {'clean':>6} {'length %':>8} {'doubt rec.':>10} {'not rec.':>8}"
    )
    for name, per_demo in figures.items():
        rows = list(per_demo.values())

        def mean(key, index=None, rows=rows):
            return statistics.fmean(r[key][index] if index is not None else r[key] for r in rows)

        print(
            f"{name:<12} {mean('wrong_continuation', 0):+11.1f} {mean('pooled', 0):+7.1f} {mean('clean'):+6.1f} "
            f"{mean('length'):+8.1f} {mean('doubt_recovered'):10.3f} {mean('doubt_not_recovered'):8.3f}"
        )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
