"""The demo's SFT batches: 32 random rows a step, split into gradient-accumulation micro-batches of similar
lengths (transformers' ``batch_rebalance``), in an order the recipe's seed decides (`SeededSFTTrainer`), and a
step that moves the model as one padded batch of the same 32 rows would."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from recovery.training.sft import make_parser  # noqa: E402


def _rows(tokenizer, n: int) -> list[dict]:
    """``n`` pre-tokenized rows of different lengths (3 to 3 + n % 29 + 40 tokens), the loss on their second
    half, as recovery's SFT rows come (``input_ids`` + ``completion_mask``)."""
    ids = tokenizer("Check: 12 - 3 = 9. So 9 + 4 = 13. ")["input_ids"]
    rows = []
    for k in range(n):
        length = 3 + (k * 7) % 29 + (40 if k % 5 == 0 else 0)
        input_ids = (ids * 20)[:length]
        half = length // 2
        rows.append({"input_ids": input_ids, "completion_mask": [0] * half + [1] * (length - half)})
    return rows


def _trainer(tiny_reasoner, tmp_path, rows: list[dict], trainer_class=None, **keys):
    from datasets import Dataset
    from trl import SFTConfig

    from recovery.recipe_parser import installed_names, renamed
    from recovery.training.sft_trainer import SeededSFTTrainer

    model, tokenizer = tiny_reasoner
    # Off under the name the installed transformers reads (activation_checkpointing from 5.23, no warning).
    checkpointing = renamed({"activation_checkpointing": False}, installed_names([SFTConfig]))
    args = SFTConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        bf16=False,
        report_to=[],
        save_strategy="no",
        completion_only_loss=True,
        max_length=512,
        disable_tqdm=True,
        **checkpointing,
        **keys,
    )
    trainer_class = trainer_class or SeededSFTTrainer
    return trainer_class(
        model=copy.deepcopy(model), args=args, train_dataset=Dataset.from_list(rows), processing_class=tokenizer
    )


def test_the_demos_sft_takes_32_random_rows_a_step_in_length_balanced_micro_batches(tmp_path):
    from recovery.demo.training import sft_recipe

    recipe = sft_recipe(tmp_path, [tmp_path / "teacher", tmp_path / "own"], tmp_path / "before", 300, 0, 1e-3, 0.5)
    _, training_args, _ = make_parser().parse_dict(recipe)
    assert training_args.train_sampling_strategy == "batch_rebalance"
    assert training_args.per_device_train_batch_size * training_args.gradient_accumulation_steps == 32


def test_length_balanced_batches_are_random_steps_in_the_order_the_seed_gives(tiny_reasoner, tmp_path):
    """Each step's rows are the next 32 of a random permutation, whatever their lengths; the micro-batches of
    a step hold rows of similar length; the permutation follows ``seed`` (and ``data_seed`` over it), which
    transformers' own sampler ignores."""
    from trl import SFTTrainer

    rows = _rows(tiny_reasoner[1], 96)
    keys = {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 4}
    keys["train_sampling_strategy"] = "batch_rebalance"

    def micro_batches(trainer_class=None, **seeds) -> list[list[int]]:
        trainer = _trainer(tiny_reasoner, tmp_path, rows, trainer_class, **keys, **seeds)
        return list(trainer._get_train_sampler())

    seed_0, seed_1 = micro_batches(seed=0), micro_batches(seed=1)
    assert micro_batches(seed=0) == seed_0 and seed_1 != seed_0
    assert micro_batches(seed=1, data_seed=0) == seed_0
    assert micro_batches(SFTTrainer, seed=0) == micro_batches(SFTTrainer, seed=1)

    steps = [sorted(i for batch in seed_0[s : s + 4] for i in batch) for s in range(0, len(seed_0), 4)]
    assert [len(step) for step in steps] == [32, 32, 32] and sorted(sum(steps, [])) == list(range(96))
    generator = torch.Generator().manual_seed(0)
    order = torch.randperm(96, generator=generator).tolist()
    assert steps == [sorted(order[s : s + 32]) for s in range(0, 96, 32)]  # a random batch's rows
    lengths = [len(row["input_ids"]) for row in rows]
    spans = [max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in seed_0[:4]]
    step_span = max(lengths[i] for i in steps[0]) - min(lengths[i] for i in steps[0])
    assert sum(spans) / 4 < step_span / 2  # micro-batches are of similar lengths


def test_a_length_balanced_step_moves_the_model_as_one_padded_batch_would(tiny_reasoner, tmp_path):
    """32 rows, one SGD step: four length-balanced micro-batches with gradient accumulation and one batch of
    32 give the same weights (the loss is the mean over the step's completion tokens either way)."""
    rows = _rows(tiny_reasoner[1], 32)
    common = {"max_steps": 1, "optim": "sgd", "learning_rate": 1.0, "lr_scheduler_type": "constant", "seed": 0}
    one_batch = _trainer(tiny_reasoner, tmp_path / "one", rows, per_device_train_batch_size=32, **common)
    balanced = _trainer(
        tiny_reasoner,
        tmp_path / "balanced",
        rows,
        per_device_train_batch_size=8,
        gradient_accumulation_steps=4,
        train_sampling_strategy="batch_rebalance",
        **common,
    )
    start = {name: p.detach().clone() for name, p in one_batch.model.named_parameters()}
    one_batch.train()
    balanced.train()
    moved = 0.0
    for (name, p), (_, q) in zip(one_batch.model.named_parameters(), balanced.model.named_parameters(), strict=True):
        moved = max(moved, float((p.detach() - start[name]).abs().max()))
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-6, msg=name)
    assert moved > 1e-3  # the step did move the weights
