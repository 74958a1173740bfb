"""Reward server latency and throughput against in-process scoring of the same rows.

The rows are `bench/rewards.py`'s completions (R1-style continuations of 1-4k characters, ~70 % numeric
answers, ~30 % LaTeX expressions graded by math-verify), each with an intervention and a reference length so
all three parts of `RecoveryReward` run. The baseline scores them in this process, batch after batch, with one
`RecoveryReward` (one math-verify worker, as each server worker has); then ``recovery serve-rewards`` (a
process of its own, ``--workers`` scoring processes) gets the same batches from ``--clients`` concurrent
clients over loopback HTTP, then every row as a request of its own from ``--per-row-clients`` concurrent
clients (as verl's per-row reward managers and OpenRLHF send them; the server gathers them into chunks). A
503 is tried again after its ``Retry-After`` (with jitter), counted. All are warmed up first (math-verify
started) and timed in the same process.

Prints, for each: rows/s, per-request latency p50 / p99 (ms, retries included), the throughput ratio against
in-process, the 503s, and whether every row came back once with the in-process values.

Usage: python bench/reward_server.py [--rows 4000] [--batch 64] [--clients 8] [--per-row-clients 200]
       [--workers 2] [--seed 0]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recovery.integrations.core import RewardSettings, score_rows  # noqa: E402
from rewards import make_items  # noqa: E402 - bench/rewards.py

INTERVENTIONS = ("random_characters", "wrong_step", "paraphrase", "none")


def make_rows(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i, item in enumerate(make_items(n, seed=seed)):
        opener = rng.choice(("Wait, that is not right. ", "Hmm, let me check. ", "So ", ""))
        rows.append(
            {
                "id": i,
                "completion": "\n\n" + opener + item.completion,
                "answer": item.gold,
                "answer_type": item.answer_type,
                "domain": "math",
                "intervention": rng.choice(INTERVENTIONS),
                "reference_length": rng.randint(500, 4000),
            }
        )
    return rows


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def in_process(batches: list[list[dict]]) -> tuple[list[dict], list[float], float]:
    reward = RewardSettings().build()
    warm = {"answer": "x + 1", "answer_type": "expression", "intervention": "none", "reference_length": None}
    score_rows(reward, ["</think>\\boxed{1 + x}"], [warm])  # math-verify started before timing
    results, latencies = [], []
    started = time.perf_counter()
    for batch in batches:
        t = time.perf_counter()
        parts = score_rows(reward, [r["completion"] for r in batch], batch)
        latencies.append(time.perf_counter() - t)
        results += [{"id": r["id"], "score": p.score} for r, p in zip(batch, parts)]
    seconds = time.perf_counter() - started
    reward.close()
    return results, latencies, seconds


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def server_on(workers: int):
    """``recovery serve-rewards`` on a free port, its workers up; yields the port."""
    port = free_port()
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    command = [sys.executable, "-m", "recovery.cli", "serve-rewards", "--port", str(port)]
    server = subprocess.Popen([*command, "--workers", str(workers), "--log-level", "warning"], env=env)
    try:
        deadline = time.monotonic() + 120
        while True:  # /health answers once the workers (and their math-verify workers) are up
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/health")
                conn.getresponse().read()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the reward server did not start") from None
                time.sleep(0.2)
        yield port
    finally:
        server.terminate()
        server.wait(60)


def clients_run(port: int, batches: list[list[dict]], clients: int) -> tuple[list[dict], list[float], float, int]:
    """Each batch one POST /score from ``clients`` concurrent clients, a 503 tried again after its
    ``Retry-After`` plus jitter: (results, latency of each request with its retries, seconds, 503s)."""
    retries = 0
    rng = random.Random(0)

    def post(batch: list[dict]) -> tuple[list[dict], float]:
        nonlocal retries
        body = json.dumps({"rows": batch}).encode()
        t = time.perf_counter()
        while True:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            conn.request("POST", "/score", body=body, headers={"content-type": "application/json"})
            reply = conn.getresponse()
            data = json.loads(reply.read())
            conn.close()
            if reply.status == 503:
                retries += 1
                time.sleep(float(reply.getheader("Retry-After") or 1) * rng.uniform(0.5, 1.5))
                continue
            if reply.status != 200:
                raise SystemExit(f"HTTP {reply.status}: {data}")
            return data["results"], time.perf_counter() - t

    post(batches[0][:4])  # a first request, untimed
    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        replies = list(pool.map(post, batches))
    seconds = time.perf_counter() - started
    return [r for rows, _ in replies for r in rows], [t for _, t in replies], seconds, retries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--per-row-clients", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = make_rows(args.rows, args.seed)
    batches = [rows[i : i + args.batch] for i in range(0, len(rows), args.batch)]
    print(f"{len(rows)} rows in {len(batches)} batches of {args.batch}; {os.cpu_count()} CPUs")
    base, base_lat, base_s = in_process(batches)
    expected = {r["id"]: r["score"] for r in base}
    runs = [("in-process (1 process)", base_lat, base_s, 0, None)]
    with server_on(args.workers) as port:
        for label, chunks, clients in (
            (f"server, batches of {args.batch}, {args.clients} clients", batches, args.clients),
            (f"server, 1 row/request, {args.per_row_clients} clients", [[r] for r in rows], args.per_row_clients),
        ):
            got, lat, secs, retries = clients_run(port, chunks, clients)
            runs.append((label, lat, secs, retries, got))
    print(f"{'':44} {'rows/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'vs in-process':>14} {'503s':>6}")
    for label, latencies, seconds, retries, _ in runs:
        print(
            f"{label:44} {len(rows) / seconds:9.0f} {1000 * percentile(latencies, 0.5):8.1f} "
            f"{1000 * percentile(latencies, 0.99):8.1f} {base_s / seconds:13.2f}x {retries:6d}"
        )
    for label, _, _, _, got in runs[1:]:
        answered = sorted(r["id"] for r in got)
        same = sum(1 for r in got if r["score"] == expected[r["id"]])
        print(f"{label}: every row once: {answered == list(range(len(rows)))}; same score: {same}/{len(rows)}")


if __name__ == "__main__":
    main()
