"""The run viewer (`recovery view`) on a paper-size run: how long it takes to start, how fast the index, a page of
chains and one chain answer, and how much memory the server holds.

Workload (issue 44): the pipeline-scale bench's run (`bench/pipeline_scale.py`): 10,000 synthetic R1-like traces ×
2 interventions × 5 timesteps = 100,000 chains × 8 continuations = 800,000 continuations, made by the real stages
with its stand-in generator (seeded and run in fresh processes by that bench's own modes). The viewer is then
started as a user starts it (``python -m recovery view RUN --port 0``, a process of its own) and asked over HTTP.

Targets: the index under 2 s, a page of chains and one chain under 0.5 s each, the server under 1 GB. Figures
are printed, nothing is asserted (the machine's speed varies); each request is timed cold (first) and warm (median
of the next ones).

Usage: python bench/viewer_scale.py [--traces 10000] [--run-dir DIR]   (an existing DIR is reused as it is)
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

BENCH = Path(__file__).resolve().parent
SRC = BENCH.parent / "src"
TARGETS = {"index": 2.0, "page of chains": 0.5, "one chain": 0.5}


def build_run(run_dir: Path, traces: int) -> float:
    """Seed and run the pipeline-scale bench's run into ``run_dir`` (its own child-process modes); seconds taken."""
    start = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    for mode in ("--seed-into", "--stages-of"):
        subprocess.run(
            [sys.executable, str(BENCH / "pipeline_scale.py"), mode, str(run_dir), "--one", str(traces)],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
        )
    return time.perf_counter() - start


class PeakRSS:
    """The peak resident memory of process ``pid``, sampled every 50 ms by a thread, in GB."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.process, self.peak = psutil.Process(pid), 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            try:
                self.peak = max(self.peak, self.process.memory_info().rss)
            except Exception:  # noqa: BLE001 — the process ended
                return

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak / 1024**3


def timed_get(url: str) -> tuple[float, str]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as response:
        body = response.read().decode()
    return time.perf_counter() - start, body


def measure(run_dir: Path, repeats: int = 5) -> dict:
    """Start the viewer on ``run_dir``, time its answers, read its memory, stop it with Ctrl-C (SIGINT)."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    command = [sys.executable, "-m", "recovery", "view", str(run_dir), "--port", "0"]
    started = time.perf_counter()
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    rss = PeakRSS(server.pid)
    try:
        lines = []
        for line in server.stdout:
            lines.append(line)
            if "viewer: http://" in line:
                break
        startup = time.perf_counter() - started
        base = re.search(r"http://127\.0\.0\.1:\d+", "".join(lines))
        if base is None:
            raise RuntimeError("the viewer did not start:\n" + "".join(lines) + server.stdout.read())
        url = base.group(0)
        _, cells = timed_get(f"{url}/cells")
        cell = re.search(r'href="(/chains\?[^"]+)"', cells).group(1).replace("&amp;", "&")
        _, listed = timed_get(f"{url}{cell}")
        chain = re.findall(r'href="(/chain/[0-9a-f]+)"', listed)[-1]
        middle = (int(re.search(r"page 1 of (\d+)", listed).group(1)) + 1) // 2  # a page from the middle of the cell
        _, mixed = timed_get(f"{url}/chains?outcome=mixed")
        middle_mixed = (int(re.search(r"page 1 of (\d+)", mixed).group(1)) + 1) // 2
        urls = {
            "index": f"{url}/cells",
            "page of chains": f"{url}{cell}&page={middle}&sort=length&order=desc",
            "one chain": f"{url}{chain}",
            "page of all chains, filtered by outcome": f"{url}/chains?outcome=mixed&page={middle_mixed}",
            # Computed on first use, then remembered: the lexical doubt detector over the cell's continuations,
            # and a scan of every problem and trace text for the search.
            "a cell's chains that doubt (first: detector runs)": f"{url}{cell}&doubt=yes",
            "text search in problems and traces": f"{url}/chains?q=common+denominator",
        }
        timings = {}
        for name, address in urls.items():
            times = [timed_get(address)[0] for _ in range(repeats)]
            timings[name] = (times[0], statistics.median(times[1:]))
        rss_now = rss.process.memory_info().rss / 1024**3
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)
    finally:
        peak = rss.stop()
        if server.poll() is None:
            server.kill()
    return {"startup_s": startup, "timings": timings, "rss_gb": rss_now, "peak_rss_gb": peak, "log": "".join(lines)}


def table_counts(run_dir: Path) -> dict[str, int]:
    sys.path.insert(0, str(SRC))
    from recovery.run_dir import open_run

    run = open_run(run_dir)
    tables = run.tables
    return {
        "traces": tables.traces.count(),
        "chains": tables.chains.count(),
        "continuations": tables.continuations.count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=10_000)
    parser.add_argument("--run-dir", type=Path, default=None, help="reuse (or build into) this run directory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = args.run_dir or Path(tmp) / "run"
        if not (run_dir / "config.json").is_file():
            print(f"building the synthetic run ({args.traces:,} traces) in {run_dir} …", flush=True)
            print(f"  built in {build_run(run_dir, args.traces):.0f} s (not timed work)")
        counts = table_counts(run_dir)
        print(", ".join(f"{n:,} {name}" for name, n in counts.items()))
        result = measure(run_dir)
    print(f"viewer started (runs read) in {result['startup_s']:.1f} s")
    for name, (cold, warm) in result["timings"].items():
        target = TARGETS.get(name)
        verdict = (
            "" if target is None else f"   target < {target:g} s: {'met' if max(cold, warm) < target else 'MISSED'}"
        )
        print(f"  {name:<50} first {cold:6.3f} s, then {warm:6.3f} s{verdict}")
    print(
        f"server memory: {result['rss_gb']:.2f} GB resident after the requests, peak {result['peak_rss_gb']:.2f} GB "
        f"(target < 1 GB: {'met' if result['peak_rss_gb'] < 1 else 'MISSED'})"
    )


if __name__ == "__main__":
    main()
