"""The built datasets through the installed TRL itself: SFT labels cover only the recovery; GRPO continues our
prompts verbatim and hands the reward functions every column."""

from __future__ import annotations

import pytest

from recovery.training_data import GRPOPromptConfig, SFTConfig, build_grpo_dataset, build_sft_dataset

trl = pytest.importorskip("trl")
pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tiny_model(toy_tokenizer):
    from recovery.toy.model import TinyModelArguments, build_model

    shape = TinyModelArguments(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2, intermediate_size=64
    )
    return build_model(toy_tokenizer, shape)


def test_sft_labels_cover_only_the_recovery(toy_run, renderer, toy_tokenizer, tiny_model, tmp_path):
    from datasets import Dataset
    from trl import SFTConfig as TrlSFTConfig
    from trl import SFTTrainer

    config = SFTConfig(clean_fraction=0.5, interventions=["toy/wrong_continuation"])
    built = build_sft_dataset(toy_run.path, renderer, config)
    path = tmp_path / "sft.parquet"
    built.dataset.to_parquet(str(path))
    dataset = Dataset.from_parquet(str(path))  # the exported form
    args = TrlSFTConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=2,
        use_cpu=True,
        bf16=False,
        report_to=[],
        save_strategy="no",
    )
    trainer = SFTTrainer(model=tiny_model, args=args, train_dataset=dataset, processing_class=toy_tokenizer)
    for row, example in zip(dataset, trainer.train_dataset, strict=True):
        # The labels as training sees them: the trainer's collator applied to the tokenized example (TRL 1.16 builds
        # them while tokenizing, older TRL from the example's completion_mask in the collator; both end here).
        labels = trainer.data_collator([example])["labels"][0].tolist()
        first = next(i for i, label in enumerate(labels) if label != -100)
        assert first == len(toy_tokenizer(text=row["prompt"])["input_ids"])  # nothing of the prompt is trained
        assert all(label != -100 for label in labels[first:])
        ids = example["input_ids"]
        trained = toy_tokenizer.decode([t for t, label in zip(ids, labels, strict=True) if label != -100])
        assert trained == row["completion"] + toy_tokenizer.eos_token  # the recovery (and EOS), nothing else


def test_grpo_continues_our_prompts(toy_run, renderer, toy_tokenizer, tiny_model, tmp_path):
    from trl import GRPOConfig, GRPOTrainer

    config = GRPOPromptConfig(interventions=["toy/unrelated_cot"])
    dataset = build_grpo_dataset(toy_run.path, renderer, config).select(range(2))
    seen: dict = {}

    def record(prompts, completions, completion_ids=None, **columns):
        seen.update(prompts=prompts, completions=completions, columns=columns)
        return [float(i) for i in range(len(completions))]

    record.__name__ = "record"
    args = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=8,
        use_cpu=True,
        bf16=False,
        report_to=[],
        save_strategy="no",
    )
    GRPOTrainer(
        model=tiny_model, reward_funcs=[record], args=args, train_dataset=dataset, processing_class=toy_tokenizer
    ).train()
    assert set(seen["prompts"]) <= set(dataset["prompt"])  # the raw-text prompt, untouched by any template
    assert all(isinstance(c, str) for c in seen["completions"])
    for column in ("answer", "answer_type", "domain", "intervention", "timestep", "reference_length"):
        assert len(seen["columns"][column]) == len(seen["prompts"])
