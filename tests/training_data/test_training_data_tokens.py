"""Training rows in the policy's tokens, under the real DeepSeek-R1-Distill-Qwen tokenizer, on a run of real R1
traces (``shared/data/real_traces``) continued with what each trace wrote after the cut: SFT rows carry the
benchmark's own prompt ids (text tokenization merges ``.`` with the completion's ``\\n\\n``), GRPO prompts
tokenize to them, and rows over a token budget are dropped and counted, never truncated."""

from __future__ import annotations

import pytest

from recovery.generation import GenerationResult, Sample
from recovery.models import get_spec
from recovery.prompt_building import build_prompt_ids
from recovery.training_data import GRPOPromptConfig, PromptRenderer, SFTConfig, load_run
from recovery.training_data.grpo import grpo_rows
from recovery.training_data.sft import sft_rows
from recovery.training_data.tokens import (
    OVER_BUDGET,
    PROMPT_IDS_MISMATCH,
    PROMPT_OVER_BUDGET,
    STAGE,
    TokenBudget,
    grpo_prompt_tokens,
    trainer_prompt_ids,
)

SPEC = get_spec("DeepSeek-R1-Distill-Qwen-7B")


class Remainders:
    """Continues each chain with what its original trace wrote after the cut (graded correct when the trace was)."""

    concurrency = 1  # the Generator protocol: one request in flight

    name = "remainders"

    def __init__(self, remainder_of: dict[str, str]) -> None:
        self.remainder_of = remainder_of

    def generate(self, requests):
        for request in requests:
            text = self.remainder_of[request.request_id]
            yield GenerationResult(request.request_id, (Sample(text, len(text), "stop"),), prompt_tokens=0)

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def real_run(tmp_path_factory, shared_data):
    """A run of 8 real R1-distill traces, random characters at t = 0.5 and 0.9, one continuation per chain."""
    from recovery.pipeline import (
        DatasetConfig,
        InterventionsConfig,
        ModelConfig,
        RunConfig,
        SamplingConfig,
        TracesConfig,
        run_pipeline,
    )
    from recovery.run_dir import open_run
    from recovery.segment import parse_trace

    data = shared_data / "real_traces"
    config = RunConfig(
        run_dir=str(tmp_path_factory.mktemp("real") / "run"),
        dataset=DatasetConfig(name="real_traces", path=str(data), limit=8),
        models=[ModelConfig(name=SPEC.name, spec=SPEC.name)],
        traces=TracesConfig(
            source="import",
            path=str(data / "thought_anchors_math_cots.jsonl"),
            fields={
                "problem_id": "problem_id",
                "response": "solution",
                "question": "problem",
                "answer": "gt_answer",
                "id_prefix": "thought_anchors_math",
            },
        ),
        interventions=InterventionsConfig(names=["random_characters"], timesteps=[0.5, 0.9]),
        continuation=SamplingConfig(n=1),
        cpu_workers=1,
    )
    run_pipeline(config, stages=["problems", "traces", "filter", "chains"], progress=False)
    run = open_run(config.run_dir)
    traces = {r["id"]: r for r in run.trace_rows(["id", "problem_id", "model", "text"])}
    remainder_of = {}
    for chain in run.chain_rows(["id", "trace_id", "original_prefix_chars"]):
        trace = traces[chain["trace_id"]]
        parsed = parse_trace(trace["problem_id"], trace["model"], trace["text"])
        remainder_of[chain["id"]] = parsed.reasoning[chain["original_prefix_chars"] :] + parsed.think_close
        remainder_of[chain["id"]] += parsed.answer_text
    run_pipeline(config, make_generator=lambda model: Remainders(remainder_of), progress=False, n_boot=10)
    return load_run(config.run_dir)


@pytest.fixture(scope="module")
def renderer(r1_tokenizer, real_run):
    return PromptRenderer.for_run(r1_tokenizer, SPEC, real_run.config)


