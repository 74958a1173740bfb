"""How well a doubt detector matches reference labels, and how well two detectors agree (paper App. D.3).

The paper validates its LLM doubt judge against human labels (Table 13): accuracy, precision / recall /
F1 for the doubtful and the non-doubtful class, and Cohen's κ. `binary_metrics` computes those for any
detector; `agreement` gives κ and raw agreement between two detectors (lexical vs judge), with no
reference. `load_labels` reads a JSONL label file; `validation_section` turns the numbers into the report
section "Doubt detector validation".

Undefined ratios are NaN, never a silent 0: precision of a class that was never predicted, recall of a
class absent from the labels, and κ when both raters gave one constant label (chance agreement is 1).

>>> m = binary_metrics([True, True, False, False], [True, False, False, False])
>>> m.accuracy, m.doubt.precision, m.doubt.recall, round(m.kappa, 3)
(0.75, 1.0, 0.5, 0.5)
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recovery.report.data import Section, Table

__all__ = [
    "Agreement",
    "BinaryMetrics",
    "ClassMetrics",
    "LabeledSentence",
    "Validation",
    "agreement",
    "binary_metrics",
    "cohen_kappa",
    "load_labels",
    "validate",
    "validation_section",
]


@dataclass(frozen=True, slots=True)
class ClassMetrics:
    """Precision, recall and F1 of one class (NaN where undefined), with its support in the labels."""

    precision: float
    recall: float
    f1: float
    support: int


@dataclass(frozen=True, slots=True)
class BinaryMetrics:
    """A detector against reference labels. ``doubt`` is the positive class, ``no_doubt`` the negative."""

    n: int
    tp: int
    fp: int
    fn: int
    tn: int
    accuracy: float
    kappa: float
    doubt: ClassMetrics
    no_doubt: ClassMetrics


@dataclass(frozen=True, slots=True)
class Agreement:
    """Agreement of two raters on the same items: Cohen's κ, raw agreement, and how often each said doubt."""

    n: int
    kappa: float
    accuracy: float
    rate_a: float
    rate_b: float


def _ratio(num: int, den: int) -> float:
    return num / den if den else math.nan


def _f1(precision: float, recall: float) -> float:
    if math.isnan(precision) or math.isnan(recall):
        return math.nan
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def _check_pair(a: Sequence[bool], b: Sequence[bool], what: str) -> None:
    if len(a) != len(b):
        raise ValueError(f"{what}: {len(a)} and {len(b)} labels; both must label the same items")
    if not a:
        raise ValueError(f"{what}: no items")
    for i, (x, y) in enumerate(zip(a, b)):
        if not isinstance(x, bool) or not isinstance(y, bool):
            raise TypeError(f"{what}: item {i} has labels {x!r}, {y!r}; labels must be bool")


def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float:
    """Cohen's κ of two binary raters: (p_o − p_e) / (1 − p_e); NaN when p_e = 1.

    >>> cohen_kappa([True, False, True, False], [True, False, False, False])
    0.5
    """
    _check_pair(a, b, "cohen_kappa")
    n = len(a)
    p_o = sum(x == y for x, y in zip(a, b)) / n
    pa, pb = sum(a) / n, sum(b) / n
    p_e = pa * pb + (1 - pa) * (1 - pb)
    return math.nan if p_e == 1 else (p_o - p_e) / (1 - p_e)


def binary_metrics(labels: Sequence[bool], predicted: Sequence[bool]) -> BinaryMetrics:
    """Accuracy, per-class precision / recall / F1 and κ of ``predicted`` against reference ``labels``."""
    _check_pair(labels, predicted, "binary_metrics")
    tp = sum(y and p for y, p in zip(labels, predicted))
    fp = sum((not y) and p for y, p in zip(labels, predicted))
    fn = sum(y and not p for y, p in zip(labels, predicted))
    tn = len(labels) - tp - fp - fn
    p_pos, r_pos = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
    p_neg, r_neg = _ratio(tn, tn + fn), _ratio(tn, tn + fp)
    return BinaryMetrics(
        n=len(labels),
        tp=tp,
        fp=fp,
        fn=fn,
        tn=tn,
        accuracy=(tp + tn) / len(labels),
        kappa=cohen_kappa(labels, predicted),
        doubt=ClassMetrics(p_pos, r_pos, _f1(p_pos, r_pos), tp + fn),
        no_doubt=ClassMetrics(p_neg, r_neg, _f1(p_neg, r_neg), tn + fp),
    )


