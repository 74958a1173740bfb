"""The authors' text handling around an intervention (``protocol: reference``, part "interventions").

Under the reference protocol an intervened prefix is built as the authors' code builds it
(github.com/ExplainableML/RLLM-CoT-Robustness at `recovery.protocol.reference().commit`), not as the
project's default (`recovery.interventions.apply`: the edited steps joined with blank lines, verbatim):

- `reasoning_of`: the reasoning is the text before the first closing tag, after the last opening tag
  (rllm_robustness/segmentation.py ``extract_reasoning``); steps are its blank-line pieces, and the cut is
  `recovery.segment.cut_at`'s (the same nearest-timestep rule), except on a reasoning of blank lines only
  (`reference_cut`);
- `restored_steps`: every edited step is re-written as its original's leading whitespace *as spaces*, the
  step stripped, its original's trailing whitespace as spaces (segmentation.py ``segment_trace`` and
  ``restore_trace_from_segments``; interventions.py ``_restore_for_intervention`` pairs edited step *i* with
  original step *i*). So an R1 reasoning that starts ``"\\nOkay"`` comes back as ``" Okay"``. A step written
  after the trace's last step (a hallucinated fact at the final step) follows it after one newline;
- `append_marker`: "Wait" after a blank line unless the prefix already ends in a newline or a space
  (interventions.py ``append_marker_to_intervention_row``);
- `authors_trace`: a response their extraction reads but its model's own tags do not (only another family's
  tags, or none) is a trace all the same, its reasoning `reasoning_of`'s;
- `batch_positions`: the authors seed their random characters, Wikipedia paragraphs and Unrelated-CoT topics
  by an item's index within its batch of ``batch_size`` rows (scripts/create_interventions.py), so those
  repeat every ``batch_size`` traces. The default protocol's per-item seeds are unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from pathlib import Path

from recovery.protocol import reference
from recovery.segment import cut_at
from recovery.types import Cut, Step, Trace

# (closing, opening) tags in the order extract_reasoning tries them; the bare openers come last.
_CLOSE_TAGS = ("</think>", "</thought>")
_OPEN_TAGS = ("<think>", "<thought>", "<think", "<thought")


def reasoning_of(text: str) -> str:
    """The authors' reasoning of a response: before the first closing tag (``</think>``, else
    ``</thought>``), then after the last opening tag (``<think>``, ``<thought>``, ``<think``, ``<thought``:
    the first of these present). segmentation.py ``extract_reasoning``.

    >>> reasoning_of("<think>\\nA\\n\\nB</think>C")
    '\\nA\\n\\nB'
    """
    if not text:
        return ""
    for tag in _CLOSE_TAGS:
        if tag in text:
            text = text.split(tag, 1)[0]
            break
    for tag in _OPEN_TAGS:
        if tag in text:
            return text.rsplit(tag, 1)[-1]
    return text


def authors_trace(problem_id: str, model: str, text: str, *, trace_id: str = "") -> Trace:
    """``text`` read as the authors read a response (segmentation.py ``extract_reasoning``): the reasoning is
    `reasoning_of`'s, whichever family's tags it uses; the answer follows the first closing tag it found
    (``</think>``, else ``</thought>``), and a response without one is unclosed (reasoning to the end, no answer).

    >>> t = authors_trace("p", "r1", "<thought>a\n\nb</thought>4")
    >>> t.reasoning, t.answer_text, t.closed, t.think_close
    ('a\n\nb', '4', True, '</thought>')
    """
    close = next((tag for tag in _CLOSE_TAGS if tag in text), None)
    answer = text.split(close, 1)[1] if close is not None else ""
    tags = dict(zip(_CLOSE_TAGS, _OPEN_TAGS, strict=False))
    return Trace(
        problem_id=problem_id,
        model=model,
        text=text,
        reasoning=reasoning_of(text),
        answer_text=answer,
        closed=close is not None,
        think_open=tags.get(close or _CLOSE_TAGS[0], _OPEN_TAGS[0]),
        think_close=close or _CLOSE_TAGS[0],
        id=trace_id,
    )


def reference_cut(steps: Sequence[Step], t: float, *, min_steps: int) -> Cut:
    """The authors' cut (segmentation.py ``trace_prefix_at_timestep``): `cut_at`, which follows the same
    rule, except that a reasoning without a character outside its blank lines has timestep 0 at every step
    (cut_at spreads them evenly)."""
    cut = cut_at(steps, t, min_steps=min_steps)
    if any(step.text for step in steps):
        return cut
    return Cut(index=min(min_steps, len(steps)) - 1, target_t=t, actual_t=0.0)


def _padded(text: str, original: str) -> str:
    """``text`` stripped, between its original step's leading and trailing whitespace counted as spaces."""
    lead = len(original) - len(original.lstrip())
    trail = len(original) - len(original.rstrip())
    return " " * lead + text.strip() + " " * trail


