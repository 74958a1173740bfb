"""`intervene` / `intervene_traces`: fields, registry, determinism, append-Wait, k consecutive interventions."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recovery.interventions import (
    EDIT_KINDS,
    INTERVENTIONS,
    PAPER_INTERVENTIONS,
    ChainSettings,
    FailureReason,
    InterventionFailed,
    Produced,
    RandomCharacters,
    Skip,
    TraceJob,
    WikipediaPool,
    create,
    intervene,
    intervene_traces,
)
from recovery.segment import TooFewSteps, cut_at, split_steps

POOL = WikipediaPool(
    [
        "Plate tectonics is the scientific theory that Earth's lithosphere comprises a number of large tectonic "
        "plates which have been slowly moving since about 3.4 billion years ago.",
        "The Great Barrier Reef is the world's largest coral reef system, composed of over 2,900 individual reefs "
        "and 900 islands stretching for over 2,300 kilometres.",
        "Gel electrophoresis is a method for separation and analysis of biomacromolecules and their fragments, "
        "based on their size and charge, used in clinical chemistry.",
    ]
)
RULE_BASED = ("random_characters", "wikipedia_text")
OPTIONS = {"wikipedia_text": {"pool": POOL}}


def test_registry_holds_the_papers_seven() -> None:
    expected = {
        "complete_step": ("benign", True),
        "paraphrase": ("benign", True),
        "random_characters": ("neutral", False),
        "wikipedia_text": ("neutral", False),
        "wrong_continuation": ("adversarial", True),
        "hallucinated_fact": ("adversarial", True),
        "unrelated_cot": ("adversarial", True),
    }
    assert PAPER_INTERVENTIONS == tuple(expected)
    for name, (category, needs_generator) in expected.items():
        spec = INTERVENTIONS[name]
        assert (spec.category.value, spec.needs_generator, spec.family) == (category, needs_generator, "paper")
        impl = create(name, **({"pool": POOL} if name == "wikipedia_text" else {}))
        assert (impl.name, impl.category, impl.needs_generator) == (name, spec.category, needs_generator)
        assert impl.edit_kind in EDIT_KINDS
    # One entry per name, each under its class's own name.
    assert all(spec.name == name for name, spec in INTERVENTIONS.items())
    with pytest.raises(KeyError, match="known"):
        create("no_such_intervention")


def test_intervened_fields(small_item, small_steps) -> None:  # noqa: ANN001
    problem, trace = small_item
    out = intervene(problem, trace, "random_characters", 0.5, seed=7)
    assert (out.trace_id, out.problem_id, out.model) == (trace.id, problem.id, trace.model)
    assert (out.intervention, out.category.value, out.seed) == ("random_characters", "neutral", 7)
    assert (out.target_t, out.cut_index, out.n_steps) == (0.5, 1, 4)
    assert out.actual_t == pytest.approx(29 / 57)
    assert out.original_prefix_chars == len("Let x = 2.\n\nThen y = x + 3 = 5.") == 31
    assert out.original_reasoning_chars == 57 + 3 * 2
    assert dict(out.options) == {"append_wait": False, "repeats": 1, "min_steps": 2}


def test_too_few_steps_and_mismatched_problem(make_item, small_item) -> None:  # noqa: ANN001
    problem, trace = make_item(["Only one step here."])
    with pytest.raises(TooFewSteps):
        intervene(problem, trace, "random_characters", 0.5)
    other_problem, _ = make_item(["a", "b"], question="Another question?")
    with pytest.raises(ValueError, match="belongs to problem"):
        intervene(other_problem, small_item[1], "random_characters", 0.5)


def test_options_only_for_names(small_item) -> None:  # noqa: ANN001
    problem, trace = small_item
    with pytest.raises(TypeError):
        intervene(problem, trace, RandomCharacters(), 0.5, ratio=0.2)


def test_non_default_settings_are_recorded_in_ids(small_item) -> None:  # noqa: ANN001
    problem, trace = small_item
    plain = intervene(problem, trace, "random_characters", 0.5)
    assert intervene(problem, trace, RandomCharacters(), 0.5) == plain
    assert intervene(problem, trace, "random_characters", 0.5, ratio=0.5).id == plain.id  # the default
    other = intervene(problem, trace, RandomCharacters(ratio=0.25), 0.5)
    assert other.id != plain.id and other.options["intervention_options"] == {"ratio": 0.25}
    assert intervene(problem, trace, "random_characters", 0.5, ratio=0.25).id == other.id


@pytest.mark.parametrize("name", RULE_BASED)
def test_same_key_same_bytes_other_key_other_bytes(small_item, name: str) -> None:  # noqa: ANN001
    problem, trace = small_item
    kwargs = {"pool": POOL} if name == "wikipedia_text" else {}
    runs = [intervene(problem, trace, name, 0.5, seed=3, **kwargs) for _ in range(3)]
    assert len({(r.prefix, r.inserted_text, r.id) for r in runs}) == 1
    if name == "random_characters":  # the pool has 3 paragraphs, so a single draw may coincide
        assert intervene(problem, trace, name, 0.5, seed=4).prefix != runs[0].prefix
        assert intervene(problem, trace, name, 0.1, seed=3).prefix != runs[0].prefix  # same cut, other t
    assert intervene(problem, trace, name, 0.1, seed=3, **kwargs).id != runs[0].id
    assert intervene(problem, trace, name, 0.5, seed=4, **kwargs).id != runs[0].id


def test_batch_order_and_size_do_not_change_bytes(make_item, fake_generator) -> None:  # noqa: ANN001
    items = [make_item([f"Step one of item {i}.", "Step two is here.", f"Then {i} more.", "Done."]) for i in range(5)]
    names = ["random_characters", "wikipedia_text", "unrelated_cot"]
    grid = (0.1, 0.5, 0.9)

    def run(item_list, name_list, ts):  # noqa: ANN001, ANN202
        settings = ChainSettings.from_names(name_list, OPTIONS, timesteps=ts, seed=11, generator=fake_generator())
        out = intervene_traces([TraceJob(*item) for item in item_list], settings)
        return {r.chain.id: (r.chain.prefix, r.chain.inserted_text) for r in out}

    together = run(items, names, grid)
    assert len(together) == 5 * 3 * 3
    reversed_order = run(items[::-1], names[::-1], grid[::-1])
    one_by_one: dict = {}
    for item in items:
        for name in names:
            for t in grid:
                one_by_one.update(run([item], [name], [t]))
    assert together == reversed_order == one_by_one


def test_append_wait(small_item) -> None:  # noqa: ANN001
    problem, trace = small_item
    plain = intervene(problem, trace, "wikipedia_text", 0.7, pool=POOL)
    waited = intervene(problem, trace, "wikipedia_text", 0.7, pool=POOL, append_wait=True)
    assert waited.prefix == plain.prefix + "\n\nWait"
    assert waited.inserted_text == plain.inserted_text + "\n\nWait"
    assert waited.options["append_wait"] is True and waited.options["wait_text"] == "Wait"
    assert waited.id != plain.id
    custom = intervene(problem, trace, "wikipedia_text", 0.7, pool=POOL, append_wait=True, wait_text="Hmm, wait")
    assert custom.prefix.endswith("\n\nHmm, wait") and custom.id != waited.id
    with pytest.raises(ValueError):
        intervene(problem, trace, "wikipedia_text", 0.7, pool=POOL, append_wait=True, wait_text="  ")


def test_repeats_with_original_next_steps(make_item, fake_generator) -> None:  # noqa: ANN001
    steps = ["S0 starts here.", "S1 continues.", "S2 goes on.", "S3 more.", "S4 again.", "S5 end."]
    problem, trace = make_item(steps)
    cut = cut_at(split_steps(trace.reasoning), 0.3).index  # = 1
    replies = iter(["I need W1.", "I need W2.", "I need W3."])
    generator = fake_generator(lambda messages, decoding: next(replies))
    out = intervene(problem, trace, "wrong_continuation", 0.3, generator=generator, repeats=3)
    # R_k replaced by W1; then one original paragraph before each further wrong step.
    expected = [*steps[:cut], "I need W1.", steps[cut + 1], "I need W2.", steps[cut + 2], "I need W3."]
    assert out.prefix == "\n\n".join(expected)
    assert out.inserted_text == "I need W1.\n\nI need W2.\n\nI need W3."
    assert out.options["repeats"] == 3 and out.options["between"] == "original_next_step"
    # Each round's model saw everything before the step it writes, in-between paragraph included.
    shown = [
        call[0][1].content.split("Reasoning so far:\n", 1)[1].rsplit("\nNext (incorrect) step:", 1)[0]
        for call in generator.calls
    ]
    assert shown[0] == "\n\n".join(steps[:cut])
    assert shown[1] == "\n\n".join([*steps[:cut], "I need W1.", steps[cut + 1]])
    assert shown[2] == "\n\n".join(expected[:-1])
    single = intervene(problem, trace, "wrong_continuation", 0.3, generator=fake_generator("I need W1."))
    assert out.prefix.startswith(single.prefix) and out.id != single.id


def test_repeats_with_between_callable(small_item, small_steps) -> None:  # noqa: ANN001
    problem, trace = small_item
    seen: list[str] = []

    def between(prefix: str) -> str:
        seen.append(prefix)
        return f"Hmm, paragraph {len(seen)}.\n\nThis second paragraph is dropped."

    out = intervene(problem, trace, "wikipedia_text", 0.5, pool=POOL, repeats=3, between=between)
    parts = out.prefix.split("\n\n")
    assert parts[0] == small_steps[0]
    assert parts[2] == "Hmm, paragraph 1." and parts[4] == "Hmm, paragraph 2."
    assert all(p in POOL.paragraphs for p in (parts[1], parts[3], parts[5])) and len(parts) == 6
    assert out.inserted_text == "\n\n".join([parts[1], parts[3], parts[5]])
    assert seen == ["\n\n".join(parts[:2]), "\n\n".join(parts[:4])]
    assert out.options["between"].endswith("between")


def test_repeats_random_characters_modify_the_between_paragraph(small_item, small_steps) -> None:  # noqa: ANN001
    problem, trace = small_item
    out = intervene(problem, trace, "random_characters", 0.5, repeats=2)  # cut 1, then original step 2
    n1, n2 = round(0.5 * len(small_steps[1])), round(0.5 * len(small_steps[2]))
    assert len(out.inserted_text) == n1 + 2 + n2
    assert out.prefix.startswith(small_steps[0] + "\n\n") and out.prefix.count("\n\n") == 2


def test_repeats_fail_when_the_trace_runs_out(small_item) -> None:  # noqa: ANN001
    problem, trace = small_item
    with pytest.raises(InterventionFailed) as info:
        intervene(problem, trace, "wikipedia_text", 0.7, pool=POOL, repeats=3)  # cut 2 of 4: one step left
    assert info.value.reason == FailureReason.BETWEEN_UNAVAILABLE
    with pytest.raises(ValueError):
        intervene(problem, trace, "wikipedia_text", 0.7, pool=POOL, repeats=0)


def test_the_loop_yields_skips(make_item, small_item) -> None:  # noqa: ANN001
    short = make_item(["Just one step."])
    settings = ChainSettings.from_names(RULE_BASED, OPTIONS, timesteps=(0.5, 0.9))
    out = list(intervene_traces([TraceJob(*small_item), TraceJob(*short)], settings))
    skips = [o for o in out if isinstance(o, Skip)]
    assert len(out) == 8 and len(skips) == 4
    assert Counter(skip.reason for skip in skips) == {"too_few_steps": 4}
    produced = Counter(o.chain.intervention for o in out if isinstance(o, Produced))
    assert produced == {"random_characters": 2, "wikipedia_text": 2}


def test_setup_errors_raise_before_running() -> None:
    with pytest.raises(ValueError, match="generator"):
        ChainSettings.from_names(["complete_step"])
    with pytest.raises(ValueError, match="pool"):
        ChainSettings.from_names(["wikipedia_text"])
    with pytest.raises(ValueError, match="unknown intervention"):
        ChainSettings.from_names(["random_characters"], options={"wikipedia": {"pool": POOL}})


step_text = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\r"), min_size=0, max_size=30).filter(
    lambda s: "\n\n" not in s and not s.startswith("\n") and not s.endswith("\n")
)


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(step_text.filter(lambda s: len(s) >= 2), min_size=2, max_size=8),
    t=st.floats(min_value=0.0, max_value=1.0),
    seed=st.integers(min_value=0, max_value=2**32),
    name=st.sampled_from(
        [
            "random_characters",
            "wikipedia_text",
            "complete_step",
            "wrong_continuation",
            "hallucinated_fact",
            "unrelated_cot",
        ]
    ),
)
def test_property_earlier_steps_unchanged(make_item, fake_generator, steps, t, seed, name) -> None:  # noqa: ANN001
    problem, trace = make_item(steps)
    cut = cut_at(split_steps(trace.reasoning), t).index
    kwargs = {"pool": POOL} if name == "wikipedia_text" else {}
    generator = fake_generator("I need to see a brand new claim.")
    out = intervene(problem, trace, name, t, seed=seed, generator=generator, **kwargs)
    kept = steps[: cut + 1] if name == "hallucinated_fact" else steps[:cut]
    assert out.prefix.startswith("\n\n".join(kept) + "\n\n")
    assert out.inserted_text and out.inserted_text in out.prefix or name == "random_characters"
    assert out.prefix.split("\n\n")[: len(kept)] == kept
