"""A new reward, added as docs/architecture.md says (a class, one `REWARDS` entry), named with its options in a
GRPO recipe and resolved by the GRPO script (`TrlParser` on the recipe, then `reward_functions`): it is built
with the recipe's options and the policy's closing think tag, beside a built-in configured by the flat keys."""

from __future__ import annotations

import pytest

from recovery.models import get_spec
from recovery.rewards import REWARDS, CorrectnessReward, RewardFunction, RewardSpec, completion_text


class BrevityReward(RewardFunction):
    """1.0 when the reasoning (up to ``think_close``) has at most ``max_chars`` characters, else 0.0."""

    __name__ = "brevity_reward"

    def __init__(self, *, max_chars: int = 2000, think_close: str = "</think>", **kwargs):
        super().__init__(**kwargs)
        self.max_chars, self.think_close = max_chars, think_close

    def _score_row(self, row, scored):
        text = completion_text(row.completion, self.think_close)
        if text is None:
            return None
        return float(len(text.partition(self.think_close)[0]) <= self.max_chars)


RECIPE = """\
reward_funcs: [correctness, brevity]
reward_options:
  brevity: {max_chars: 400}
"""
TRAINING = (
    "model_name_or_path: tiny-reasoner\noutput_dir: out\nuse_cpu: true\nbf16: false\ncorrectness_timeout_s: 2.0\n"
)


def test_a_new_reward_is_resolved_from_a_grpo_recipe(tmp_path, restored):
    pytest.importorskip("trl")
    from recovery.training.grpo import make_parser, reward_functions

    restored(REWARDS)

    REWARDS["brevity"] = RewardSpec(BrevityReward)

    recipe = tmp_path / "grpo.yaml"
    recipe.write_text(RECIPE + TRAINING + f"output_dir: {tmp_path / 'out'}\n", encoding="utf-8")
    script_args, _, _ = make_parser().parse_args_and_config(args=["--config", str(recipe)])
    spec = get_spec("tiny-reasoner")
    correctness, brevity = reward_functions(script_args, tokenizer=None, spec=spec)
    assert isinstance(correctness, CorrectnessReward) and correctness.timeout_s == 2.0  # the flat key
    assert isinstance(brevity, BrevityReward) and brevity.max_chars == 400  # reward_options
    assert brevity.think_close == spec.think_close  # the policy's, given because the constructor takes it
    short, long = "x" * 10 + spec.think_close + "5", "x" * 500 + spec.think_close + "5"
    assert brevity(completions=[short, long, None]) == [1.0, 0.0, None]
    correctness.close()
