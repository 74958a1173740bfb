"""The integrations score with the policy's own closing think tag (issue 35): an EXAONE-Deep policy's completion
closes at ``</thought>`` and a ``</think>`` it writes is text, as in TRL, where the GRPO stage passes the
model's tag to every reward (`recovery.rewards.registry.build_reward`)."""

from __future__ import annotations

from recovery.integrations.core import RewardSettings, score_rows
from recovery.rewards.registry import build_reward

ROWS = [{"answer": "12", "answer_type": "numeric", "domain": "math"}] * 3
COMPLETIONS = [
    "7 + 5 = 12.</thought>The answer is \\boxed{12}.",  # closed by EXAONE's own tag
    "7 + 5 = 12.</think>The answer is \\boxed{12}.",  # </think> is text to EXAONE: never closed
    "The tag </think> is text. 7 + 5 = 12.</thought>\\boxed{12}",
]


def _correctness(reward) -> list[float | None]:
    try:
        return [parts.correctness for parts in score_rows(reward, COMPLETIONS, ROWS)]
    finally:
        reward.close()


def test_the_policys_closing_tag_decides_in_the_integrations_as_in_trl():
    exaone = RewardSettings(think_close="</thought>", grader_workers=1).build()
    assert _correctness(exaone) == [1.0, 0.0, 1.0]
    r1 = RewardSettings(grader_workers=1).build()
    assert _correctness(r1) == [0.0, 1.0, 1.0]  # an R1 policy closes at </think>, wherever it stands
    trl = build_reward("recovery", {"correctness": {"workers": 1}}, think_close="</thought>")
    assert _correctness(trl) == [1.0, 0.0, 1.0]
