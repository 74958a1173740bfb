"""The recovery rewards in other RL frameworks and as a service; `docs/training-frameworks.md` shows each in use.

* `recovery.integrations.verl` — ``compute_score`` / ``compute_score_batch``, verl's custom reward function;
  `recovery.integrations.verl_agent_loop` — the agent loop that rolls out from an exported row's exact prompt
  ids (verl's chat templating cannot carry the assistant prefill; it needs verl installed).
* `recovery.integrations.openrlhf` — ``reward_func(queries, prompts, labels)``, OpenRLHF's reward-function
  file (``--remote_rm_url path/to/file.py``), with labels that carry the reward's columns.
* `recovery.integrations.server` — ``recovery serve-rewards``: the same rewards over HTTP (FastAPI + uvicorn),
  graded in worker processes; OpenRLHF's remote reward protocol is one of the shapes it speaks.

All of them score through `recovery.integrations.core.score_rows`, i.e. `recovery.rewards.RecoveryReward`, the
reward TRL's GRPOTrainer calls: same completion, same row, same value. Importing this package loads no
framework.
"""

from recovery.integrations.core import (
    PARTS,
    REWARD_COLUMNS,
    RewardSettings,
    UnscorableRow,
    score_rows,
    scores_dict,
    shared_reward,
)

__all__ = ["PARTS", "REWARD_COLUMNS", "RewardSettings", "UnscorableRow", "score_rows", "scores_dict", "shared_reward"]