def agreement(a: Sequence[bool], b: Sequence[bool]) -> Agreement:
    """κ and raw agreement between two detectors on the same sentences (no reference needed)."""
    _check_pair(a, b, "agreement")
    n = len(a)
    return Agreement(n, cohen_kappa(a, b), sum(x == y for x, y in zip(a, b)) / n, sum(a) / n, sum(b) / n)


# -- label files -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LabeledSentence:
    """One reference label: the sentence, whether it expresses doubt, and where it came from."""

    text: str
    label: bool
    source_line: int | None = None
    how: str = ""


def load_labels(path: str | os.PathLike) -> list[LabeledSentence]:
    """Read a JSONL label file: one object per line with ``text`` (str) and ``label`` (bool), optionally
    ``source_line`` and ``how``. A malformed line raises ValueError naming the file, line and problem."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"label file not found: {path}")
    out: list[LabeledSentence] = []
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{line_no}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{where}: not JSON ({err})") from None
            if not isinstance(row, dict):
                raise ValueError(f"{where}: expected an object, got {type(row).__name__}")
            text, label = row.get("text"), row.get("label")
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"{where}: 'text' must be a non-empty string, got {text!r}")
            if not isinstance(label, bool):
                raise ValueError(f"{where}: 'label' must be true or false, got {label!r}")
            source = row.get("source_line")
            if source is not None and not isinstance(source, int):
                raise ValueError(f"{where}: 'source_line' must be an integer, got {source!r}")
            out.append(LabeledSentence(text, label, source, str(row.get("how", ""))))
    if not out:
        raise ValueError(f"{path}: no labels")
    return out


# -- detectors against labels ---------------------------------------------------------------------------------


@dataclass
class Validation:
    """Detectors run on a label set: metrics per detector (on the sentences it gave a verdict for), the
    agreement of the first two detectors (on sentences both judged), skipped counts, and the verdicts."""

    n_labels: int
    n_doubt: int
    results: dict[str, BinaryMetrics]
    predictions: dict[str, list[bool | None]]
    skipped: dict[str, int]
    pair: tuple[str, str, Agreement] | None = None


def validate(labels: Sequence[LabeledSentence], detectors: Sequence[Any]) -> Validation:
    """Classify every labelled sentence with each detector (objects with ``name`` and ``classify``, see
    `recovery.analysis.doubt_judge.DoubtDetector`) and score them; a detector with no verdict at all is
    refused (its metrics would be empty)."""
    if not labels:
        raise ValueError("no labels to validate against")
    texts = [s.text for s in labels]
    truth = [s.label for s in labels]
    results: dict[str, BinaryMetrics] = {}
    predictions: dict[str, list[bool | None]] = {}
    skipped: dict[str, int] = {}
    for detector in detectors:
        verdicts = list(detector.classify(texts))
        if len(verdicts) != len(texts):
            raise RuntimeError(
                f"detector {detector.name!r} returned {len(verdicts)} verdicts for {len(texts)} sentences"
            )
        keep = [i for i, v in enumerate(verdicts) if v is not None]
        if not keep:
            raise ValueError(f"detector {detector.name!r} gave no usable verdict on any of {len(texts)} sentences")
        predictions[detector.name] = verdicts
        skipped[detector.name] = len(texts) - len(keep)
        results[detector.name] = binary_metrics([truth[i] for i in keep], [bool(verdicts[i]) for i in keep])
    pair = None
    if len(detectors) >= 2:
        a, b = detectors[0].name, detectors[1].name
        both = [i for i in range(len(texts)) if predictions[a][i] is not None and predictions[b][i] is not None]
        if both:
            pair = (a, b, agreement([bool(predictions[a][i]) for i in both], [bool(predictions[b][i]) for i in both]))
    return Validation(len(labels), sum(truth), results, predictions, skipped, pair)


# -- report ------------------------------------------------------------------------------------------------


def _pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{100 * x:.1f}%"


def _num(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.3f}"


def metrics_table(results: dict[str, BinaryMetrics], title: str = "Detector vs reference labels") -> Table:
    """One column per detector, rows as in the paper's Table 13."""
    names = list(results)
    rows: list[tuple] = []
    for label, get in (
        ("Sentences", lambda m: str(m.n)),
        ("Accuracy", lambda m: _pct(m.accuracy)),
        ("Cohen's κ", lambda m: _num(m.kappa)),
        ("Precision (doubtful)", lambda m: _pct(m.doubt.precision)),
        ("Recall (doubtful)", lambda m: _pct(m.doubt.recall)),
        ("F1 (doubtful)", lambda m: _pct(m.doubt.f1)),
        ("Precision (non-doubtful)", lambda m: _pct(m.no_doubt.precision)),
        ("Recall (non-doubtful)", lambda m: _pct(m.no_doubt.recall)),
        ("F1 (non-doubtful)", lambda m: _pct(m.no_doubt.f1)),
        ("TP / FP / FN / TN", lambda m: f"{m.tp} / {m.fp} / {m.fn} / {m.tn}"),
    ):
        rows.append((label, *(get(results[n]) for n in names)))
    return Table(title, ["metric", *names], rows, align=["l", *("r" * len(names))])


