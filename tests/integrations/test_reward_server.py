"""The reward server on loopback: concurrent load answered row for row with the in-process values, every
malformed request a 4xx naming what is wrong, slow and stalled clients cut off without blocking others."""

from __future__ import annotations

import http.client
import json
import select
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from recovery.rewards import RecoveryReward  # noqa: E402

COLUMNS = ("answer", "answer_type", "domain", "source", "intervention", "category", "reference_length")


def post(base: str, path: str, body: bytes | dict, *, timeout: float = 120, headers: dict | None = None):
    """(status, decoded JSON) of a POST; ``body`` a dict is sent as JSON."""
    url = urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    try:
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        conn.request("POST", path, body=data, headers={"content-type": "application/json", **(headers or {})})
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read() or b"null")
    finally:
        conn.close()


def read_reply(sock: socket.socket) -> str:
    """Everything the server sends until it closes the connection (its error replies say ``connection: close``)."""
    chunks = []
    try:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except ConnectionResetError:  # it closed with our unread bytes still queued: what it sent is kept above
        pass
    return b"".join(chunks).decode()


def load_rows(grpo, n: int) -> list[dict]:
    """``n`` rows for /score: the GRPO rows with their completions, cycled, each a little different."""
    rows, completions = grpo
    pairs = [(row, text) for row, texts in zip(rows, completions) for text in texts]
    out = []
    for k in range(n):
        row, text = pairs[k % len(pairs)]
        out.append({"id": k, "completion": "\n" * (k // len(pairs) % 4) + text, **{c: row[c] for c in COLUMNS}})
    return out


def in_process(rows: list[dict]):
    columns = {c: [r[c] for r in rows] for c in COLUMNS}
    return RecoveryReward().parts(completions=[r["completion"] for r in rows], **columns)


def test_load_every_row_answered_once_with_the_in_process_values(reward_server, grpo):
    rows = load_rows(grpo, 2000)
    batches = [rows[i : i + 50] for i in range(0, len(rows), 50)]
    started = time.monotonic()
    with ThreadPoolExecutor(8) as threads:
        replies = list(threads.map(lambda batch: post(reward_server, "/score", {"rows": batch}), batches))
    seconds = time.monotonic() - started
    assert all(status == 200 for status, _ in replies), replies[:1]
    results = [r for _, body in replies for r in body["results"]]
    assert sorted(r["id"] for r in results) == list(range(len(rows)))  # every row once
    expected = in_process(rows)
    assert {p.verdict for p in expected} >= {"correct", "wrong", "no_answer"}
    by_id = {r["id"]: r for r in results}
    for row, want in zip(rows, expected):
        got = by_id[row["id"]]
        assert (got["score"], got["correctness"], got["doubt"], got["length"], got["verdict"]) == (
            want.score,
            want.correctness,
            want.doubt,
            want.length,
            want.verdict,
        )
    print(f"\n2000 rows in {len(batches)} batches of 50, 8 clients: {seconds:.2f} s")


def test_openrlhf_remote_protocol_through_openrlhf_own_client(reward_server, small_run, r1_renderer, tmp_path):
    """OpenRLHF's own HTTP client (``--remote_rm_url http://.../openrlhf``) gets the reward-function values."""
    pytest.importorskip("openrlhf")
    import asyncio

    from openrlhf.utils.agent import SingleTurnAgentExecutor

    from recovery.integrations import openrlhf as recovery_openrlhf
    from recovery.training_data.rl_export import export_rl

    export = export_rl(small_run.path, tmp_path, "openrlhf", r1_renderer)
    rows = [json.loads(line) for line in open(export.data_file, encoding="utf-8")][:6]
    eos = r1_renderer.tokenizer.eos_token
    queries = [row["prompt"] + text + eos for row in rows for text in ("</think>\\boxed{1}", "\n\nWait, no.")]
    prompts = [row["prompt"] for row in rows for _ in range(2)]
    labels = [row["label"] for row in rows for _ in range(2)]
    executor = SingleTurnAgentExecutor(remote_rm_url=f"{reward_server}/openrlhf")
    remote = asyncio.run(executor._fetch_rewards_via_http(queries, prompts, labels))[0]
    local = recovery_openrlhf.reward_func(queries, prompts, labels)
    assert remote["rewards"] == pytest.approx(local["rewards"].tolist())
    assert remote["scores"] == pytest.approx(local["scores"].tolist())
    assert remote["extra_logs"]["scorable"] == [1.0] * len(queries)


def test_verl_endpoint_matches_compute_score_batch(reward_server, grpo):
    from recovery.integrations.verl import compute_score_batch

    rows, completions = grpo
    extra = [{c: row[c] for c in COLUMNS if c != "answer"} for row in rows]
    body = {
        "data_sources": ["recovery/toy"] * len(rows),
        "solution_strs": [texts[0] for texts in completions],
        "ground_truths": [row["answer"] for row in rows],
        "extra_infos": extra,
    }
    status, reply = post(reward_server, "/verl", body)
    assert status == 200
    assert reply["results"] == compute_score_batch(**body)


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        (b'{"rows": [', 400, "body"),
        ({"rows": [{"completion": "x</think>1", "answer": "1"}]}, 422, "rows[0].answer_type"),
        ({"rows": [{"completion": "x", "answer": "1", "answer_type": "sorcery"}]}, 422, "rows[0].answer_type"),
        ({"rows": [{"completion": 5, "answer": "1", "answer_type": "numeric"}]}, 422, "rows[0].completion"),
        (
            {"rows": [{"completion": "x", "answer": "1", "answer_type": "numeric", "refrence_length": 3}]},
            422,
            "rows[0].refrence_length",
        ),
        ({"rows": []}, 422, "rows"),
        ({"row": []}, 422, "rows"),
        ({"query": ["a"], "prompts": [], "labels": ["{}"]}, 422, "body"),
        # text JSON can carry but UTF-8 cannot (a lone surrogate), in any field, however deep
        ({"rows": [{"completion": "x", "answer": "1", "answer_type": "numeric", "id": "\ud800"}]}, 422, "rows[0].id"),
        ({"rows": [{"completion": "a\udfff", "answer": "1", "answer_type": "numeric"}]}, 422, "rows[0].completion"),
        ({"rows": [{"completion": "x", "answer": "\ud800", "answer_type": "numeric"}]}, 422, "rows[0].answer"),
        ({"query": ["a"], "prompts": ["a"], "labels": [{"answer": ["\ud800"]}]}, 422, "labels[0]"),
    ],
)
def test_malformed_requests_get_a_4xx_naming_the_field(reward_server, body, status, field):
    path = "/openrlhf" if isinstance(body, dict) and "query" in body else "/score"
    got, reply = post(reward_server, path, body)
    assert got == status, reply
    assert field in [f["field"] for f in reply["fields"]] and field in reply["detail"]


def test_a_50_mb_body_gets_413_before_it_is_read(reward_server):
    url = urlsplit(reward_server)
    size = 50 * 1024 * 1024
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(b"POST /score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n")
        sock.sendall(f"Content-Length: {size}\r\n\r\n".encode() + b"{" * 65536)
        reply = read_reply(sock)
    assert reply.startswith("HTTP/1.1 413") and "body too large" in reply
    # streamed without a length (chunked): counted as it arrives, cut at the limit
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(b"POST /score HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"x" * (1024 * 1024)
        try:
            for _ in range(50):
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        except OSError:  # the server answered and closed while we were still sending
            pass
        reply = read_reply(sock)
    assert reply.startswith("HTTP/1.1 413") and "body too large" in reply


def test_a_million_character_completion_is_scored_within_the_time_limit(reward_server):
    text = "\n\nWait, that is wrong. " + "Let me recompute the sum. " * 40_000 + "</think>\\boxed{7}"
    assert len(text) >= 1_000_000
    row = {"completion": text, "answer": "7", "answer_type": "numeric", "intervention": "toy/wrong_continuation"}
    row["reference_length"] = 1000
    status, reply = post(reward_server, "/score", {"rows": [row]})
    assert status == 200
    want = in_process([{**row, "domain": None, "source": None, "category": None}])[0]
    got = reply["results"][0]  # scored, not cut off by the server's time limit (that answers null with a reason)
    assert got["reason"] is None
    assert (got["score"], got["doubt"], got["length"]) == (want.score, want.doubt, want.length) == (0.9, 1.0, -1.0)


def test_a_stalled_client_gets_408_and_blocks_no_one(reward_server, grpo):
    url = urlsplit(reward_server)
    with socket.create_connection((url.hostname, url.port), timeout=30) as slow:
        slow.sendall(
            b"POST /score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
        )
        slow.sendall(b'{"rows": [')  # ... and nothing more
        status, reply = post(reward_server, "/score", {"rows": load_rows(grpo, 20)})  # served meanwhile
        assert status == 200 and len(reply["results"]) == 20
        assert not select.select([slow], [], [], 0)[0]  # ... before the stalled one was answered
        answer = read_reply(slow)
    assert answer.startswith("HTTP/1.1 408") and "request timeout" in answer


def test_clients_stalled_inside_their_headers_get_408_and_are_let_go(reward_server, grpo):
    """20 connections that stop halfway through their headers (and one that sends nothing): each is answered
    408 and closed once the header timeout (2 s here) has passed; others are served meanwhile."""
    url = urlsplit(reward_server)
    stalled = [socket.create_connection((url.hostname, url.port), timeout=30) for _ in range(21)]
    try:
        for sock in stalled[:20]:
            sock.sendall(b"POST /score HTTP/1.1\r\nHost: x\r\nContent-Type: appl")
        started = time.monotonic()
        status, reply = post(reward_server, "/score", {"rows": load_rows(grpo, 5)})
        assert status == 200 and len(reply["results"]) == 5
        answers = [read_reply(sock) for sock in stalled]
        assert time.monotonic() - started < 15
    finally:
        for sock in stalled:
            sock.close()
    assert all(a.startswith("HTTP/1.1 408") and "headers not received" in a for a in answers), answers[:2]


def test_health(reward_server):
    url = urlsplit(reward_server)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    conn.request("GET", "/health")
    body = json.loads(conn.getresponse().read())
    conn.close()
    assert body["status"] == "ok" and body["workers"] == 2 and body["settings"]["unscorable"] == "neutral"


def test_verl_reward_function_can_score_on_the_server(reward_server, grpo):
    """compute_score_batch(..., server_url=...) sends the rows to the server and returns what it computes."""
    from recovery.integrations.verl import compute_score_batch

    rows, completions = grpo
    args = dict(
        data_sources=["recovery/toy"] * len(rows),
        solution_strs=[texts[-1] for texts in completions],
        ground_truths=[row["answer"] for row in rows],
        extra_infos=[{c: row[c] for c in COLUMNS if c != "answer"} | {"num_turns": 2} for row in rows],
    )
    assert compute_score_batch(**args, server_url=reward_server) == compute_score_batch(**args)
