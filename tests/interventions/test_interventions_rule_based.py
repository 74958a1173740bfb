"""Random characters and Wikipedia text on the small trace, with hand-computed expectations."""

from __future__ import annotations

import random

import pytest

from recovery.interventions import (
    FailureReason,
    InterventionFailed,
    RandomCharacters,
    WikipediaPool,
    create,
    insert_random_characters,
    intervene,
)
from recovery.interventions.rule_based import RANDOM_ALPHABET

PARAGRAPHS = [
    "The Silk Road was a network of Eurasian trade routes active from the second century BCE until the "
    "mid-15th century, spanning over 6,400 kilometres.",
    "Photosynthesis is a process used by plants and other organisms to convert light energy into chemical "
    "energy that can later be released to fuel the organism's activities.",
    "Too short to be a paragraph.",
]


def _is_subsequence(short: str, long: str) -> bool:
    it = iter(long)
    return all(ch in it for ch in short)


def test_alphabet_is_letters_digits_punctuation_space() -> None:
    assert len(RANDOM_ALPHABET) == 52 + 10 + 32 + 1
    assert " " in RANDOM_ALPHABET and "\n" not in RANDOM_ALPHABET


@pytest.mark.parametrize(
    ("t", "cut", "n_inserted"),
    [(0.5, 1, 10), (0.7, 2, 6), (0.1, 1, 10)],  # |R_k| = 19 → round(9.5) = 10; |R_k| = 11 → round(5.5) = 6
)
def test_random_characters_hand_computed(small_item, small_steps, t, cut, n_inserted) -> None:  # noqa: ANN001
    problem, trace = small_item
    out = intervene(problem, trace, "random_characters", t)
    assert out.cut_index == cut and out.n_steps == 4
    kept = "\n\n".join(small_steps[:cut]) + "\n\n"
    assert out.prefix.startswith(kept)
    noisy = out.prefix[len(kept) :]
    original = small_steps[cut]
    assert len(out.inserted_text) == n_inserted
    assert len(noisy) == len(original) + n_inserted
    assert _is_subsequence(original, noisy)
    assert set(out.inserted_text) <= set(RANDOM_ALPHABET)
    # The inserted characters, in order, are what is left after removing the original ones in order.
    rest, it = [], iter(original)
    pending = next(it, None)
    for ch in noisy:
        if ch == pending:
            pending = next(it, None)
        else:
            rest.append(ch)
    assert len(rest) == n_inserted
    assert out.original_prefix_chars == len("\n\n".join(small_steps[: cut + 1]))
    assert out.original_reasoning_chars == len(trace.reasoning)


def test_random_characters_make_one_third() -> None:
    text = "abcdefghij" * 30  # 300 chars → 150 inserted → 150/450
    new, inserted = insert_random_characters(text, random.Random(1))
    assert len(inserted) == 150 and len(new) == 450
    assert len(inserted) / len(new) == pytest.approx(1 / 3)
    assert _is_subsequence(text, new)


def test_inserted_characters_land_at_varied_positions() -> None:
    text = "x" * 200
    new, inserted = insert_random_characters(text, random.Random(3), alphabet="#")
    positions = [i for i, ch in enumerate(new) if ch == "#"]
    assert len(positions) == 100 and positions[0] < 50 and positions[-1] > 250


def test_random_characters_on_a_one_char_step_fail(make_item) -> None:  # noqa: ANN001
    problem, trace = make_item(["A long enough first step.", "B"])
    with pytest.raises(InterventionFailed) as info:
        intervene(problem, trace, "random_characters", 0.9)
    assert info.value.reason == FailureReason.STEP_TOO_SHORT


def test_random_characters_options_validated() -> None:
    with pytest.raises(ValueError):
        RandomCharacters(alphabet="a\nb")
    with pytest.raises(ValueError):
        RandomCharacters(ratio=0)


def test_wikipedia_text_replaces_last_step(small_item, small_steps) -> None:  # noqa: ANN001
    problem, trace = small_item
    pool = WikipediaPool(PARAGRAPHS)
    assert len(pool) == 2  # the short one is dropped
    out = intervene(problem, trace, "wikipedia_text", 0.7, pool=pool)
    assert out.inserted_text in PARAGRAPHS[:2]
    assert out.prefix == "\n\n".join([*small_steps[:2], out.inserted_text])
    assert out.category == "neutral"
    assert out.options["intervention_options"] == {"pool": f"WikipediaPool:{pool.fingerprint}"}


def test_wikipedia_text_draws_vary_with_the_item(small_item) -> None:  # noqa: ANN001
    problem, trace = small_item
    pool = WikipediaPool(PARAGRAPHS)
    drawn = {intervene(problem, trace, "wikipedia_text", 0.7, seed=s, pool=pool).inserted_text for s in range(20)}
    assert drawn == set(PARAGRAPHS[:2])


def test_wikipedia_text_without_pool_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="needs a paragraph pool"):
        create("wikipedia_text")


def test_wikipedia_text_accepts_a_path(tmp_path, small_item) -> None:  # noqa: ANN001
    path = tmp_path / "paras.txt"
    path.write_text("\n\n".join(PARAGRAPHS), encoding="utf-8")
    problem, trace = small_item
    out = intervene(problem, trace, "wikipedia_text", 0.5, pool=str(path))
    assert out.inserted_text in PARAGRAPHS[:2]


def test_sample_range_draws_exactly_as_random_sample():
    """The random-characters slots come from `sample_range`, which must give `Random.sample`'s values and
    leave the generator in the same state (the inserted characters are drawn next), on both of CPython's
    methods: the pool (small populations) and the set of taken values (large ones)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from recovery.interventions.rule_based import sample_range

    @settings(max_examples=300, deadline=None)
    @given(st.integers(0, 2**32), st.integers(0, 5000), st.floats(0, 1))
    def check(seed, n, fraction):
        k = int(n * fraction)
        ours, theirs = random.Random(seed), random.Random(seed)
        assert sample_range(ours, n, k) == theirs.sample(range(n), k)
        assert ours.getstate() == theirs.getstate()

    check()
    with pytest.raises(ValueError):
        sample_range(random.Random(0), 3, 4)
