"""The reward server under what a training cluster does to it every day, as a process of its own: a scoring
worker SIGKILLed mid-load, the time limit reached, a thousand single-row requests at once from OpenRLHF's own
client and 256 threads of verl's. Every row is answered once, under its own id; a transient failure is
retried (by the server, then by the client) and never becomes a score."""

from __future__ import annotations

import http.client
import json
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc")

from reward_serving import get_json, scoring_workers, serve_rewards  # noqa: E402 - tests/reward_serving.py

FILLER = "Let me add the numbers again, carefully. " * 6000  # ~250k characters: a row that takes a while


def rows(n: int, prefix: str, *, expressions: bool = False, start: int = 0) -> list[dict]:
    """``n`` rows with distinct ids, every completion correct (``score`` 1.0); every 50th one long; the answers
    from ``start`` on. With ``expressions`` each gold is an expression the completion writes another way
    (graded by math-verify)."""
    out = []
    for k in range(start, start + n):
        boxed, gold = (f"{k} + x", f"x + {k}") if expressions else (str(k), str(k))
        text = (FILLER if k % 50 == 0 else "") + f"</think>The answer is \\boxed{{{boxed}}}."
        kind = "expression" if expressions else "numeric"
        out.append({"id": f"{prefix}{k}", "completion": text, "answer": gold, "answer_type": kind})
    return out


def post(base: str, path: str, body: dict, timeout: float = 120) -> tuple[int, dict, dict]:
    url = urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    try:
        conn.request("POST", path, body=json.dumps(body).encode(), headers={"content-type": "application/json"})
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read()), dict(reply.getheaders())
    finally:
        conn.close()


def _until_scoring_workers_show(server, base: str, round_: int) -> None:
    deadline = time.monotonic() + 60
    for batch in range(10**6):
        expressions = rows(8, f"w{round_}-{batch}-", expressions=True, start=10**6 + 8 * batch)
        status, reply, _ = post(base, "/score", {"rows": expressions})
        assert status == 200 and all(r["score"] == 1.0 for r in reply["results"]), reply
        if len(scoring_workers(server.pid)) == 2 or time.monotonic() > deadline:
            return


def _load_and_kill(server, base: str, round_: int) -> tuple[list[dict], list[dict], dict[str, tuple]]:
    """3,000 distinct rows (/score in batches of 40, /openrlhf row by row) sent by 24 clients while one scoring
    worker is SIGKILLed, again in the (new) pool until a kill has hit rows being scored or nothing is left to
    score; the rows sent and every reply. Each round's answers are new: none is in a worker's grading cache.
    A replaced pool's workers start their math-verify workers, by which `scoring_workers` finds them, only for
    a row math-verify grades: later rounds grade expressions until they show, then send the load."""
    if round_ > 0:
        _until_scoring_workers_show(server, base, round_)
    batched = rows(2400, f"b{round_}-", start=3000 * round_)
    single = rows(600, f"s{round_}-", start=3000 * round_ + 2400)
    replies: dict[str, tuple] = {}

    def send_batch(i: int) -> None:
        replies[f"b{i}"] = post(base, "/score", {"rows": batched[i : i + 40]})

    def send_one(row: dict) -> None:
        body = {"query": ["P" + row["completion"]], "prompts": ["P"], "labels": [json.dumps(row)]}
        replies[row["id"]] = post(base, "/openrlhf", body)

    with ThreadPoolExecutor(24) as threads:
        futures = [threads.submit(send_batch, i) for i in range(0, len(batched), 40)]
        futures += [threads.submit(send_one, row) for row in single]
        deadline = time.monotonic() + 30
        while get_json(f"{base}/health")["pending"] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        for _ in range(20):
            victims = scoring_workers(server.pid)  # a new pool's workers show once they grade
            if victims:
                os.kill(victims[0], signal.SIGKILL)
            time.sleep(0.3)
            health = get_json(f"{base}/health")
            if health["retried"] > 0 or health["pending"] == 0:
                break
        for future in futures:
            future.result()
    return batched, single, replies


def test_a_worker_killed_mid_load_costs_no_row_its_id_or_its_score(tmp_path):
    """SIGKILL a scoring worker while 3,000 distinct rows are being scored (/score in batches, /openrlhf row by
    row): every request 200, every row once under its own id, every correct answer 1.0, the pool replaced. A
    kill that lands between two chunks costs no row and proves nothing, so on a busy machine the load is sent
    again (new rows) until a kill has hit rows being scored, at most three times; every round is checked."""
    with serve_rewards(tmp_path / "server.log", "--workers", "2", "--chunk-rows", "16") as (server, base):
        rounds = []
        for round_ in range(3):
            rounds.append(_load_and_kill(server, base, round_))
            health = get_json(f"{base}/health")
            if health["retried"] > 0:
                break
    assert health["restarts"] >= 1 and health["retried"] > 0, health  # a kill hit rows being scored
    for batched, single, replies in rounds:
        assert {status for status, _, _ in replies.values()} == {200}, [r for r in replies.values() if r[0] != 200][:1]
        results = [r for i in range(0, len(batched), 40) for r in replies[f"b{i}"][1]["results"]]
        assert [r["id"] for r in results] == [row["id"] for row in batched]  # once each, in order, its own id
        assert all(r["score"] == 1.0 and r["verdict"] == "correct" for r in results)
        assert all(replies[row["id"]][1]["rewards"] == [1.0] for row in single)


