"""A verl agent loop that continues a recovery prompt from its exact token ids (needs verl; GPU-free import).

Why: verl (0.9) builds every rollout prompt from the row's chat messages with the tokenizer's chat template
and ``add_generation_prompt=True`` (``AgentLoopBase.ct_build_initial_tokens``). That cannot carry an assistant
*prefill* — the intervened reasoning the policy must continue — and it would tokenize the prefill together
with the template, where the benchmark presents it after a hard token boundary. A recovery verl export
(``recovery export RUN --format verl``) therefore stores, per row, the benchmark's prompt ids
(``recovery_prompt_ids``: BOS included where the model's tokenizer adds one, then the chat template, the think
opener and the prefix) and names this loop in its ``agent_name`` column; verl hands every dataset column to the
loop as a keyword argument, and the loop sends those ids to the rollout server unchanged.

Register it with the ``agent_loop.yaml`` the export writes (``actor_rollout_ref.rollout.agent.
agent_loop_config_path=<export>/verl/agent_loop.yaml``); a row naming it in a run that did not register it
fails with verl's "Agent loop recovery_prefill not registered" — never a silent fresh answer.
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

from recovery.integrations.verl_rows import AGENT_NAME, PROMPT_IDS_COLUMN

__all__ = ["RecoveryPrefillAgentLoop"]


@register(AGENT_NAME)
class RecoveryPrefillAgentLoop(AgentLoopBase):
    """One turn from the row's ``recovery_prompt_ids``: the policy continues the intervened reasoning."""

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        ids = kwargs.get(PROMPT_IDS_COLUMN)
        if ids is None:
            raise ValueError(
                f"agent loop {AGENT_NAME!r} needs the row's {PROMPT_IDS_COLUMN!r} column "
                "(written by `recovery export RUN --format verl`)"
            )
        prompt_ids = [int(i) for i in ids]
        limit = int(self.rollout_config.prompt_length)
        if len(prompt_ids) > limit:  # verl's own loops cut from the left, losing the BOS and the question
            raise ValueError(
                f"a recovery prompt of {len(prompt_ids)} tokens exceeds rollout.prompt_length={limit}; raise it "
                "or export with --max-prompt-tokens (rows over the budget are dropped and counted there)"
            )
        request_id = uuid4().hex
        output = await self.server_manager.generate(
            request_id=request_id, prompt_ids=prompt_ids, sampling_params=sampling_params
        )
        limit = int(self.rollout_config.response_length)
        response_ids = list(output.token_ids)[:limit]
        logprobs = list(output.log_probs)[:limit] if output.log_probs else None
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            response_mask=[1] * len(response_ids),
            response_logprobs=logprobs,
            multi_modal_data={},
            num_turns=2,
            metrics=AgentLoopMetrics(),
            extra_fields=dict(output.extra_fields or {}),
        )
