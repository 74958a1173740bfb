"""verl runs the recovery reward and rolls out from the exported prompts with its own code.

Installed from PyPI without its GPU stack (``pip install --no-deps verl`` plus the light packages its dataset,
agent-loop and reward modules import: .ci/run). What runs is verl's own: ``RLHFDataset`` reads the export,
``hydra.utils.instantiate`` builds the agent loop from the ``agent_loop.yaml`` the export wrote (as verl's
``AgentLoopWorker`` does), ``load_reward_manager`` loads ``compute_score`` from ``pkg://recovery.integrations.verl``
and its ``naive`` reward manager scores each row; the legacy ``batch`` manager calls ``compute_score_batch``.
The one boundary faked is the LLM server the agent loop calls: it records the prompt ids it is sent and
returns the tokens of a known completion.
"""

from __future__ import annotations

import copy

import pytest

pytest.importorskip("verl")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from recovery.integrations.verl_rows import AGENT_NAME, PROMPT_IDS_COLUMN, PROMPT_TEXT_COLUMN  # noqa: E402
from recovery.prompt_building import build_prompt_ids  # noqa: E402
from recovery.rewards import RecoveryReward  # noqa: E402


@pytest.fixture(scope="module")
def export(small_run, r1_renderer, tmp_path_factory):
    from recovery.training_data import GRPOPromptConfig
    from recovery.training_data.rl_export import export_rl

    out = tmp_path_factory.mktemp("verl_export")
    return export_rl(small_run.path, out, "verl", r1_renderer, GRPOPromptConfig(clean_fraction=0.2))


@pytest.fixture(scope="module")
def dataset(export, r1_tokenizer, tmp_path_factory):
    """verl's own RL dataset over the exported Parquet."""
    from verl.utils.dataset.rl_dataset import RLHFDataset

    config = OmegaConf.create(
        {"cache_dir": str(tmp_path_factory.mktemp("verl_cache")), "filter_overlong_prompts": False}
    )
    return RLHFDataset(data_files=[export.data_file], tokenizer=r1_tokenizer, config=config)


class FakeServer:
    """The LLM server (the faked boundary): records each prompt, answers the tokens queued for it."""

    def __init__(self, answers):
        self.answers, self.prompts = list(answers), []

    async def generate(self, *, request_id, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        self.prompts.append(list(prompt_ids))
        return TokenOutput(token_ids=self.answers.pop(0))


def agent_loop(export, tokenizer, server):
    """The export's agent loop, built the way verl's AgentLoopWorker builds one."""
    import hydra
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, _agent_loop_registry
    from verl.utils.dataset.rl_dataset import RLHFDataset

    for entry in OmegaConf.load(f"{export.dir}/agent_loop.yaml"):  # what agent_loop_config_path does
        _agent_loop_registry[entry.name] = entry
    trainer = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 2048, "response_length": 256}}})
    return hydra.utils.instantiate(
        config=_agent_loop_registry[AGENT_NAME],
        trainer_config=DictConfigWrap(config=trainer),
        server_manager=server,
        tokenizer=tokenizer,
        processor=None,
        hf_model_type=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(OmegaConf.create({})),
    )


def response_ids(tokenizer, text: str) -> list[int]:
    return [*tokenizer.encode(text, add_special_tokens=False), tokenizer.eos_token_id]


