"""Random characters inserted into a step, as each protocol inserts them (paper §3.1, *random characters*).

`insert_random_characters` is the default protocol's rule: ``round(ratio·|R_k|)`` characters at distinct
uniformly random slots, drawn from the item's generator. `insert_characters` is the authors' (``protocol:
reference``): ``max(1, round(0.5·|R_k|))`` positions drawn with repeats (rllm_robustness/interventions.py
``insert_random_characters``). Both use the same alphabet.
"""

from __future__ import annotations

import math
import random
import string

# Letters, digits, punctuation and space (reference implementation). No newline: inserted characters must
# never create a blank line, which would change the step segmentation.
RANDOM_ALPHABET = string.ascii_letters + string.digits + string.punctuation + " "
RANDOM_CHARACTER_RATIO = 0.5  # round(0.5·|R_k|) inserted → one third of the resulting step


def sample_range(rng: random.Random, n: int, k: int) -> list[int]:
    """``rng.sample(range(n), k)``: the same values, drawn from the generator the same way (so its state
    afterwards is the same too), without a Python call per draw: this runs for every random-characters
    chain. It follows CPython's `random.Random.sample` (a pool for small populations, a set of taken
    values otherwise); tested equal to it. Generators of other classes use their own ``sample``.
    """
    if type(rng) is not random.Random or not 0 <= k <= n:
        return rng.sample(range(n), k)
    getrandbits = rng.getrandbits
    setsize = 21  # CPython's choice between the two methods, kept so the draws are the same
    if k > 5:
        setsize += 4 ** math.ceil(math.log(k * 3, 4))
    result: list[int] = []
    if n <= setsize:
        pool = list(range(n))
        for i in range(k):
            remaining = n - i
            bits = remaining.bit_length()
            j = getrandbits(bits)
            while j >= remaining:  # rejection sampling, as Random._randbelow
                j = getrandbits(bits)
            result.append(pool[j])
            pool[j] = pool[remaining - 1]
    else:
        bits = n.bit_length()
        taken: set[int] = set()
        for _ in range(k):
            j = getrandbits(bits)
            while j >= n or j in taken:
                j = getrandbits(bits)
            taken.add(j)
            result.append(j)
    return result


def insert_random_characters(
    text: str, rng: random.Random, *, ratio: float = RANDOM_CHARACTER_RATIO, alphabet: str = RANDOM_ALPHABET
) -> tuple[str, str]:
    """Insert ``round(ratio·len(text))`` characters from ``alphabet`` at uniformly random positions.

    Returns ``(new_text, inserted)`` where ``inserted`` holds the inserted characters in the order they
    appear in ``new_text``; removing those positions gives back ``text``. Python's `round` is used (ties to
    even), as in the reference implementation.

    >>> new, ins = insert_random_characters("abcdef", random.Random(0))
    >>> len(ins), len(new)
    (3, 9)
    """
    n_insert = round(ratio * len(text))
    total = len(text) + n_insert
    # Choosing the inserted slots among all final positions is uniform over interleavings. Inserting in
    # increasing slot order puts each character at its final position (a step is short: list.insert's
    # shifting is cheaper than splicing runs in Python; this runs for every chain).
    slots = sorted(sample_range(rng, total, n_insert))
    inserted = "".join(rng.choices(alphabet, k=n_insert))
    out = list(text)
    for slot, char in zip(slots, inserted):
        out.insert(slot, char)
    return "".join(out), inserted


def insert_characters(text: str, rng: random.Random) -> str:
    """interventions.py ``insert_random_characters`` at ratio 0.5: ``max(1, round(0.5·len))`` positions
    drawn with ``randint(0, len)`` (repeats allowed), sorted, then one ``choice`` of the alphabet inserted at
    each (shifted by the characters already inserted). Empty text stays empty.

    >>> insert_characters("", random.Random(0)), len(insert_characters("abcd", random.Random(0)))
    ('', 6)
    """
    if not text:
        return text
    count = max(1, int(round(RANDOM_CHARACTER_RATIO * len(text))))
    positions = sorted([rng.randint(0, len(text)) for _ in range(count)])
    chars = list(text)
    for offset, position in enumerate(positions):
        chars.insert(position + offset, rng.choice(RANDOM_ALPHABET))
    return "".join(chars)