@pytest.fixture(scope="module")
def sft(real_run, renderer):
    return sft_rows(real_run, renderer, SFTConfig(clean_fraction=0.5))


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_sft_rows_train_from_the_benchmark_prompt_ids(sft, real_run, renderer, r1_tokenizer):
    rows, drops, counts = sft
    assert counts["recovery_rows"] > 0 and counts["clean_rows"] > 0 and not drops.total(STAGE)
    chains = {c.id: c for c in real_run.chains}
    merged = 0
    for row in rows:
        n = row["prompt_tokens"]
        ids, mask = row["input_ids"], row["completion_mask"]
        assert mask == [0] * n + [1] * row["completion_tokens"] and len(ids) == len(mask)
        if row["kind"] == "recovery":  # the ids the benchmark's own prompt builder presents for this chain
            chain = chains[row["chain_id"]]
            messages = renderer.messages(real_run.problems[chain.problem_id])
            assert ids[:n] == build_prompt_ids(r1_tokenizer, SPEC, messages, chain.prefix)
        assert ids.count(r1_tokenizer.bos_token_id) == 1 and ids[0] == r1_tokenizer.bos_token_id
        assert r1_tokenizer.decode(ids[:n]) == r1_tokenizer.bos_token + row["prompt"]
        assert r1_tokenizer.decode(ids[n:]) == row["completion"] + r1_tokenizer.eos_token
        # What SFTTrainer makes of the text: prompt and prompt + completion tokenized apart.
        text_prompt = r1_tokenizer(text=row["prompt"])["input_ids"]
        assert text_prompt == ids[:n]
        joint = r1_tokenizer(text=row["prompt"] + row["completion"])["input_ids"]
        merged += _common_prefix(text_prompt, joint) < len(text_prompt)
    # Most rows cut after a step's final "." and continue with "\n\n": one token (".ĊĊ") when tokenized together.
    assert merged > len(rows) // 2