def restored_steps(edited: Sequence[str], originals: Sequence[str]) -> tuple[str, ...]:
    """The authors' restored prefix as steps: joined with blank lines they give the text of segmentation.py
    ``restore_trace_from_segments(edited, metadata[: len(edited)])``.

    Edited step *i* is padded like original step *i*; steps beyond the original trace are stripped, and the
    first of them follows the trace's last step after a single newline (the function's ``divider`` of a last
    step is empty), the others after blank lines.

    >>> restored_steps(["A", "b "], ["\\nOkay", "x\\n", "y"])
    (' A', 'b ')
    >>> restored_steps(["a", "b", " fact "], ["a", "b"])
    ('a', 'b\\nfact')
    """
    if not edited:
        return ()
    paired = min(len(edited), len(originals))
    out = [_padded(text, original) for text, original in zip(edited[:paired], originals[:paired])]
    extras = [text.strip() for text in edited[paired:]]
    if extras:
        out[-1] = f"{out[-1]}\n{extras[0]}" if out else extras[0]
        out.extend(extras[1:])
    return tuple(out)


def stripped_steps(reply: str) -> tuple[str, ...]:
    """A rewrite reply as the authors keep it: its blank-line pieces, stripped, empty ones dropped; ``("",)``
    when nothing is left (interventions.py ``apply_llm_intervention_batch``, benign_rewrite_trace)."""
    return tuple(piece.strip() for piece in reply.split("\n\n") if piece.strip()) or ("",)


def append_marker(prefix: str, inserted: str, marker: str) -> tuple[str, str]:
    """``(prefix, inserted)`` with ``marker`` appended as the authors do (interventions.py
    ``append_marker_to_intervention_row``): the prefix gets a blank line first unless it is empty or ends in
    a newline or space; the inserted text gets ``"\\n\\n" + marker`` (just ``marker`` when empty).

    >>> append_marker("a", "x", "Wait"), append_marker("a ", "x", "Wait")
    (('a\\n\\nWait', 'x\\n\\nWait'), ('a Wait', 'x\\n\\nWait'))
    """
    if prefix and not prefix.endswith(("\n", " ")):
        prefix += "\n\n"
    return prefix + marker, (f"{inserted}\n\n{marker}" if inserted else marker)


