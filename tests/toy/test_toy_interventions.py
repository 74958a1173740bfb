"""The seven toy interventions: registry, placement rules, effect on the prefix, determinism."""

from __future__ import annotations

import pytest

from recovery.ids import item_rng
from recovery.interventions import INTERVENTIONS, InterventionContext, InterventionFailed, create
from recovery.segment import cut_at, split_steps
from recovery.toy.analysis import analyse_prefix
from recovery.toy.interventions import TOY_NAMES
from recovery.toy.pool import TOY_PARAGRAPHS
from recovery.toy.steps import claim_is_correct, parse_step
from recovery.toy.tasks import generate_problems, spec_of
from recovery.toy.traces import write_trace
from recovery.types import Category, Problem

CATEGORIES = {
    "toy/complete_step": Category.BENIGN,
    "toy/paraphrase": Category.BENIGN,
    "toy/random_characters": Category.NEUTRAL,
    "toy/wikipedia_text": Category.NEUTRAL,
    "toy/wrong_continuation": Category.ADVERSARIAL,
    "toy/hallucinated_fact": Category.ADVERSARIAL,
    "toy/unrelated_cot": Category.ADVERSARIAL,
}
PROBLEMS = generate_problems(40, seed=11)
TIMESTEPS = (0.1, 0.3, 0.5, 0.7, 0.9)


def context(problem, t, name, seed=0, slip_rate=0.2):
    trace = write_trace(problem, slip_rate=slip_rate).as_trace()
    steps = split_steps(trace.reasoning)
    return InterventionContext(
        problem=problem, trace=trace, steps=steps, cut=cut_at(steps, t), rng=item_rng(seed, trace.id, name, t)
    )


def cases():
    for problem in PROBLEMS:
        for t in TIMESTEPS:
            yield problem, t


def test_registered_with_paper_categories():
    assert set(TOY_NAMES) == set(CATEGORIES)
    for name, category in CATEGORIES.items():
        spec = INTERVENTIONS[name]
        assert spec.family == "toy" and spec.category is category and not spec.needs_generator
        intervention = create(name)
        assert intervention.name == name and intervention.category is category


@pytest.mark.parametrize("name", sorted(CATEGORIES))
def test_same_item_same_bytes_and_blank_lines_only_between_steps(name):
    intervention = create(name)
    for problem, t in cases():
        a = intervention.apply(context(problem, t, name))
        b = create(name).apply(context(problem, t, name))
        assert a == b
        assert all("\n\n" not in step for step in a.prefix_steps)
        assert a.inserted_text


def test_placement_rules():
    for problem, t in cases():
        for name in CATEGORIES:
            ctx = context(problem, t, name, slip_rate=0.0)  # a slip may equal a planted wrong step
            edit = create(name).apply(ctx)
            original = ctx.prefix_steps
            if name == "toy/hallucinated_fact":
                assert edit.prefix_steps[:-1] == original and edit.prefix_steps[-1] == edit.inserted_text
            elif name == "toy/paraphrase":
                assert len(edit.prefix_steps) == len(original) and edit.prefix_steps != original
            else:
                assert edit.prefix_steps[:-1] == original[:-1] and edit.prefix_steps[-1] != original[-1]


def test_benign_keep_content_adversarial_break_it():
    for problem, t in cases():
        spec = spec_of(problem)
        ctx = context(problem, t, "x", slip_rate=0.0)
        before = analyse_prefix(spec, ctx.prefix_steps[:-1])
        complete = create("toy/complete_step").apply(ctx).prefix_steps[-1]
        claim = parse_step(complete, spec)
        assert claim.style == "other" and claim_is_correct(claim, spec)
        assert claim.position == before.next_position(spec)
        wrong = create("toy/wrong_continuation").apply(ctx).prefix_steps[-1]
        claim = parse_step(wrong, spec)
        assert claim.style == "canonical" and not claim_is_correct(claim, spec)
        paraphrased = create("toy/paraphrase").apply(ctx).prefix_steps
        assert analyse_prefix(spec, paraphrased) == analyse_prefix(spec, ctx.prefix_steps)
        assert all(parse_step(s, spec).style == "paraphrase" for s in paraphrased[1:])
        fact = create("toy/hallucinated_fact").apply(ctx).inserted_text
        assert fact.startswith(("I know that", "Given that", "I remember that"))
        assert analyse_prefix(spec, ctx.prefix_steps + (fact,)).suspicious