def test_sft_rows_over_budget_are_dropped_and_counted_never_truncated(sft, real_run, renderer):
    rows, _, _ = sft
    recovery = [r for r in rows if r["kind"] == "recovery"]
    lengths = sorted(len(r["input_ids"]) for r in recovery)
    budget = lengths[len(lengths) // 2]
    over = sum(n > budget for n in lengths)
    config = SFTConfig(clean_fraction=0.5, max_tokens=budget, keep_clean_fraction=False)
    kept, drops, counts = sft_rows(real_run, renderer, config)
    assert over > 0 and counts["recovery_rows"] == len(recovery) - over
    assert drops.get(STAGE, OVER_BUDGET) >= over  # the recoveries, and clean cuts tried and left out
    assert {"stage": STAGE, "reason": OVER_BUDGET, "count": drops.get(STAGE, OVER_BUDGET)} in drops.rows()
    by_chain = {r["chain_id"]: r for r in recovery}
    for row in kept:
        assert len(row["input_ids"]) <= budget
        if row["kind"] == "recovery":  # the same row as without a budget: whole, with its answer and EOS
            assert row["input_ids"] == by_chain[row["chain_id"]]["input_ids"]
            assert row["completion"].count(SPEC.think_close) == 1
    prompt_budget = sorted(r["prompt_tokens"] for r in recovery)[len(recovery) // 2]
    _, drops, _ = sft_rows(real_run, renderer, SFTConfig(clean_fraction=0.0, max_prompt_tokens=prompt_budget))
    assert drops.get(STAGE, PROMPT_OVER_BUDGET) == sum(r["prompt_tokens"] > prompt_budget for r in recovery) > 0


def test_grpo_prompts_tokenize_to_the_benchmark_ids_within_budget(real_run, renderer, r1_tokenizer):
    built = grpo_rows(real_run, renderer, GRPOPromptConfig(clean_fraction=0.2))
    assert built.rows and not built.drops.total(STAGE)
    chains = {c.id: c for c in real_run.chains}
    for row in built.rows:
        ids = trainer_prompt_ids(r1_tokenizer, row["prompt"])  # what GRPOTrainer feeds the policy
        assert len(ids) == row["prompt_tokens"] and ids.count(r1_tokenizer.bos_token_id) == 1
        if row["kind"] == "intervened":
            chain = chains[row["chain_id"]]
            messages = renderer.messages(real_run.problems[chain.problem_id])
            assert ids == build_prompt_ids(r1_tokenizer, SPEC, messages, chain.prefix)
    intervened = [r for r in built.rows if r["kind"] == "intervened"]
    budget = sorted(r["prompt_tokens"] for r in intervened)[len(intervened) // 2]
    bounded = grpo_rows(real_run, renderer, GRPOPromptConfig(max_prompt_tokens=budget))
    over = sum(r["prompt_tokens"] > budget for r in intervened)
    assert over > 0 and bounded.drops.get(STAGE, PROMPT_OVER_BUDGET) == over
    assert len(bounded.rows) == len(intervened) - over and all(r["prompt_tokens"] <= budget for r in bounded.rows)


def test_grpo_trainer_tokenizes_the_prompts_to_the_benchmark_ids(
    real_run, renderer, r1_tokenizer, r1_random_model, tmp_path
):
    """`trainer_prompt_ids` is what TRL 1.16's GRPOTrainer itself does with our prompts (its
    ``_tokenize_prompts``, the step before generation): the check made at build time holds in training."""
    pytest.importorskip("torch")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    built = grpo_rows(real_run, renderer, GRPOPromptConfig(clean_fraction=0.2))
    rows = sorted(built.rows, key=lambda r: r["prompt_tokens"])[:4]
    args = GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=4,
        beta=0.0,
        use_cpu=True,
        bf16=False,
        report_to=[],
        save_strategy="no",
    )
    trainer = GRPOTrainer(
        model=r1_random_model(),
        reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=r1_tokenizer,
    )
    prompt_ids, _, _ = trainer._tokenize_prompts([r["prompt"] for r in rows])
    assert [list(ids) for ids in prompt_ids] == [trainer_prompt_ids(r1_tokenizer, r["prompt"]) for r in rows]
    assert [len(ids) for ids in prompt_ids] == [r["prompt_tokens"] for r in rows]


def test_a_prompt_the_trainer_would_tokenize_differently_is_refused(real_run, r1_tokenizer_opener):
    """Under the template revision that ends ``<think>\\n``, reasoning starting with a blank line would join
    the template's newline into one token when GRPOTrainer tokenizes the text, unlike the benchmark's ids."""
    renderer = PromptRenderer.for_run(r1_tokenizer_opener, SPEC, real_run.config)
    problem = next(iter(real_run.problems.values()))
    prefix = "\n\nOkay, let me see."
    prompt = renderer.render(problem, prefix)
    assert grpo_prompt_tokens(renderer, problem, prefix, prompt, TokenBudget()) == PROMPT_IDS_MISMATCH
    fine = "Okay, let me see."
    assert grpo_prompt_tokens(renderer, problem, fine, renderer.render(problem, fine), TokenBudget()) == len(
        renderer.prompt_ids(problem, fine)
    )


def test_sft_trainer_trains_the_pretokenized_rows_on_the_completion_only(
    renderer, real_run, r1_tokenizer, r1_random_model, tmp_path
):
    """TRL 1.16's SFTTrainer takes the rows' ids as they are (no re-tokenization, no truncation) and puts the
    loss on completion + EOS only; two steps train a tiny model with the real tokenizer's vocabulary."""
    torch = pytest.importorskip("torch")
    from datasets import Dataset
    from trl import SFTConfig as TrlSFTConfig
    from trl import SFTTrainer

    from recovery.training_data.tokens import sft_token_columns

    problem = next(iter(real_run.problems.values()))
    pieces = [("\nOkay, 2 + 3 is 5.", "\n\nSo the answer is 5.\n</think>\n\n\\boxed{5}")] * 2
    pieces += [("\nFirst, 7 times 6.", "\n\nThat is 42.\n</think>\n\n\\boxed{42}")] * 2
    rows = []
    for prefix, completion in pieces:
        columns = sft_token_columns(renderer, problem, prefix, completion, TokenBudget(max_tokens=512))
        rows.append({"prompt": renderer.render(problem, prefix), "completion": completion, **columns})
    dataset = Dataset.from_list(rows)
    text_only = r1_tokenizer(text=rows[0]["prompt"] + rows[0]["completion"])["input_ids"]
    assert text_only[: rows[0]["prompt_tokens"]] != rows[0]["input_ids"][: rows[0]["prompt_tokens"]]  # ".ĊĊ"

    args = TrlSFTConfig(
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=2,
        max_length=512,
        use_cpu=True,
        bf16=False,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
    )
    trainer = SFTTrainer(model=r1_random_model(), args=args, train_dataset=dataset, processing_class=r1_tokenizer)
    for row, example in zip(rows, trainer.train_dataset, strict=True):
        assert example["input_ids"] == row["input_ids"]  # the rows as given: no re-tokenization
    # The labels are the collated ones (TRL < 1.16 builds them in the collator from completion_mask).
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(2)])
    for labels, row in zip(batch["labels"].tolist(), rows[:2], strict=True):
        trained = [t for t in labels if t != -100]
        assert trained == row["input_ids"][row["prompt_tokens"] :]
    trainer.train()
    assert trainer.state.global_step == 2
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in trainer.state.log_history if "loss" in r)


def test_token_budgets_are_positive_and_documented():
    import doctest

    import recovery.training_data.tokens as tokens

    assert doctest.testmod(tokens).failed == 0
    with pytest.raises(ValueError, match="max_prompt_tokens"):
        GRPOPromptConfig(max_prompt_tokens=0)
    with pytest.raises(ValueError, match="max_tokens"):
        SFTConfig(max_tokens=-1)
    assert TokenBudget(max_tokens=10).reason(10, 10) is None and TokenBudget().reason(10**9, 10**9) is None
