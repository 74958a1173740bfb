"""SFT recovery traces: prompt/completion layout, both sources, clean mixing, dedup, decontamination."""

from __future__ import annotations

import dataclasses

import pytest

from recovery.generation import GenerationResult, Sample
from recovery.toy import recovery_continuation
from recovery.toy.verify import grade_toy
from recovery.training_data import (
    EvalSet,
    GeneratorTeacher,
    QualityConfig,
    SFTConfig,
    ToyTeacher,
    build_sft_dataset,
    clean_count,
)
from recovery.types import Problem

ONE = ["toy/wrong_continuation"]  # 12 chains: small enough for clean supply to cover a 50 % mix


def head(problem) -> str:
    return f"<|user|>\n{problem.question}\n<|assistant|>\n<think>\n"


def test_rejection_sampling_layout_and_drops(toy_run, renderer):
    result = build_sft_dataset(toy_run.path, renderer, SFTConfig(clean_fraction=0.0))
    ds = result.dataset
    chains = {c.id: (p, c) for p, c in toy_run.chains}
    assert len(ds) == len(chains) == result.counts["recovery_rows"]
    for row in ds:
        problem, chain = chains[row["chain_id"]]
        assert row["prompt"] == head(problem) + chain.prefix  # the intervention sits in the prompt
        assert row["prompt"].endswith(chain.prefix) and row["prompt"].count(chain.prefix) == 1
        # the completion starts right after the prefix: the model's sample 0, verbatim
        assert row["completion"] == recovery_continuation(problem, chain.prefix).text
        assert row["origin"] == "own" and row["kind"] == "recovery" and row["sample_index"] == 0
        assert row["completion"].count("</think>") == 1
    # sample 1 (wrong answer) and sample 2 (two closing tags) of every chain are rejected, with reasons
    assert result.drops.get("quality", "not_correct") == len(chains)
    assert result.drops.get("quality", "think_close_count") == len(chains)


def test_loss_boundary_is_a_token_boundary(toy_run, renderer, toy_tokenizer):
    """SFTTrainer masks the tokens of ``prompt`` (tokenized alone) out of the loss; with these rows the
    prompt's tokens are a prefix of the full sequence's, so the mask starts exactly at the recovery."""
    ds = build_sft_dataset(toy_run.path, renderer, SFTConfig(clean_fraction=0.5, interventions=ONE)).dataset
    for row in ds:
        prompt_ids = toy_tokenizer(text=row["prompt"])["input_ids"]
        full_ids = toy_tokenizer(text=row["prompt"] + row["completion"])["input_ids"]
        assert full_ids[: len(prompt_ids)] == prompt_ids
        assert toy_tokenizer.decode(full_ids[len(prompt_ids) :]) == row["completion"]


def test_teacher_source(toy_run, renderer):
    result = build_sft_dataset(
        toy_run.path, renderer, SFTConfig(sources=["teacher"], clean_fraction=0.0), teacher=ToyTeacher(doubt=True)
    )
    chains = {c.id: (p, c) for p, c in toy_run.chains}
    assert len(result.dataset) == len(chains)
    for row in result.dataset:
        problem, chain = chains[row["chain_id"]]
        assert row["origin"] == "teacher" and row["teacher"] == "toy-teacher"
        # the default toy teacher writes the shipped tiny reasoner's self-checking style
        assert row["completion"] == recovery_continuation(problem, chain.prefix, doubt=True, checks=True).text
        assert row["doubt"] == "wait"
    with pytest.raises(ValueError, match="teacher"):
        build_sft_dataset(toy_run.path, renderer, SFTConfig(sources=["teacher"]))


def test_a_given_teacher_is_used_or_refused(toy_run, renderer):
    """``build_sft_dataset(run, r, teacher=ToyTeacher())`` with the default config writes teacher rows; a
    config that leaves the teacher out while one is given is an error, not a silently ignored teacher."""
    result = build_sft_dataset(toy_run.path, renderer, SFTConfig(clean_fraction=0.0), teacher=ToyTeacher(doubt=True))
    assert {row["origin"] for row in result.dataset} == {"own", "teacher"}
    without = build_sft_dataset(toy_run.path, renderer, SFTConfig(clean_fraction=0.0))
    assert {row["origin"] for row in without.dataset} == {"own"}
    with pytest.raises(ValueError, match="a teacher was given"):
        build_sft_dataset(toy_run.path, renderer, SFTConfig(sources=["own"]), teacher=ToyTeacher())