def test_the_export_rolls_out_from_the_benchmark_prompt_ids(
    export, dataset, grpo, small_run, r1_renderer, r1_tokenizer
):
    """verl's dataset reads every exported row; the agent loop sends the rollout server the benchmark's prompt
    ids — one BOS, the template, the opener and the intervened prefix — and returns the response tokens."""
    import asyncio

    from recovery.training_data import load_run

    rows, _ = grpo
    assert len(dataset) == export.rows == len(rows) > 0 and export.drops == {}
    data = load_run(small_run.path)
    chains = {c.id: c for c in data.chains}
    items = [dataset[i] for i in range(len(dataset))]
    answer = response_ids(r1_tokenizer, "</think>\\boxed{1}")
    server = FakeServer([answer] * len(items))
    loop = agent_loop(export, r1_tokenizer, server)
    outputs = [asyncio.run(loop.run({"temperature": 1.0}, **item)) for item in items]
    bos = r1_tokenizer.bos_token_id
    for item, row, sent, output in zip(items, rows, server.prompts, outputs):
        assert item["agent_name"] == AGENT_NAME and item["reward_model"]["ground_truth"] == row["answer"]
        assert item["raw_prompt"][-1]["role"] == "user"  # verl's own view of the row: the user turn
        expected = r1_tokenizer(text=row["prompt"])["input_ids"]  # what GRPOTrainer feeds the policy
        if row["kind"] == "intervened":  # the benchmark's own prompt ids for the chain
            messages = r1_renderer.messages(data.problems[row["problem_id"]])
            assert expected == build_prompt_ids(
                r1_tokenizer, r1_renderer.spec, messages, chains[row["chain_id"]].prefix
            )
        assert sent == list(item[PROMPT_IDS_COLUMN]) == expected
        assert sent[0] == bos and sent.count(bos) == 1  # BOS present once: verl adds none itself
        assert r1_tokenizer.decode(sent) == item[PROMPT_TEXT_COLUMN] == r1_tokenizer.bos_token + row["prompt"]
        assert output.prompt_ids == sent and output.response_ids == answer and sum(output.response_mask) == len(answer)


def test_an_oversized_prompt_is_refused_not_cut(export, dataset, r1_tokenizer):
    import asyncio

    loop = agent_loop(export, r1_tokenizer, FakeServer([[1]]))
    loop.rollout_config.prompt_length = 4
    with pytest.raises(ValueError, match="prompt_length"):
        asyncio.run(loop.run({}, **dataset[0]))


def proto(tokenizer, items, texts):
    """The batch a verl rollout hands its reward manager: left-padded prompts, right-padded responses."""
    from verl import DataProto

    pad = tokenizer.pad_token_id
    prompts = [list(item[PROMPT_IDS_COLUMN]) for item in items]
    responses = [response_ids(tokenizer, t) for t in texts]
    width_p, width_r = max(map(len, prompts)), max(map(len, responses))
    tensors = {
        "prompts": torch.tensor([[pad] * (width_p - len(p)) + p for p in prompts]),
        "responses": torch.tensor([r + [pad] * (width_r - len(r)) for r in responses]),
        "attention_mask": torch.tensor(
            [
                [0] * (width_p - len(p)) + [1] * (len(p) + len(r)) + [0] * (width_r - len(r))
                for p, r in zip(prompts, responses)
            ]
        ),
    }
    non_tensors = {
        key: np.array([copy.deepcopy(item[key]) for item in items], dtype=object)
        for key in ("data_source", "reward_model", "extra_info")
    }
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors)


def reward_config(name: str, manager: str, **reward_kwargs):
    return OmegaConf.create(
        {
            "reward": {
                "custom_reward_function": {
                    "path": "pkg://recovery.integrations.verl",
                    "name": name,
                    "reward_kwargs": reward_kwargs,
                },
                "reward_manager": {"source": "register", "name": manager},
            }
        }
    )


def trl_parts(rows, texts):
    """What TRL's GRPOTrainer gets from the reward on the same rows: every dataset column as a keyword."""
    columns = {key: [row[key] for row in rows] for key in rows[0]}
    return RecoveryReward().parts(completions=texts, **columns)