def batch_positions(
    traces: Iterable[tuple[str, str, str, int]], problem_order: Mapping[str, int], *, batch_size: int, min_steps: int
) -> dict[str, int]:
    """Each trace's index within its batch, as the authors' scripts/create_interventions.py sees it.

    ``traces`` are (trace id, model, problem id, number of steps) of the kept traces. Per model, in the
    order of ``problem_order`` (problem id → row in the problems table; the authors read one model's
    filtered trace file in order), traces are taken ``batch_size`` at a time, and within a batch the traces
    with at least ``min_steps`` steps are numbered from 0 (interventions.py ``prepare_inputs_for_batch``
    drops the others before the index is taken). Traces with fewer steps get no position.

    >>> batch_positions([("a", "m", "p1", 3), ("b", "m", "p2", 1), ("c", "m", "p3", 2)], {"p1": 0, "p2": 1,
    ...     "p3": 2}, batch_size=2, min_steps=2)
    {'a': 0, 'c': 0}
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be ≥ 1, got {batch_size}")
    per_model: dict[str, list[tuple[int, str, int]]] = defaultdict(list)
    for trace_id, model, problem_id, n_steps in traces:
        per_model[model].append((problem_order.get(problem_id, len(problem_order)), trace_id, n_steps))
    positions: dict[str, int] = {}
    for rows in per_model.values():
        rows.sort()
        for start in range(0, len(rows), batch_size):
            usable = [trace_id for _, trace_id, n_steps in rows[start : start + batch_size] if n_steps >= min_steps]
            positions.update((trace_id, index) for index, trace_id in enumerate(usable))
    return positions


class ReferencePool:
    """The authors' Wikipedia paragraph pool (interventions.py ``load_wikipedia_pool``): every text's
    blank-line pieces of at least ``min_chars`` characters, unstripped, shuffled with ``random.Random(seed)``.
    Their texts are the first 1,000 articles of wikimedia/wikipedia 20231101.en (`from_hub`); any file of
    texts may stand in (`from_path`)."""

    def __init__(self, texts: Iterable[str], *, seed: int, min_chars: int, source: str = "") -> None:
        paragraphs = [piece for text in texts for piece in str(text).split("\n\n") if len(piece) >= min_chars]
        if not paragraphs:
            raise ValueError(f"{source or 'pool'}: no paragraph has ≥ {min_chars} characters")
        random.Random(seed).shuffle(paragraphs)
        self.paragraphs: tuple[str, ...] = tuple(paragraphs)
        self.source = source

    def __len__(self) -> int:
        return len(self.paragraphs)

    def __repr__(self) -> str:
        return f"ReferencePool({len(self)} paragraphs, source={self.source!r})"

    def at(self, position: int) -> str:
        """The paragraph of batch position ``position`` (``pool[position % len(pool)]``)."""
        return self.paragraphs[position % len(self.paragraphs)]

    @cached_property
    def fingerprint(self) -> str:
        """A 16-hex-character hash of the paragraphs in order (recorded in chain ids)."""
        digest = hashlib.sha256()
        for paragraph in self.paragraphs:
            digest.update(paragraph.encode("utf-8", errors="surrogatepass") + b"\x00")
        return digest.hexdigest()[:16]

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], *, seed: int, min_chars: int) -> ReferencePool:
        """Texts from a JSONL file (field ``text``, one text a line) or one text file."""
        path = Path(path)
        if str(path).endswith(".jsonl"):
            lines = path.read_text(encoding="utf-8").splitlines()
            texts = [json.loads(line)["text"] for line in lines if line.strip()]
        else:
            texts = [path.read_text(encoding="utf-8")]
        return cls(texts, seed=seed, min_chars=min_chars, source=str(path))

    @classmethod
    def from_hub(cls, dataset: str, config: str, *, articles: int, seed: int, min_chars: int) -> ReferencePool:
        """The authors' own pool: the first ``articles`` articles of ``dataset``/``config``, streamed (needs
        the ``datasets`` package and the Hub, or its cache)."""
        import datasets  # lazy: an optional extra, and slow to import

        stream = datasets.load_dataset(dataset, config, split="train", streaming=True)
        texts = [str(row.get("text", "")) for row in stream.take(articles)]
        return cls(texts, seed=seed, min_chars=min_chars, source=f"datasets:{dataset}/{config}[:{articles}]")


# ``interventions.wikipedia_pool: datasets:<name>:<config>``: the authors' pool from a `datasets` source.
DATASETS_POOL = "datasets:"


def authors_pool(source: str) -> ReferencePool:
    """The authors' Wikipedia pool read from ``source``: a file of texts, or ``datasets:<name>:<config>`` for the
    first articles of a `datasets` source, streamed, as their code reads wikimedia/wikipedia 20231101.en (the
    article count, shuffle seed and minimum length are theirs, from ``reference_protocol.yaml``)."""
    ref = reference()
    seed, min_chars = int(ref["random_seed"]), int(ref["wikipedia"]["min_chars"])
    if str(source).startswith(DATASETS_POOL):
        name, _, config = str(source)[len(DATASETS_POOL) :].partition(":")
        articles = int(ref["wikipedia"]["articles"])
        return ReferencePool.from_hub(name, config or None, articles=articles, seed=seed, min_chars=min_chars)
    return ReferencePool.from_path(source, seed=seed, min_chars=min_chars)
