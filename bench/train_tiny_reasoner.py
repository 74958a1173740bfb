"""Benchmark: train the tiny reasoner from scratch with the recipe; print the time and its accuracy.

    python bench/train_tiny_reasoner.py                      # full recipe → runs/tiny_reasoner
    python bench/train_tiny_reasoner.py --export             # ... and refresh the shipped checkpoint
    python bench/train_tiny_reasoner.py --probe-only         # probe the shipped checkpoint, no training
    python bench/train_tiny_reasoner.py --probe              # after training, the per-intervention table

Targets: ≤15 minutes of training on a 2-core CPU, ≥90% greedy and ≥80% sampled accuracy on the held-out
set, and ≤2 s to load the checkpoint (in a fresh process, after library imports). The probe continues the
model's own correct traces after each toy intervention at t ∈ {0.3, 0.5, 0.7}, N = 8 samples (T=0.6, top_p=0.95), and prints majority robustness, per-sample
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
RECIPE = ROOT / "recipes" / "tiny-reasoner" / "base" / "sft.yaml"
SHIPPED = ROOT / "src" / "recovery" / "toy" / "checkpoint"


def train(recipe: Path, output_dir: str, export: bool, extra: list[str]) -> dict:
    from recovery.toy.train import main, make_parser

    args = ["--config", str(recipe), "--output_dir", output_dir, "--disable_tqdm", "true", *extra]
    if export:
        args += ["--export_dir", str(SHIPPED)]
    data_args, training_args, model_args = make_parser().parse_args_and_config(args=args)
    start = time.perf_counter()
    metrics = main(data_args, training_args, model_args)
    metrics["wall_seconds"] = round(time.perf_counter() - start, 1)
    return metrics


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
    parser.add_argument("--recipe", type=Path, default=RECIPE)
    parser.add_argument("--output-dir", default=str(ROOT / "runs" / "tiny_reasoner"))
    parser.add_argument("--export", action="store_true", help="copy the trained checkpoint into the package")
    parser.add_argument("--probe", action="store_true", help="measure the interventions after training")
    parser.add_argument("--probe-only", action="store_true", help="measure a checkpoint without training")
    parser.add_argument("--checkpoint", default=None, help="checkpoint for --probe-only (default: shipped)")
    parser.add_argument("--probe-problems", type=int, default=50)
    parser.add_argument("--probe-samples", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args, extra = parser.parse_known_args(argv)  # unknown flags go to the recipe (e.g. --max_steps 100)
    # Before torch is imported (see recovery.toy.train): sleeping, not spinning, OpenMP threads.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if not args.probe_only:
        metrics = train(args.recipe, args.output_dir, args.export, extra)
        print(
            f"\ntraining: {metrics['train_seconds']:.0f} s ({metrics['train_steps']} steps), "
            f"whole run {metrics['wall_seconds']:.0f} s; held-out ({metrics.get('eval_problems', 0)} problems): "
            f"greedy {metrics.get('greedy_accuracy', float('nan')):.3f}, "
            f"sampled {metrics.get('sampled_accuracy', float('nan')):.3f}"
        )
        print(json.dumps({k: v for k, v in metrics.items() if k != "data_args"}))
    checkpoint = args.checkpoint if args.probe_only else args.output_dir
    imports, load = measure_load(checkpoint)
    print(f"loading the checkpoint: {load:.2f} s (after {imports:.2f} s of torch/transformers imports)")
    if args.probe or args.probe_only:
        run_probe(checkpoint, args.probe_problems, args.probe_samples, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