def test_verl_reward_managers_score_exactly_as_trl(dataset, grpo, r1_tokenizer):
    """Each row with each of its completions: verl's naive manager (per row, via load_reward_manager) and its
    batch manager (compute_score_batch) give the score and parts TRL's reward gives the same row."""
    from verl.trainer.ppo.reward import get_custom_reward_fn, load_reward_manager
    from verl.workers.reward_manager import get_reward_manager_cls

    rows, completions = grpo
    flat_rows = [row for row, texts in zip(rows, completions) for _ in texts]
    items = [dataset[i] for i, texts in enumerate(completions) for _ in texts]
    texts = [t for ts in completions for t in ts]
    expected = trl_parts(flat_rows, texts)
    assert {p.verdict for p in expected} >= {"correct", "wrong", "no_answer"}
    assert any(p.doubt == 1.0 for p in expected) and any(p.length and p.length < 0 for p in expected)

    batch = proto(r1_tokenizer, items, texts)
    naive = load_reward_manager(reward_config("compute_score", "naive"), r1_tokenizer)
    per_row = [naive.loop.run_until_complete(naive.run_single(batch[i : i + 1])) for i in range(len(batch))]
    for got, want in zip(per_row, expected):
        assert got["reward_score"] == pytest.approx(want.score)
        info = got["reward_extra_info"]
        assert (info["correctness"], info["doubt"], info["length"], info["scorable"]) == pytest.approx(
            (want.correctness, want.doubt or 0.0, want.length or 0.0, 1.0)
        )

    score_fn = get_custom_reward_fn(reward_config("compute_score_batch", "batch"))
    manager = get_reward_manager_cls("batch")(tokenizer=r1_tokenizer, num_examine=0, compute_score=score_fn)
    result = manager(proto(r1_tokenizer, items, texts), return_dict=True)
    lengths = batch.batch["attention_mask"][:, batch.batch["prompts"].shape[-1] :].sum(-1)
    rewards = result["reward_tensor"][torch.arange(len(texts)), lengths - 1]
    assert rewards.tolist() == pytest.approx([p.score for p in expected])
    assert result["reward_extra_info"]["correctness"] == [p.correctness for p in expected]