def test_paraphrase_drops_doubt_but_keeps_wrong_content():
    problem = PROBLEMS[0]
    spec = spec_of(problem)
    trace = write_trace(problem, slip_rate=1.0).as_trace()
    steps = split_steps(trace.reasoning)
    ctx = InterventionContext(problem, trace, steps, cut_at(steps, 0.9), item_rng(0, "p"))
    edit = create("toy/paraphrase").apply(ctx)
    assert "Wait" not in edit.inserted_text
    claims = [parse_step(s, spec) for s in edit.prefix_steps[1:]]
    assert any(not claim_is_correct(c, spec) for c in claims)  # the slip is still there, re-worded


def test_neutral_and_unrelated_sources():
    from recovery.interventions.prompts import load_topics

    topics = load_topics()
    for problem, t in cases():
        ctx = context(problem, t, "n")
        assert create("toy/wikipedia_text").apply(ctx).inserted_text in TOY_PARAGRAPHS
        unrelated = create("toy/unrelated_cot").apply(ctx).inserted_text
        assert any(topic in unrelated for topic in topics)
        edit = create("toy/random_characters").apply(ctx)
        assert len(edit.prefix_steps[-1]) == len(ctx.prefix_steps[-1]) + len(edit.inserted_text)
        assert len(edit.inserted_text) == round(0.5 * len(ctx.prefix_steps[-1]))
    assert all(len(p) >= 100 for p in TOY_PARAGRAPHS)


def test_non_toy_problem_fails_cleanly():
    other = Problem(domain="math", question="What is 2 + 2?", answer="4", answer_type="numeric", source="x")
    ctx = context(PROBLEMS[0], 0.5, "f")
    bad = InterventionContext(other, ctx.trace, ctx.steps, ctx.cut, ctx.rng)
    for name in ("toy/complete_step", "toy/paraphrase", "toy/wrong_continuation", "toy/hallucinated_fact"):
        with pytest.raises(InterventionFailed) as err:
            create(name).apply(bad)
        assert err.value.reason == "not_toy_problem"


def test_the_toy_world_registers_its_interventions_at_the_registrys_first_read():
    """The interventions package names no module of the toy world (a layer above it) and importing it loads
    none; the toy world is the package's own plug-in (pyproject.toml), so the registry's first read, in a
    process that imported nothing else, knows its seven in their order: a run config naming them is valid
    wherever it is read, with no import for its side effect."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from recovery.interventions import INTERVENTIONS\n"
        "assert 'recovery.toy' not in sys.modules\n"
        "toy = [n for n, s in INTERVENTIONS.items() if s.family == 'toy']\n"
        "assert 'recovery.toy.interventions' in sys.modules\n"
        "assert toy == ['toy/complete_step', 'toy/paraphrase', 'toy/random_characters', 'toy/wikipedia_text',"
        " 'toy/wrong_continuation', 'toy/hallucinated_fact', 'toy/unrelated_cot'], toy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, env=_own_code_env())


def _own_code_env() -> dict:
    """The environment with this checkout's sources first (the subprocess imports this tree's code)."""
    import os
    from pathlib import Path

    src = str(Path(__file__).resolve().parents[2] / "src")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))}


def test_a_name_taken_by_another_class_is_refused():
    from recovery.interventions.base import InterventionSpec
    from recovery.interventions.registry import register
    from recovery.toy.interventions import ToyParaphrase, ToyRandomCharacters

    register("toy/paraphrase", InterventionSpec(ToyParaphrase, family="toy"))  # again: harmless
    with pytest.raises(ValueError, match="is called 'toy/random_characters', not 'toy/paraphrase'"):
        register("toy/paraphrase", InterventionSpec(ToyRandomCharacters, family="toy"))
