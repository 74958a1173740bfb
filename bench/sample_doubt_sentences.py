"""Draw the sentences of the doubt-detector validation set from real reasoning traces (no labels).

The set behind ``bench/data/doubt_labels_real_traces.jsonl`` was drawn with this script and then labelled
by hand (see that file's ``how`` field and `bench/doubt_detector_agreement.py`). Sentences come from the
reasoning (between the think tags) of every trace in a JSONL file (field ``solution``), split with the
project's splitter (`recovery.doubt.split_sentences`). Two halves, so that both classes are well
represented (doubt is rare in unperturbed reasoning, ~15 % in the paper's §4.2):

- ``--uniform`` sentences drawn uniformly from all sentences;
- ``--cued`` sentences that contain a broad cue (``CUES``), the cue chosen round-robin so that no single
  frequent cue ("but", "?") fills the half. The cues are deliberately wider than the lexical detector's
  families, so the half also holds non-doubtful uses ("but we also need", "the right side").

A sentence text appears once in the set. The draw is seeded: same file and seed, same sentences.
The lexical detector is never consulted here (the labels must not be shaped by it).

Usage: python bench/sample_doubt_sentences.py TRACES.jsonl OUT.jsonl [--uniform 150] [--cued 150] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

from recovery.doubt import split_sentences
from recovery.segment import SegmentationError, split_reasoning

# Broad cue words (whole words, case-insensitive) plus "?": each may or may not mark doubt.
CUES: tuple[str, ...] = (
    "?",
    "but",
    "no",
    "actually",
    "check",
    "wait",
    "hmm",
    "right",
    "mistake",
    "wrong",
    "again",
    "sure",
    "seems",
    "correct",
)


def _has_cue(sentence: str, cue: str) -> bool:
    if cue == "?":
        return "?" in sentence
    return re.search(rf"\b{re.escape(cue)}\b", sentence, re.IGNORECASE) is not None


def trace_sentences(path: Path) -> list[tuple[int, str]]:
    """``(1-based line number, sentence)`` for every sentence of every trace's reasoning in ``path``."""
    out: list[tuple[int, str]] = []
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            try:
                reasoning = split_reasoning(row["solution"], record=f"{path}:{line_no}").reasoning
            except (KeyError, SegmentationError) as err:
                raise SystemExit(f"{path}:{line_no}: cannot read the reasoning: {err}") from err
            out.extend((line_no, s) for s in split_sentences(reasoning))
    return out


def draw(sentences: list[tuple[int, str]], n_uniform: int, n_cued: int, seed: int) -> list[dict]:
    """The sample: ``n_uniform`` uniform sentences, then ``n_cued`` cued ones (distinct texts)."""
    rng = random.Random(seed)
    chosen: list[dict] = []
    seen: set[str] = set()
    for i in rng.sample(range(len(sentences)), len(sentences)):
        if len(chosen) == n_uniform:
            break
        line_no, text = sentences[i]
        if text not in seen:
            seen.add(text)
            chosen.append({"text": text, "source_line": line_no, "how": "uniform"})
    by_cue = {cue: [s for s in sentences if _has_cue(s[1], cue)] for cue in CUES}
    for pool in by_cue.values():
        rng.shuffle(pool)
    picked = 0
    while picked < n_cued and any(by_cue.values()):
        for cue in CUES:
            pool = by_cue[cue]
            while pool and pool[-1][1] in seen:
                pool.pop()
            if not pool or picked == n_cued:
                continue
            line_no, text = pool.pop()
            seen.add(text)
            chosen.append({"text": text, "source_line": line_no, "how": f"cue:{cue}"})
            picked += 1
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--uniform", type=int, default=150)
    parser.add_argument("--cued", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sample = draw(trace_sentences(args.traces), args.uniform, args.cued, args.seed)
    args.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in sample), encoding="utf-8")
    print(f"{len(sample)} sentences -> {args.out}")


if __name__ == "__main__":
    main()