def test_both_sources_deduplicate(toy_run, renderer):
    # without checks the teacher writes exactly the own sample 0 (tests/toy_runs.py), so each chain's two rows
    # are one after dedup
    result = build_sft_dataset(
        toy_run.path,
        renderer,
        SFTConfig(sources=["own", "teacher"], clean_fraction=0.0),
        teacher=ToyTeacher(checks=False),
    )
    n = len(toy_run.chains)
    assert len(result.dataset) == n and result.drops.get("dedup", "duplicate") == n
    pairs = [(r["prompt"], r["completion"]) for r in result.dataset]
    assert len(set(pairs)) == len(pairs)


def test_clean_mixing_ratio(toy_run, renderer):
    for fraction in (0.5, 0.25):
        result = build_sft_dataset(toy_run.path, renderer, SFTConfig(clean_fraction=fraction, interventions=ONE))
        rows = list(result.dataset)
        n_recovery = sum(r["kind"] == "recovery" for r in rows)
        clean = [r for r in rows if r["kind"] == "clean"]
        assert n_recovery == 12 and len(clean) == clean_count(12, fraction)
        assert abs(len(clean) / len(rows) - fraction) < 0.05
        assert result.drops.get("clean", "short_supply") == 0
        traces = {t.id: t for t in toy_run.traces}
        for row in clean:
            trace = traces[row["trace_id"]]
            problem = toy_run.problem(row["problem_id"])
            # prompt + completion is the original response; the prefix (if any) is a cut of its steps
            assert row["prompt"] + row["completion"] == head(problem) + trace.text
            assert row["origin"] == "clean" and row["intervention"] == "none"
            if row["timestep"] == 0.0:
                assert row["prompt"] == head(problem)
            else:
                assert row["completion"].startswith("\n\n")


def test_short_clean_supply_trims_recoveries_to_keep_the_fraction(toy_run, renderer):
    # Every intervention: more recovery rows than the run's clean cuts can balance at 90 % clean.
    wanted = SFTConfig(clean_fraction=0.9, keep_clean_fraction=True)
    loose = build_sft_dataset(toy_run.path, renderer, SFTConfig(clean_fraction=0.9, keep_clean_fraction=False))
    n_clean = sum(r["kind"] == "clean" for r in loose.dataset)
    n_recovery_all = sum(r["kind"] == "recovery" for r in loose.dataset)
    assert 0 < n_clean < clean_count(n_recovery_all, 0.9)  # short supply, so the loose mix is under 90 %
    result = build_sft_dataset(toy_run.path, renderer, wanted)
    rows = list(result.dataset)
    kept = sum(r["kind"] == "recovery" for r in rows)
    assert sum(r["kind"] == "clean" for r in rows) == n_clean
    assert kept == max(1, round(n_clean * 0.1 / 0.9))
    assert result.drops.get("mix", "over_clean_fraction") == n_recovery_all - kept
    again = build_sft_dataset(toy_run.path, renderer, wanted)  # seeded: the same rows
    assert [r["chain_id"] for r in again.dataset] == [r["chain_id"] for r in rows]


def test_decontamination(toy_run, renderer):
    banned = toy_run.problems[:2]
    by_id = EvalSet.from_problems(banned[:1])
    # a re-imported copy of the second problem: another id, same question modulo case and spacing
    copy = Problem("toy", "  " + banned[1].question.upper().replace(" ", "  ") + "\n", "x", "exact", "elsewhere")
    assert copy.id != banned[1].id
    eval_set = by_id.union(EvalSet.from_problems([copy]))
    result = build_sft_dataset(toy_run.path, renderer, SFTConfig(clean_fraction=0.0), eval_set=eval_set)
    ids = {r["problem_id"] for r in result.dataset}
    assert not ids & {p.id for p in banned}
    per_problem = len(toy_run.chains) // len(toy_run.problems)
    assert result.drops.get("decontam", "eval_problem_id") == per_problem
    assert result.drops.get("decontam", "eval_question") == per_problem
    assert len(result.dataset) == len(toy_run.chains) - 2 * per_problem
    # clean rows are decontaminated too
    mixed_config = SFTConfig(clean_fraction=0.5, interventions=ONE)
    mixed = build_sft_dataset(toy_run.path, renderer, mixed_config, eval_set=eval_set)
    assert not {r["problem_id"] for r in mixed.dataset} & {p.id for p in banned}