def validation_section(
    validation: Validation, labels: Sequence[LabeledSentence], *, labels_name: str, max_errors: int = 20
) -> Section:
    """The "Doubt detector validation" section: metrics per detector (as the paper's Table 13), the two
    detectors' mutual agreement, and up to ``max_errors`` misclassified sentences per detector."""
    v = validation
    prose = [
        (
            f"Reference: `{labels_name}`, {v.n_labels} sentences, {v.n_doubt} labelled doubtful "
            f"({_pct(v.n_doubt / v.n_labels)}). Each detector's verdicts are compared with the labels as in the "
            "paper's App. D.3 (Table 13: the paper's judge reached 93.75% accuracy, κ = 0.874 vs the human majority)."
        )
    ]
    for name, count in sorted(v.skipped.items()):
        if count:
            prose.append(f"{name}: {count} sentence(s) without a usable verdict are left out of its metrics.")
    tables: list[Table] = [metrics_table(v.results)]
    if v.pair is not None:
        a, b, agr = v.pair
        prose.append(
            f"Agreement {a} vs {b} (no reference): κ = {_num(agr.kappa)}, agreement {_pct(agr.accuracy)} "
            f"on {agr.n} sentences."
        )
        columns = ["sentences", "Cohen's κ", "agreement", f"doubt rate {a}", f"doubt rate {b}"]
        row = (agr.n, _num(agr.kappa), _pct(agr.accuracy), _pct(agr.rate_a), _pct(agr.rate_b))
        tables.append(Table(f"Agreement: {a} vs {b}", columns, [row], align=["r"] * 5))
    errors = []
    for name, verdicts in v.predictions.items():
        wrong = [(name, s.label, s.text) for s, p in zip(labels, verdicts) if p is not None and p != s.label]
        errors += wrong[:max_errors]
    if errors:
        rows = [(d, "doubt" if y else "no doubt", t[:200]) for d, y, t in errors]
        caption = f"At most {max_errors} per detector, in label-file order."
        tables.append(
            Table(
                "Misclassified sentences", ["detector", "reference", "sentence"], rows, collapsed=True, caption=caption
            )
        )
    return Section("Doubt detector validation", "\n\n".join(prose), tables=tuple(tables))