def test_the_time_limit_answers_retryable_rows_under_their_own_ids(tmp_path):
    """One worker, a 1 s time limit, 3,000 distinct rows: 503 with Retry-After and every row's result under its
    id — the scored ones with the value of the reward the server was started with (a registry reward, by name,
    with its options), the others retryable with no score; /openrlhf names the rows to retry."""
    from recovery.integrations.core import RewardSettings, score_rows

    options = ("--reward", "correctness", "--reward-options", '{"unclosed": "grade"}')
    with serve_rewards(tmp_path / "server.log", "--workers", "1", "--time-limit-s", "1", *options) as (_, base):
        # Each request holds more rows than one worker scores in the time limit, however quiet the machine.
        sent, more = rows(3000, "t", expressions=True), rows(5000, "o", expressions=True)[3000:]
        sent[1]["completion"] = "The answer is \\boxed{1 + x}"  # unclosed, graded: this reward's own option
        status, body, headers = post(base, "/score", {"rows": sent})
        # Other golds: none graded before (the grader keeps a cache). A label needs no completion (the query
        # carries it), which keeps the body within the server's limit.
        labels = [json.dumps({k: v for k, v in r.items() if k != "completion"}) for r in more]
        request = {"query": ["P" + r["completion"] for r in more], "prompts": ["P"] * len(more), "labels": labels}
        o_status, o_body, o_headers = post(base, "/openrlhf", request)
    assert status == 503 and headers.get("retry-after") == "1", body.get("detail")
    results = body["results"]
    assert [r["id"] for r in results] == [r["id"] for r in sent]  # 3,000 results, each under its own id
    retry = [r for r in results if r["retryable"]]
    scored = [(row, r) for row, r in zip(sent, results) if not r["retryable"]]
    assert retry and scored, "the time limit should cut the request midway"
    assert all(r["score"] is None and "time limit" in r["reason"] for r in retry)
    reward = RewardSettings(reward="correctness", reward_options={"unclosed": "grade"}).build()
    try:
        want = score_rows(reward, [row["completion"] for row, _ in scored], [row for row, _ in scored])
    finally:
        reward.close()
    assert [r["score"] for _, r in scored] == [w.score for w in want] and set(w.score for w in want) == {1.0}
    assert o_status == 503 and o_headers.get("retry-after") == "1" and "rewards" not in o_body
    assert o_body["error"] == "retry" and 0 < len(o_body["rows"]) <= len(more)


def test_a_thousand_single_row_requests_and_256_verl_threads_all_get_their_reward(tmp_path):
    """The server on its default settings; OpenRLHF's own HTTP client sends 1,000 single-row requests at once
    (as 1,000 rollouts finishing together do), and 256 threads call verl's per-row ``compute_score`` with
    ``server_url``: no request fails and each gets its own row's reward."""
    from recovery.integrations.verl import compute_score

    sent = rows(1256, "c")
    for k, row in enumerate(sent):
        if k % 3 == 0:
            row["completion"] = "</think>The answer is \\boxed{-1}."  # wrong: 0.0, and it must be this row's
    want = [0.0 if k % 3 == 0 else 1.0 for k in range(len(sent))]
    with serve_rewards(tmp_path / "server.log") as (_, base):
        got_openrlhf = []
        try:
            import asyncio

            from openrlhf.utils.agent import SingleTurnAgentExecutor
        except ImportError:
            pass
        else:
            executor = SingleTurnAgentExecutor(remote_rm_url=f"{base}/openrlhf")

            async def burst():
                calls = [
                    executor._fetch_rewards_via_http(["P" + r["completion"]], ["P"], [json.dumps(r)])
                    for r in sent[:1000]
                ]
                return await asyncio.gather(*calls, return_exceptions=True)

            got_openrlhf = asyncio.run(burst())
            failures = [g for g in got_openrlhf if isinstance(g, BaseException)]
            assert not failures, failures[:3]
            assert [g[0]["rewards"] for g in got_openrlhf] == [[w] for w in want[:1000]]

        barrier = threading.Barrier(256)

        def verl_row(k: int) -> float:
            barrier.wait()  # all 256 at once
            row = sent[1000 + k]
            info = {"answer_type": "numeric"}
            return compute_score("recovery/x", row["completion"], row["answer"], info, server_url=base)["score"]

        with ThreadPoolExecutor(256) as threads:
            got_verl = list(threads.map(verl_row, range(256)))
    assert got_verl == want[1000:]


def test_the_client_fails_loudly_at_its_deadline():
    """Nothing listening: `post_json` tries again with backoff until its deadline, then raises with the reason
    (a trainer's step stops; no reward is made up)."""
    from recovery.integrations.client import RetryPolicy, RewardServerError, post_json
    from served import free_port

    started = time.monotonic()
    with pytest.raises(RewardServerError, match="no answer after [0-9]+ tries in 1 s; the last: .*refused") as err:
        post_json(f"http://127.0.0.1:{free_port()}/verl", {}, RetryPolicy(deadline_s=1.0, first_backoff_s=0.05))
    assert int(str(err.value).split(" tries")[0].rsplit(" ", 1)[1]) > 1 and time.monotonic() - started < 5
