"""Training one logistic-regression probe per (layer, intervention) on a seeded stratified split, and the
activation statistics stored beside the accuracies."""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from recovery.analysis.activation_probes.config import ProbeConfig
from recovery.analysis.activation_probes.dataset import CLEAN, ProbeExample
from recovery.report.data import category_of


@dataclass(frozen=True, slots=True)
class ProbeScore:
    """Accuracy of one probe on its held-out split (and on its training split, to show over-fitting)."""

    accuracy: float
    train_accuracy: float
    n_train: int
    n_test: int
    chance: float  # share of the majority class in the test split
    converged: bool


def split_indices(labels: Sequence[int], test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A seeded, stratified train/test split of ``range(len(labels))`` (the same for every layer)."""
    from sklearn.model_selection import train_test_split

    index = np.arange(len(labels))
    train, test = train_test_split(index, test_size=test_fraction, random_state=seed, stratify=np.asarray(labels))
    return np.sort(train), np.sort(test)


def train_probe(
    X: np.ndarray, y: Sequence[int], train: np.ndarray, test: np.ndarray, *, C: float = 1.0, max_iter: int = 2000
) -> ProbeScore:
    """Fit a standardised logistic-regression probe on ``X[train]`` and score it on ``X[test]``.

    Deterministic (lbfgs has no randomness), so the same data and split give the same accuracy.
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    y = np.asarray(y)
    if len(set(y[train].tolist())) < 2:
        raise ValueError("the training split holds one class only; a probe needs both")
    probe = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=max_iter))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        probe.fit(X[train], y[train])
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    counts = np.bincount(y[test], minlength=2)
    return ProbeScore(
        accuracy=float(probe.score(X[test], y[test])),
        train_accuracy=float(probe.score(X[train], y[train])),
        n_train=len(train),
        n_test=len(test),
        chance=float(counts.max() / counts.sum()),
        converged=converged,
    )


def probe_accuracies(
    activations: np.ndarray, examples: Sequence[ProbeExample], config: ProbeConfig, skips: Counter | None = None
) -> list[dict[str, Any]]:
    """One row per (intervention, layer): the probe of that intervention's prefixes against clean ones.

    Each probe uses as many clean prefixes as intervened ones (the first ones drawn), so the classes are
    balanced; an intervention with too few examples for a stratified split is skipped and counted.
    """
    skips = skips if skips is not None else Counter()
    clean = [i for i, ex in enumerate(examples) if ex.group == CLEAN]
    groups: dict[str, list[int]] = {}
    for i, ex in enumerate(examples):
        if ex.group != CLEAN:
            groups.setdefault(ex.group, []).append(i)
    rows: list[dict[str, Any]] = []
    for name, members in groups.items():
        n = min(len(clean), len(members))
        index = np.asarray(clean[:n] + members[:n])
        labels = [0] * n + [1] * n
        try:
            train, test = split_indices(labels, config.test_fraction, config.seed)
        except ValueError:  # sklearn: a stratified split needs ≥ 1 example of each class on each side
            skips[f"{name}/too_few_examples_for_a_split"] += 1
            continue
        category = category_of(name)
        for layer in range(activations.shape[0]):
            score = train_probe(activations[layer, index], labels, train, test, C=config.C, max_iter=config.max_iter)
            rows.append(
                {
                    "model": examples[members[0]].model,
                    "intervention": name,
                    "category": category,
                    "layer": layer,
                    **asdict(score),
                }
            )
    return rows


def activation_summary(activations: np.ndarray, examples: Sequence[ProbeExample]) -> list[dict[str, Any]]:
    """Per (layer, group): how many prefixes, and the mean / std of their residual norms, plus the distance
    between the group's mean activation and the clean one (what a probe can at least exploit)."""
    groups = sorted({ex.group for ex in examples}, key=lambda g: (g != CLEAN, g))
    members = {g: np.asarray([i for i, ex in enumerate(examples) if ex.group == g]) for g in groups}
    rows = []
    for layer in range(activations.shape[0]):
        clean_mean = activations[layer, members[CLEAN]].mean(0) if CLEAN in members else None
        for g in groups:
            values = activations[layer, members[g]]
            norms = np.linalg.norm(values, axis=1)
            distance = float(np.linalg.norm(values.mean(0) - clean_mean)) if clean_mean is not None else math.nan
            rows.append(
                {
                    "layer": layer,
                    "group": g,
                    "n": len(values),
                    "mean_norm": float(norms.mean()),
                    "std_norm": float(norms.std()),
                    "mean_distance_to_clean": distance,
                }
            )
    return rows
