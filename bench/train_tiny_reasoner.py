"""Benchmark: train the tiny reasoner from scratch with its two-stage recipe; print the time and accuracy.

    python bench/train_tiny_reasoner.py                      # both stages → runs/tiny_reasoner{,_layouts}
    python bench/train_tiny_reasoner.py --export             # ... and refresh the shipped checkpoint
    python bench/train_tiny_reasoner.py --probe-only         # probe the shipped checkpoint, no training
    python bench/train_tiny_reasoner.py --probe              # after training, the per-intervention table

Stage 1 (`recipes/tiny-reasoner/base/sft.yaml`) trains from scratch; stage 2 (`sft_layouts.yaml`) continues
it on varied layouts in the self-checking style. Flags the script does not know go to both stages' recipes
(e.g. ``--max_steps 100``). Targets: ≤15 minutes for both stages on a 2-core CPU, ≥99% greedy and ≥95%
sampled accuracy on 200 held-out problems, and ≤2 s to load the checkpoint (in a fresh process, after
library imports). The probe continues the model's own correct traces after each toy intervention at
t ∈ {0.3, 0.5, 0.7}, N = 8 samples (T=0.6, top_p=0.95), and prints majority robustness, per-sample
accuracy and the doubt rate. Wall times depend on what else runs on the machine.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "recipes" / "tiny-reasoner" / "base"
STAGES = (RECIPES / "sft.yaml", RECIPES / "sft_layouts.yaml")
SHIPPED = ROOT / "src" / "recovery" / "toy" / "checkpoint"


def train(recipe: Path, output_dir: str, extra: list[str], *, init_from: str | None, export: bool) -> dict:
    """One stage of the recipe into ``output_dir`` (continuing ``init_from`` when given)."""
    from recovery.toy.train import main, make_parser

    args = ["--config", str(recipe), "--output_dir", output_dir, "--disable_tqdm", "true", *extra]
    if init_from:
        args += ["--init_from", init_from]
    if export:
        args += ["--export_dir", str(SHIPPED)]
    data_args, training_args, model_args = make_parser().parse_args_and_config(args=args)
    start = time.perf_counter()
    metrics = main(data_args, training_args, model_args)
    metrics["wall_seconds"] = round(time.perf_counter() - start, 1)
    return metrics


def train_recipe(output_dir: str, extra: list[str], export: bool) -> dict:
    """Both stages; stage 2 starts from stage 1's output. Returns stage 2's metrics with the total time."""
    stage_dirs = (output_dir, f"{output_dir}_layouts")
    stage_one = train(STAGES[0], stage_dirs[0], extra, init_from=None, export=False)
    stage_two = train(STAGES[1], stage_dirs[1], extra, init_from=stage_dirs[0], export=export)
    stage_two["stage_seconds"] = [stage_one["wall_seconds"], stage_two["wall_seconds"]]
    stage_two["recipe_seconds"] = round(sum(stage_two["stage_seconds"]), 1)
    stage_two["output_dir"] = stage_dirs[1]
    return stage_two


LOAD_SCRIPT = """
import time
t0 = time.perf_counter()
import torch, transformers.models.llama.modeling_llama, transformers.tokenization_utils_tokenizers
t1 = time.perf_counter()
from recovery.toy import load_tiny_reasoner
load_tiny_reasoner({path!r})
t2 = time.perf_counter()
print(f"{{t1 - t0:.2f}} {{t2 - t1:.2f}}")
"""


def measure_load(checkpoint: str | None) -> tuple[float, float]:
    """(library import seconds, checkpoint load seconds) in a fresh process; the ≤2 s target is the
    second: `load_tiny_reasoner` once torch and transformers are imported."""
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", LOAD_SCRIPT.format(path=checkpoint)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    imports, load = (float(x) for x in out.stdout.split()[-2:])
    return imports, load


def run_probe(checkpoint: str | None, n_problems: int, n: int, seed: int) -> str:
    import torch

    from recovery.toy import TOY_NAMES, heldout_problems, load_tiny_reasoner
    from recovery.toy.probe import format_rows, original_traces, probe

    torch.set_num_threads(2)
    model, tok = load_tiny_reasoner(checkpoint)
    start = time.perf_counter()
    traces = original_traces(model, tok, heldout_problems(n_problems))
    rows = probe(model, tok, traces, ("none", *TOY_NAMES), (0.3, 0.5, 0.7), n=n, seed=seed)
    table = format_rows(rows)
    print(
        f"\n{len(traces)}/{n_problems} held-out problems answered correctly (greedy) and probed; "
        f"N={n}, T=0.6, top_p=0.95; {time.perf_counter() - start:.0f} s\n"
    )
    print(table)
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", default=str(ROOT / "runs" / "tiny_reasoner"))
    parser.add_argument("--export", action="store_true", help="copy the trained checkpoint into the package")
    parser.add_argument("--probe", action="store_true", help="measure the interventions after training")
    parser.add_argument("--probe-only", action="store_true", help="measure a checkpoint without training")
    parser.add_argument("--checkpoint", default=None, help="checkpoint for --probe-only (default: shipped)")
    parser.add_argument("--probe-problems", type=int, default=50)
    parser.add_argument("--probe-samples", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args, extra = parser.parse_known_args(argv)  # unknown flags go to both stages (e.g. --max_steps 100)
    # Before torch is imported (see recovery.toy.train): sleeping, not spinning, OpenMP threads.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    checkpoint = args.checkpoint
    if not args.probe_only:
        metrics = train_recipe(args.output_dir, extra, args.export)
        checkpoint = metrics["output_dir"]
        one, two = metrics["stage_seconds"]
        print(
            f"\ntraining: {metrics['recipe_seconds']:.0f} s for both stages (stage 1 {one:.0f} s, stage 2 "
            f"{two:.0f} s); held-out ({metrics.get('eval_problems', 0)} problems): "
            f"greedy {metrics.get('greedy_accuracy', float('nan')):.3f}, "
            f"sampled {metrics.get('sampled_accuracy', float('nan')):.3f}"
        )
        print(json.dumps({k: v for k, v in metrics.items() if k != "data_args"}))
    imports, load = measure_load(checkpoint)
    print(f"loading the checkpoint: {load:.2f} s (after {imports:.2f} s of torch/transformers imports)")
    if args.probe or args.probe_only:
        run_probe(checkpoint, args.probe_problems, args.probe_samples, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
