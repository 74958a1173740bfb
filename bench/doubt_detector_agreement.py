"""The lexical doubt detector (`recovery.doubt.is_doubt`) against hand labels of real reasoning sentences.

Labels: ``bench/data/doubt_labels_real_traces.jsonl`` — 300 sentences of the 153 real DeepSeek-R1-Distill
traces in ``shared/data/real_traces`` (150 uniform, 150 containing a broad cue word; drawn by
``bench/sample_doubt_sentences.py``, seed 0), each labelled by hand from the sentence alone with the
paper's App. D.2 question: does this text indicate that the PRIOR reasoning contains an error or
irrelevant information? The labels were written before the detector was run on them.

Prints accuracy, per-class precision / recall / F1 and Cohen's κ (as the paper's Table 13) on all labels,
on the two sampling strata (uniform sentences estimate the real-world mix; cued ones are the hard cases),
and on two halves split by trace (``source_line`` odd = "dev", even = "held-out"): any change to the
lexical families tuned on these labels must be tuned on "dev" only and reported on "held-out".
``--errors`` lists the misclassified sentences.

Usage: python bench/doubt_detector_agreement.py [LABELS.jsonl] [--errors]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from recovery.analysis.agreement import BinaryMetrics, binary_metrics, load_labels
from recovery.doubt import doubt_family

DEFAULT_LABELS = Path(__file__).resolve().parent / "data" / "doubt_labels_real_traces.jsonl"


def _fmt(x: float) -> str:
    return "   n/a" if math.isnan(x) else f"{x:6.3f}"


def _row(name: str, m: BinaryMetrics) -> str:
    return (
        f"{name:<22} {m.n:>4} {m.tp + m.fn:>5} {_fmt(m.accuracy)} {_fmt(m.kappa)} "
        f"{_fmt(m.doubt.precision)} {_fmt(m.doubt.recall)} {_fmt(m.doubt.f1)} "
        f"{_fmt(m.no_doubt.precision)} {_fmt(m.no_doubt.recall)} {_fmt(m.no_doubt.f1)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("labels", type=Path, nargs="?", default=DEFAULT_LABELS)
    parser.add_argument("--errors", action="store_true", help="list the misclassified sentences")
    args = parser.parse_args()
    labels = load_labels(args.labels)
    families = [doubt_family(s.text) for s in labels]
    predicted = [f is not None for f in families]
    subsets = {
        "all": range(len(labels)),
        "uniform sample": [i for i, s in enumerate(labels) if s.how.startswith("uniform")],
        "cue sample": [i for i, s in enumerate(labels) if s.how.startswith("cue")],
        "dev (odd line)": [i for i, s in enumerate(labels) if (s.source_line or 0) % 2 == 1],
        "held-out (even line)": [i for i, s in enumerate(labels) if (s.source_line or 0) % 2 == 0],
    }
    print(f"lexical detector vs {args.labels.name}")
    print(
        f"{'subset':<22} {'n':>4} {'doubt':>5} {'acc':>6} {'kappa':>6} {'P+':>6} {'R+':>6} {'F1+':>6} "
        f"{'P-':>6} {'R-':>6} {'F1-':>6}"
    )
    for name, idx in subsets.items():
        idx = list(idx)
        if idx:
            print(_row(name, binary_metrics([labels[i].label for i in idx], [predicted[i] for i in idx])))
    if args.errors:
        for kind, want in (("missed (labelled doubt, not detected)", True), ("false alarms", False)):
            rows = [(s, f) for s, p, f in zip(labels, predicted, families) if s.label == want and p != want]
            print(f"\n{kind}: {len(rows)}")
            for s, f in rows:
                print(f"  [{f or '-'}] line {s.source_line}: {s.text[:160]}")


if __name__ == "__main__":
    main()
