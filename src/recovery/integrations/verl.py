"""The recovery reward as a verl custom reward function (``custom_reward_function`` in verl's trainer config).

verl's contract (0.9: ``verl/trainer/ppo/reward.py::get_custom_reward_fn`` loads ``name`` from ``path`` and
binds ``reward_kwargs``; its reward managers then call it):

* per row — how verl 0.9's trainer scores (``load_reward_manager``: the ``naive``, ``dapo``, ``gdpo``,
  ``limited`` and ``remote`` managers of its reward loop; it has no batched one): ``compute_score(data_source=,
  solution_str=, ground_truth=, extra_info=)`` — ``solution_str`` is the response decoded with ``skip_special_tokens=True``,
  ``ground_truth`` is the row's ``reward_model.ground_truth`` and ``extra_info`` its ``extra_info`` (verl
  adds ``num_turns`` and ``rollout_reward_scores``). A dict return must hold ``score``; every other key
  becomes a ``reward_extra_info`` column verl logs, so each one must be a number on every row.
* batched (older verl's ``batch`` manager, the reward server's ``/verl``): ``compute_score_batch(data_sources=,
  solution_strs=, ground_truths=, extra_infos=)``, one result per row.

Both return ``{"score", "correctness", "doubt", "length", "scorable"}`` (`recovery.integrations.core`): the
values `recovery.rewards.RecoveryReward` gives TRL for the same completion and row, with an explicit policy for
a row it cannot score. A recovery verl export (``recovery export RUN --format verl``) carries the reward's
columns in ``extra_info`` and the gold in ``reward_model.ground_truth``. Settings go in ``reward_kwargs``
(`RewardSettings`: weights, ``unclosed``, ``unscorable``, ``neutral_score``, grader workers)::

    reward:
      custom_reward_function:
        path: pkg://recovery.integrations.verl
        name: compute_score
        reward_kwargs: {unscorable: neutral}   # or {reward: correctness, reward_options: {unclosed: grade}}

The reward (and its math-verify workers) is built once per process and setting. With ``server_url`` in
``reward_kwargs`` the rows are scored by a ``recovery serve-rewards`` server instead (its ``/verl`` endpoint,
with the server's settings), so grading takes no CPU of the training node. Nothing here imports verl.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from recovery.integrations.client import RetryPolicy, post_json
from recovery.integrations.core import RewardSettings, score_rows, scores_dict, shared_reward

__all__ = ["compute_score", "compute_score_batch", "row_columns"]

log = logging.getLogger(__name__)
_WARNED: set[str] = set()
#: The reward kwargs of the server client (`recovery.integrations.client.RetryPolicy.from_kwargs`).
_CLIENT_KEYS = ("server_timeout_s", "server_deadline_s")


def row_columns(ground_truth: Any, extra_info: Mapping[str, Any] | None) -> dict[str, Any]:
    """The reward columns of one verl row: ``extra_info`` with the gold as ``answer``."""
    row = dict(extra_info) if isinstance(extra_info, Mapping) else {}
    row["answer"] = ground_truth
    return row


def _settings(kwargs: Mapping[str, Any]) -> RewardSettings:
    settings, unknown = RewardSettings.from_kwargs(kwargs)
    for name in unknown:
        if name not in _WARNED and name not in _CLIENT_KEYS:
            _WARNED.add(name)
            log.warning("recovery verl reward: ignoring the keyword %r (not a RewardSettings field)", name)
    return settings


def compute_score_batch(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Mapping[str, Any] | None],
    **kwargs: Any,
) -> list[dict[str, float]]:
    """One ``{"score", "correctness", "doubt", "length", "scorable"}`` per row (verl's batched form)."""
    server_url = kwargs.pop("server_url", None)
    if server_url:
        return _remote(str(server_url), data_sources, solution_strs, ground_truths, extra_infos, kwargs)
    settings = _settings(kwargs)
    rows = [row_columns(g, e) for g, e in zip(ground_truths, extra_infos)]
    parts = score_rows(shared_reward(settings), list(solution_strs), rows)
    return [
        scores_dict(part, settings, row=(source, (extra or {}).get("index") if isinstance(extra, Mapping) else None))
        for part, source, extra in zip(parts, data_sources, extra_infos)
    ]


def _remote(url: str, sources, solutions, golds, extras, kwargs: dict[str, Any]) -> list[dict[str, float]]:
    """The same rows scored by a reward server (``POST {url}/verl``), tried again while it is busy or a worker
    failed (`recovery.integrations.client`); `RewardServerError` when it cannot answer by the deadline."""
    body = {
        "data_sources": [None if s is None else str(s) for s in sources],
        "solution_strs": list(solutions),
        "ground_truths": list(golds),
        "extra_infos": [{k: v for k, v in dict(e or {}).items() if k != "rollout_reward_scores"} for e in extras],
    }
    return post_json(url.rstrip("/") + "/verl", body, RetryPolicy.from_kwargs(kwargs))["results"]


def compute_score(
    data_source: Any = None,
    solution_str: str | None = None,
    ground_truth: Any = None,
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """``{"score", "correctness", "doubt", "length", "scorable"}`` of one row (verl's per-row form)."""
    return compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info], **kwargs)[0]