def documented_config(*extra: str):
    """verl 0.9.1's own default trainer config with the ``reward.*`` overrides of the verl command line in
    docs/training-frameworks.md, exactly as written there (then ``extra`` ones), as Hydra would apply them."""
    import re
    from pathlib import Path

    import verl

    doc = (Path(__file__).resolve().parents[2] / "docs" / "training-frameworks.md").read_text()
    command = doc[doc.index("python -m verl.trainer.main_ppo") :].split("```")[0]
    overrides = re.findall(r"(\+?reward\.[\w.]+=\S+)", command)
    assert overrides, "the doc's verl command sets no reward.* option"
    config = OmegaConf.load(Path(verl.__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml")
    for override in [*overrides, *extra]:
        key, value = override.lstrip("+").split("=", 1)
        OmegaConf.update(config, key, yaml_value(value), force_add=override.startswith("+"))
    return config


def yaml_value(text: str):
    return OmegaConf.create({"v": text})["v"] if not text.startswith("{") else OmegaConf.create(text)


def test_the_documented_verl_config_loads_in_verl_own_trainer_code(dataset, grpo, r1_tokenizer):
    """verl 0.9.1's ``load_reward_manager`` — what its trainer calls — accepts the doc's configuration and its
    manager scores each row as TRL does."""
    from verl.trainer.ppo.reward import load_reward_manager

    rows, completions = grpo
    texts = [texts[0] for texts in completions]
    items = [dataset[i] for i in range(len(rows))]
    manager = load_reward_manager(documented_config(), r1_tokenizer)
    batch = proto(r1_tokenizer, items, texts)
    got = [manager.loop.run_until_complete(manager.run_single(batch[i : i + 1])) for i in range(len(batch))]
    assert [g["reward_score"] for g in got] == pytest.approx([p.score for p in trl_parts(rows, texts)])


def test_a_registry_reward_by_name_with_its_options(dataset, grpo, r1_tokenizer):
    """``reward_kwargs.reward`` names a reward of the registry, ``reward_options`` its options: verl's manager
    gets that reward's TRL value."""
    from verl.trainer.ppo.reward import load_reward_manager

    from recovery.rewards.registry import build_reward

    rows, completions = grpo
    unclosed = [f"The answer is \\boxed{{{row['answer']}}}." for row in rows]  # what `unclosed: grade` changes
    completions = [[*ts, u] for ts, u in zip(completions, unclosed)]
    texts = [t for ts in completions for t in ts]
    flat = [row for row, ts in zip(rows, completions) for _ in ts]
    items = [dataset[i] for i, ts in enumerate(completions) for _ in ts]
    config = documented_config(
        "+reward.custom_reward_function.reward_kwargs.reward=correctness",
        "+reward.custom_reward_function.reward_kwargs.reward_options={unclosed: grade}",
    )
    manager = load_reward_manager(config, r1_tokenizer)
    batch = proto(r1_tokenizer, items, texts)
    got = [manager.loop.run_until_complete(manager.run_single(batch[i : i + 1])) for i in range(len(batch))]
    reward = build_reward("correctness", {"unclosed": "grade"})
    want = reward(completions=texts, **{key: [row[key] for row in flat] for key in flat[0]})
    assert [g["reward_score"] for g in got] == want and set(want) == {0.0, 1.0}
    assert want != build_reward("correctness")(completions=texts, **{k: [r[k] for r in flat] for k in flat[0]})


def test_a_row_the_reward_cannot_score_follows_the_stated_policy(dataset, r1_tokenizer):
    """An unusable gold: TRL's reward says None; verl gets the neutral score with scorable=0 by default, and a
    stopped run under unscorable='raise' — never a silent 0.0."""
    from verl.trainer.ppo.reward import load_reward_manager

    from recovery.integrations import UnscorableRow

    item = copy.deepcopy(dataset[0])
    item["reward_model"]["ground_truth"] = "no idea"
    item["extra_info"]["answer_type"] = "multiple_choice"
    batch = proto(r1_tokenizer, [item], ["</think>(A)"])
    assert RecoveryReward()(completions=["</think>(A)"], answer=["no idea"], answer_type=["multiple_choice"]) == [None]

    naive = load_reward_manager(reward_config("compute_score", "naive", neutral_score=0.5), r1_tokenizer)
    got = naive.loop.run_until_complete(naive.run_single(batch))
    assert got["reward_score"] == 0.5 and got["reward_extra_info"]["scorable"] == 0.0

    strict = load_reward_manager(reward_config("compute_score", "naive", unscorable="raise"), r1_tokenizer)
    with pytest.raises(UnscorableRow, match="gold"):
        strict.loop.run_until_complete(strict.run_single(proto(r1_tokenizer, [item], ["</think>(A)"])))


def test_cli_export_format_verl_and_openrlhf(small_run, tmp_path):
    """`recovery export RUN --out DIR --format verl|openrlhf` on a tiny-reasoner run (a tokenizer without BOS)."""
    import json

    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from recovery.cli import app
    from recovery.integrations.verl_rows import AGENT_LOOP_YAML
    from recovery.toy import load_tiny_reasoner

    runner = CliRunner()
    for fmt in ("verl", "openrlhf"):
        result = runner.invoke(app, ["export", str(small_run.path), "--out", str(tmp_path), "--format", fmt])
        assert result.exit_code == 0, result.output
    rows = pq.read_table(tmp_path / "verl" / "train.parquet").to_pylist()
    assert (tmp_path / "verl" / "agent_loop.yaml").read_text() == AGENT_LOOP_YAML
    tokenizer = load_tiny_reasoner()[1]
    assert rows and all(r[PROMPT_IDS_COLUMN] == tokenizer(text=r[PROMPT_TEXT_COLUMN])["input_ids"] for r in rows)
    lines = (tmp_path / "openrlhf" / "train.jsonl").read_text().splitlines()
    assert len(lines) == len(rows) and json.loads(json.loads(lines[0])["label"])["answer_type"] == "numeric"
    bad = runner.invoke(app, ["export", str(small_run.path), "--out", str(tmp_path), "--format", "nemo"])
    assert bad.exit_code == 2 and "--format" in bad.output
