"""The recovery reward as an OpenRLHF reward function, and OpenRLHF's remote reward protocol.

OpenRLHF's contract (0.11: ``openrlhf/utils/agent.py::SingleTurnAgentExecutor``): ``--remote_rm_url`` is either
a Python file, from which it loads ``reward_func`` and calls ``reward_func(queries, prompts, labels)`` (lists,
in a thread), or an HTTP URL, to which it POSTs ``{"query": [...], "prompts": [...], "labels": [...]}``. Both
answer ``{"rewards", "scores", "extra_logs"}``: ``rewards`` feed the advantages, ``scores`` (0-1) the dynamic
filter, each ``extra_logs`` entry becomes a logged metric. A query is the prompt *and* the response, decoded
with ``skip_special_tokens=False`` (so it ends with the EOS string); a label is the row's one label column
(``--label_key``).

Here ``rewards`` is `recovery.rewards.RecoveryReward`'s value for the response, ``scores`` its correctness,
``extra_logs`` the parts (``correctness``, ``doubt``, ``length``, ``scorable``; `recovery.integrations.core`).
The label is a JSON object (``recovery export RUN --format openrlhf`` writes it): the reward's columns
(`recovery.integrations.core.REWARD_COLUMNS`) and ``strip``, the special-token strings to take off the end of a
response (EOS, padding) before it is graded, as TRL's decoding drops them. The response is what follows the
prompt in the query. Use the file itself as the reward function::

    --remote_rm_url $(python -c "import recovery.integrations.openrlhf as m; print(m.__file__)") --label_key label

Settings (`RewardSettings`: the reward's name and options, weights, policies) come from
``RECOVERY_REWARD_SETTINGS`` (a JSON object) when OpenRLHF loads the file; with ``server_url`` there, the file
sends the queries to that reward server's ``/openrlhf`` instead, trying again with backoff while the server is
busy or a worker failed, until ``server_deadline_s`` (`recovery.integrations.client`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from recovery.integrations.client import RetryPolicy, post_json
from recovery.integrations.core import (
    PARTS,
    REWARD_COLUMNS,
    RewardSettings,
    UnscorableRow,
    filter_score,
    score_rows,
    scores_dict,
    shared_reward,
)

__all__ = ["SETTINGS_ENV", "label_columns", "openrlhf_label", "reward_func", "score_queries", "split_response"]

SETTINGS_ENV = "RECOVERY_REWARD_SETTINGS"


def openrlhf_label(row: Mapping[str, Any], strip: Sequence[str] = ()) -> str:
    """The label (a JSON string) of one exported row: its reward columns and the strings to ``strip``."""
    label = {c: row.get(c) for c in REWARD_COLUMNS}
    label["strip"] = [s for s in dict.fromkeys(strip) if s]
    return json.dumps(label, ensure_ascii=False, sort_keys=True)


def label_columns(label: Any) -> dict[str, Any]:
    """A label as reward columns: a JSON object (string or bytes) or a mapping; a bare string is the gold."""
    if isinstance(label, (bytes, bytearray)):
        label = bytes(label).decode("utf-8", errors="replace")
    if isinstance(label, str):
        try:
            decoded = json.loads(label)
        except ValueError:
            decoded = None
        label = decoded if isinstance(decoded, Mapping) else {"answer": label}
    return dict(label) if isinstance(label, Mapping) else {}


def split_response(query: str, prompt: str, strip: Sequence[str] = ()) -> str | None:
    """The response in an OpenRLHF query (prompt + response), its trailing ``strip`` strings removed; None when
    the query does not start with the prompt."""
    if not isinstance(query, str) or not isinstance(prompt, str) or not query.startswith(prompt):
        return None
    response = query[len(prompt) :]
    stripped = True
    while stripped:
        stripped = False
        for s in strip:
            if s and response.endswith(s):
                response, stripped = response[: -len(s)], True
    return response


def score_queries(
    queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any], settings: RewardSettings
) -> dict[str, Any]:
    """``{"rewards", "scores", "extra_logs"}`` as lists of floats, one per query (the HTTP protocol's body)."""
    if not (len(queries) == len(prompts) == len(labels)):
        raise ValueError(f"{len(queries)} queries, {len(prompts)} prompts and {len(labels)} labels")
    rows = [label_columns(label) for label in labels]
    responses = [split_response(q, p, row.get("strip") or ()) for q, p, row in zip(queries, prompts, rows)]
    parts = score_rows(shared_reward(settings), responses, rows)
    scored = []
    for i, part in enumerate(parts):
        if responses[i] is None and settings.unscorable == "raise":
            raise UnscorableRow(f"query {i} does not start with its prompt")
        scored.append(scores_dict(part, settings, row=i))
    return {
        "rewards": [s["score"] for s in scored],
        "scores": [filter_score(s, p.correctness) for s, p in zip(scored, parts)],
        "extra_logs": {key: [s[key] for s in scored] for key in PARTS},
    }


def _settings_from_env() -> tuple[RewardSettings, dict[str, Any]]:
    """The settings in ``RECOVERY_REWARD_SETTINGS``, and everything else it holds (``server_url``, ...)."""
    raw = os.environ.get(SETTINGS_ENV, "").strip()
    kwargs = json.loads(raw) if raw else {}
    settings, unknown = RewardSettings.from_kwargs(kwargs)
    return settings, {k: kwargs[k] for k in unknown}


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any], **kwargs: Any) -> dict:
    """OpenRLHF's reward-function hook: ``{"rewards", "scores", "extra_logs"}`` as tensors of one value per query
    (lists where torch is missing). Keyword arguments OpenRLHF may add are ignored."""
    settings, other = _settings_from_env()
    if other.get("server_url"):
        request = {"query": list(queries), "prompts": list(prompts), "labels": list(labels)}
        body = post_json(str(other["server_url"]).rstrip("/") + "/openrlhf", request, RetryPolicy.from_kwargs(other))
    else:
        body = score_queries(queries, prompts, labels, settings)
    try:
        import torch
    except ImportError:  # pragma: no cover - OpenRLHF always has torch
        return body
    return {
        "rewards": torch.tensor(body["rewards"], dtype=torch.float32),
        "scores": torch.tensor(body["scores"], dtype=torch.float32),
        "extra_logs": {k: torch.tensor(v, dtype=torch.float32) for k, v in body["extra_logs"].items()},
    }
