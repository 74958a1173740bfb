"""Time the whole demo, phase by phase: ``recovery demo`` in a fresh process, as a user runs it.

    python bench/demo_time.py                                  # the full demo of this checkout
    python bench/demo_time.py --quick                          # recovery demo --quick
    python bench/demo_time.py --baseline-src ../old/src        # another source tree first, then this one: ratios

Prints each phase's wall seconds ("measure the tiny reasoner", "build recovery traces", "train (SFT)", …), the
SFT's ``train_runtime`` (TRL's seconds in the training loop), the start-up before the first phase and the
total. The phases come from the demo's own record (``timings.json`` in its directory); a tree that writes none
(a commit before it did) is timed from the phase headers the demo prints, stamped as they arrive, and its
``train_runtime`` from the trainer's last log line. With ``--baseline-src`` the baseline runs first and this
checkout right after it, on the same machine, and the last column is baseline / this: compare runs made back to
back only, since a shared machine's load changes the seconds of both.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE_SRC = Path(__file__).resolve().parents[1] / "src"
# The demo's phase headers: a rule around "[2/5] build recovery traces".
HEADER = re.compile(r"\[(\d+)/(\d+)\] (.+?)\s*─")
TRAIN_RUNTIME = re.compile(r"\{'train_runtime'[^}]*\}")


def run_demo(src: Path, out: Path, quick: bool) -> dict:
    """``recovery demo --out out`` with ``src`` first on the path; its timings (seconds)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(src),
        "HF_HUB_OFFLINE": "1",
        "WANDB_MODE": os.environ.get("WANDB_MODE", "offline"),
        "PYTHONUNBUFFERED": "1",
        "COLUMNS": "100",
    }
    command = [sys.executable, "-m", "recovery", "demo", "--out", str(out), *(["--quick"] if quick else [])]
    log = out.parent / f"{out.name}.log"
    out.parent.mkdir(parents=True, exist_ok=True)
    stamps: list[tuple[str, float]] = []  # (phase, seconds since start) as the headers arrive
    runtimes: list[float] = []
    start = time.perf_counter()
    with log.open("w") as sink:
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in process.stdout:
            sink.write(line)
            if match := HEADER.search(line):
                stamps.append((match.group(3), time.perf_counter() - start))
            if match := TRAIN_RUNTIME.search(line):
                runtimes.append(float(ast.literal_eval(match.group(0))["train_runtime"]))
        status = process.wait()
    total = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"{' '.join(command)} exited {status}; its output is in {log}")
    recorded = out / "timings.json"
    if recorded.is_file():
        timings = json.loads(recorded.read_text())
        phases, train_runtime = timings["phases"], timings["train_runtime"].get("sft")
        source = "timings.json"
    else:
        ends = [t for _, t in stamps[1:]] + [total]
        phases = {name: end - begin for (name, begin), end in zip(stamps, ends)}
        train_runtime = runtimes[0] if runtimes else None
        source = "phase headers"
    startup = stamps[0][1] if stamps else 0.0
    return {"phases": phases, "sft train_runtime": train_runtime, "startup": startup, "total": total, "from": source}


def rows(timings: dict) -> dict[str, float | None]:
    """The table's rows: start-up, each phase (the SFT's train_runtime after its phase), the total."""
    out: dict[str, float | None] = {"start-up (imports, before the first phase)": timings["startup"]}
    for name, seconds in timings["phases"].items():
        out[name] = seconds
        if name == "train (SFT)":
            out["  of which SFT train_runtime"] = timings["sft train_runtime"]
    out["total"] = timings["total"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="time `recovery demo --quick`")
    parser.add_argument("--out", type=Path, default=Path("runs/bench-demo-time"), help="where the demos write")
    parser.add_argument("--baseline-src", type=Path, help="a source tree to time first, for a ratio")
    args = parser.parse_args()

    measured = {}
    if args.baseline_src is not None:
        measured["baseline"] = run_demo(args.baseline_src.resolve(), args.out / "baseline", args.quick)
    measured["this"] = run_demo(HERE_SRC, args.out / "this", args.quick)

    tables = {name: rows(t) for name, t in measured.items()}
    labels = list(dict.fromkeys(label for table in tables.values() for label in table))
    header = f"{'phase':<46}" + "".join(f"{name + ' (s)':>16}" for name in tables)
    header += f"{'baseline/this':>15}" if "baseline" in tables else ""
    sources = ", ".join(f"{name}: from {t['from']}" for name, t in measured.items())
    print(f"recovery demo{' --quick' if args.quick else ''}, {os.cpu_count()} CPUs; {sources}")
    print(header)
    for label in labels:
        values = [tables[name].get(label) for name in tables]
        line = f"{label:<46}" + "".join(f"{v:>16.1f}" if v is not None else f"{'-':>16}" for v in values)
        if "baseline" in tables and None not in values and values[-1] > 0:
            line += f"{values[0] / values[-1]:>14.2f}x"
        print(line)


if __name__ == "__main__":
    main()
