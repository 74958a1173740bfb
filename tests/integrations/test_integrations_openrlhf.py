"""OpenRLHF loads the recovery reward-function file and scores the exported prompts with its own code.

OpenRLHF is installed from PyPI without its GPU stack (``pip install --no-deps openrlhf`` and the light packages
``openrlhf.utils.agent`` imports: .ci/run). Its ``SingleTurnAgentExecutor`` — the code behind
``--remote_rm_url`` — loads ``reward_func`` from ``recovery/integrations/openrlhf.py``, tokenizes the exported
prompt with ``add_special_tokens=False``, decodes prompt + response with ``skip_special_tokens=False`` and calls
the function. The one boundary faked is the vLLM engine it generates with: it returns a known completion.
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

pytest.importorskip("openrlhf")

from recovery.integrations import openrlhf as recovery_openrlhf  # noqa: E402
from recovery.rewards import RecoveryReward  # noqa: E402


@pytest.fixture(scope="module")
def export(small_run, r1_renderer, tmp_path_factory):
    from recovery.training_data import GRPOPromptConfig
    from recovery.training_data.rl_export import export_rl

    out = tmp_path_factory.mktemp("openrlhf_export")
    result = export_rl(small_run.path, out, "openrlhf", r1_renderer, GRPOPromptConfig(clean_fraction=0.2))
    with open(result.data_file, encoding="utf-8") as f:
        return result, [json.loads(line) for line in f]


class FakeEngine:
    """The vLLM engine (the faked boundary): answers each prompt with the next queued completion's tokens."""

    def __init__(self, tokenizer, texts):
        self.tokenizer, self.texts, self.prompts = tokenizer, list(texts), []

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        self.prompts.append(list(prompt_token_ids))
        text = self.texts.pop(0)
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        output = SimpleNamespace(token_ids=ids, text=text, finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[output])


def run_executor(executor, tokenizer, rows, texts):
    engine = FakeEngine(tokenizer, texts)
    params = SimpleNamespace(max_tokens=512, logprobs=None)

    async def all_rows():
        return [await executor.execute(row["prompt"], row["label"], params, 4096, tokenizer, engine) for row in rows]

    return asyncio.run(all_rows()), engine


def test_openrlhf_calls_the_reward_file_and_gets_the_trl_values(export, grpo, r1_tokenizer):
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    result, exported = export
    rows, completions = grpo
    assert result.rows == len(exported) == len(rows) and result.drops == {}
    executor = SingleTurnAgentExecutor(remote_rm_url=recovery_openrlhf.__file__)  # OpenRLHF loads reward_func
    assert executor.reward_func is not None
    flat = [(row, exp, text) for row, exp, texts in zip(rows, exported, completions) for text in texts]
    outputs, engine = run_executor(executor, r1_tokenizer, [e for _, e, _ in flat], [t for _, _, t in flat])
    columns = {key: [row[key] for row, _, _ in flat] for key in rows[0]}
    expected = RecoveryReward().parts(completions=[t for _, _, t in flat], **columns)
    assert {p.verdict for p in expected} >= {"correct", "wrong", "no_answer"}
    for (row, _, _), sent, output, want in zip(flat, engine.prompts, outputs, expected):
        assert sent == r1_tokenizer(text=row["prompt"])["input_ids"]  # the benchmark's ids, BOS included once
        assert sent[0] == r1_tokenizer.bos_token_id and sent.count(r1_tokenizer.bos_token_id) == 1
        assert float(output["reward"]) == pytest.approx(want.score)
        assert float(output["scores"]) == pytest.approx(want.correctness)
        logs = {k: float(v) for k, v in output["extra_logs"].items()}
        assert logs == pytest.approx(
            {"correctness": want.correctness, "doubt": want.doubt or 0.0, "length": want.length or 0.0, "scorable": 1.0}
        )


def test_labels_carry_what_the_reward_needs(export):
    _, exported = export
    label = json.loads(exported[0]["label"])
    assert {"answer", "answer_type", "domain", "intervention", "reference_length"} <= set(label)
    assert label["strip"] and all(isinstance(s, str) for s in label["strip"])


def test_a_row_the_reward_cannot_score_follows_the_stated_policy(export, monkeypatch):
    """A label whose gold cannot be used, and a query that does not hold its prompt: the neutral score with
    scorable=0 by default; under unscorable='raise' (set through the settings variable) the call fails."""
    _, exported = export
    bad = json.dumps({"answer": "no idea", "answer_type": "multiple_choice", "domain": "x"})
    prompt = exported[0]["prompt"]
    queries, prompts = [prompt + "</think>(A)", "something else</think>(A)"], [prompt, prompt]
    out = recovery_openrlhf.reward_func(queries, prompts, [bad, exported[0]["label"]])
    assert out["rewards"].tolist() == [0.0, 0.0] and out["extra_logs"]["scorable"].tolist() == [0.0, 0.0]
    monkeypatch.setenv(recovery_openrlhf.SETTINGS_ENV, json.dumps({"unscorable": "raise"}))
    with pytest.raises(ValueError, match="gold"):
        recovery_openrlhf.reward_func(queries[:1], prompts[:1], [bad])


class Brevity:
    """A reward added to the registry from outside the package (TRL's contract): 1.0 up to ``max_chars``."""

    def __init__(self, max_chars: int = 1000) -> None:
        self.max_chars = max_chars

    def __call__(self, completions, **columns):
        return [1.0 if len(c) <= self.max_chars else 0.0 for c in completions]


def test_a_registry_reward_by_name_with_its_options(export, grpo, r1_tokenizer, monkeypatch):
    """``RECOVERY_REWARD_SETTINGS`` names a reward of the registry (one added to it here) and its options:
    OpenRLHF's executor gets that reward's TRL value for each rollout (``scores`` too: it has no correctness)."""
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    from recovery.rewards.registry import REWARDS, RewardSpec

    monkeypatch.setitem(REWARDS, "brevity", RewardSpec(Brevity))
    settings = {"reward": "brevity", "reward_options": {"max_chars": 40}}
    monkeypatch.setenv(recovery_openrlhf.SETTINGS_ENV, json.dumps(settings))
    _, exported = export
    _, completions = grpo
    texts = [t for texts in completions for t in texts]
    rows = [e for e, texts in zip(exported, completions) for _ in texts]
    want = Brevity(max_chars=40)(completions=texts)
    assert set(want) == {0.0, 1.0}
    outputs, _ = run_executor(
        SingleTurnAgentExecutor(remote_rm_url=recovery_openrlhf.__file__), r1_tokenizer, rows, texts
    )
    assert [float(o["reward"]) for o in outputs] == want == [float(o["scores"]) for o in outputs]