class FakeGenerator:
    """A backend that 'continues' with the toy teacher's text, plus a longer and a wrong variant."""

    concurrency = 1  # the Generator protocol: one request in flight

    name = "fake-strong"

    def __init__(self, problems):
        self.problems = {p.question: p for p in problems}
        self.requests = []

    def generate(self, requests):
        for request in requests:
            self.requests.append(request)
            problem = self.problems[request.messages[0].content]
            good = recovery_continuation(problem, request.prefill).text
            steps = good.split("\n\n")
            longer = "\n\n".join([*steps[:2], steps[1], *steps[2:]])
            wrong = good.replace(f"\\boxed{{{problem.answer}}}", "\\boxed{999}")
            samples = tuple(Sample(t, 10, "stop") for t in (longer, wrong, good)[: request.sampling.n])
            yield GenerationResult(request.request_id, samples, prompt_tokens=5)

    def close(self):
        pass


def test_generator_teacher(toy_run, renderer):
    from recovery.generation import SamplingParams

    fake = FakeGenerator(toy_run.problems)
    teacher = GeneratorTeacher(fake, sampling=SamplingParams(n=3, temperature=0.6, top_p=0.95, seed=7), batch_size=5)
    config = SFTConfig(
        sources=["teacher"],
        clean_fraction=0.0,
        interventions=ONE,
        quality=dataclasses.replace(QualityConfig(), max_overhead_pct=None),
    )
    result = build_sft_dataset(toy_run.path, renderer, config, teacher=teacher)
    chains = {c.id: (p, c) for p, c in toy_run.chains if c.intervention in ONE}
    assert len(result.dataset) == len(chains) == len(fake.requests)
    for request in fake.requests:  # the stronger model continues the same intervened prefix
        assert request.prefill in {c.prefix for _, c in chains.values()}
        assert request.sampling.n == 3 and request.messages[0].role == "user"
    for row in result.dataset:  # the shortest correct of the three
        problem, chain = chains[row["chain_id"]]
        assert row["completion"] == recovery_continuation(problem, chain.prefix).text
        assert row["teacher"] == "teacher:fake-strong" and row["sample_index"] == 2
    assert result.drops.get("quality", "not_correct") == len(chains)
    assert result.drops.get("quality", "not_shortest") == len(chains)


def test_a_self_checking_teacher_writes_the_clean_examples_too(toy_run, renderer):
    """The self-checking style is not the model's own: clean rows then come from the teacher's continuation
    of the same clean prefix (from the start: of the trace's opening), so both kinds teach one style."""
    teacher = ToyTeacher(restart=True, checks=True)
    result = build_sft_dataset(
        toy_run.path, renderer, SFTConfig(sources=["teacher"], clean_fraction=0.5, interventions=ONE), teacher=teacher
    )
    rows = list(result.dataset)
    clean = [r for r in rows if r["kind"] == "clean"]
    recoveries = [r for r in rows if r["kind"] == "recovery"]
    assert clean and recoveries
    traces = {t.id: t for t in toy_run.traces}
    for row in clean:
        problem = toy_run.problem(row["problem_id"])
        trace = traces[row["trace_id"]]
        if row["timestep"] == 0.0:
            opening = trace.reasoning.split("\n\n", 1)[0]
            assert row["completion"] == opening + teacher(problem, opening)
        else:
            prefix = row["prompt"][len(head(problem)) :]
            assert row["completion"] == teacher(problem, prefix)
        assert "\n\nCheck: " in row["completion"] and grade_toy(row["completion"], problem).correct
    assert all("\n\nCheck: " in r["completion"] for r in recoveries)
