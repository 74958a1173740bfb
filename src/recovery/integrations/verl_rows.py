"""The layout of one recovery row in verl's RL dataset (Parquet), as ``recovery export RUN --format verl`` writes it.

verl's RL dataset (``verl.utils.dataset.rl_dataset.RLHFDataset``) reads ``data_source``, ``prompt`` (chat
messages), ``ability``, ``reward_model`` (``style``, ``ground_truth``) and ``extra_info``, and hands every
column to the rollout's agent loop and ``reward_model`` / ``extra_info`` to the reward. A recovery row:

==========================  =====================================================================================
``data_source``             ``recovery/<problem source>`` (verl groups validation metrics by it)
``prompt``                  the user turn, as chat messages (verl's own templating and length filter read it)
``ability``                 the problem's domain
``reward_model``            ``{"style": "rule", "ground_truth": <the gold answer>}``
``extra_info``              the reward's other columns (`recovery.integrations.core.REWARD_COLUMNS`) and the row's
                            provenance (``timestep``, ``chain_id``, ``problem_id``, ``model``, ``kind``, ...), plus
                            verl's ``index`` and ``split``
``agent_name``              ``recovery_prefill``: the rollout runs `recovery.integrations.verl_agent_loop`
``recovery_prompt_ids``     the benchmark's prompt ids — BOS where the tokenizer adds it, template, think opener,
                            the intervened prefix after a hard token boundary — which that loop generates from
``recovery_prompt``         the same prompt as text, BOS string included (for reading, and for other trainers)
==========================  =====================================================================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from recovery.integrations.core import REWARD_COLUMNS

__all__ = [
    "AGENT_LOOP_YAML",
    "AGENT_NAME",
    "EXTRA_INFO_KEYS",
    "PROMPT_IDS_COLUMN",
    "PROMPT_TEXT_COLUMN",
    "verl_row",
]

AGENT_NAME = "recovery_prefill"
PROMPT_IDS_COLUMN = "recovery_prompt_ids"
PROMPT_TEXT_COLUMN = "recovery_prompt"
#: ``extra_info`` keys: the reward's columns but the gold (in ``reward_model``), then provenance.
EXTRA_INFO_KEYS: tuple[str, ...] = (
    *(c for c in REWARD_COLUMNS if c != "answer"),
    "timestep",
    "actual_t",
    "reference_tokens",
    "prompt_tokens",
    "problem_id",
    "chain_id",
    "trace_id",
    "model",
    "kind",
)
#: verl's ``actor_rollout_ref.rollout.agent.agent_loop_config_path`` file that registers the loop.
AGENT_LOOP_YAML = f"- name: {AGENT_NAME}\n  _target_: recovery.integrations.verl_agent_loop.RecoveryPrefillAgentLoop\n"


def verl_row(
    row: Mapping[str, Any],
    *,
    index: int,
    split: str,
    prompt_ids: Sequence[int],
    prompt_text: str,
    messages: Sequence[Mapping[str, str]],
) -> dict[str, Any]:
    """The verl row of one GRPO row (`recovery.training_data.grpo`: its columns), with its prompt ids and text.

    >>> r = verl_row({"answer": "7", "answer_type": "numeric", "domain": "math", "source": "toy/arith"}, index=0,
    ...              split="train", prompt_ids=[1, 2], prompt_text="<s>Q", messages=[{"role": "user", "content": "Q"}])
    >>> r["data_source"], r["reward_model"], r["extra_info"]["answer_type"], r["agent_name"]
    ('recovery/toy/arith', {'style': 'rule', 'ground_truth': '7'}, 'numeric', 'recovery_prefill')
    """
    extra = {key: row.get(key) for key in EXTRA_INFO_KEYS}
    extra.update(index=int(index), split=split)
    return {
        "data_source": f"recovery/{row.get('source') or row.get('domain') or 'unknown'}",
        "prompt": [{"role": m["role"], "content": m["content"]} for m in messages],
        "ability": str(row.get("domain") or ""),
        "reward_model": {"style": "rule", "ground_truth": row.get("answer")},
        "extra_info": extra,
        "agent_name": AGENT_NAME,
        PROMPT_IDS_COLUMN: [int(i) for i in prompt_ids],
        PROMPT_TEXT_COLUMN: prompt_text,
    }
