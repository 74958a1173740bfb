"""Match two runs for a comparison: which models pair up, which cells both measured, which chains are
"the same chain" in both.

A cell is (model pair, domain, intervention, timestep, N): majority-of-8 and majority-of-4 are different
measures, so a cell whose number of continuations differs is not shared. Within a shared cell two chains
match when they intervene on the same problem (with one trace per model and problem, that is the same
intervened trace in a base and a fine-tuned model, whose chain ids differ). A problem with several traces
pairs its k-th chain in one run with its k-th in the other, in stored order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from recovery.metrics import majority_threshold
from recovery.report.outcomes import RunOutcomes, objects


class NothingToCompare(ValueError):
    """The two runs share no model, no cell or no chain, so no change can be measured."""


def pair_models(before: Sequence[str], after: Sequence[str]) -> list[tuple[str, str]]:
    """Which model of ``before`` is compared with which of ``after``.

    The same names in both: each with itself. One model on each side (the usual base vs fine-tuned
    checkpoint, named differently): those two. Otherwise the names both runs hold.

    >>> pair_models(["base"], ["base-sft"]), pair_models(["a", "b"], ["b", "c"])
    ([('base', 'base-sft')], [('b', 'b')])
    """
    b, a = list(dict.fromkeys(before)), list(dict.fromkeys(after))
    if set(b) == set(a):
        return [(m, m) for m in b]
    if len(b) == 1 and len(a) == 1:
        return [(b[0], a[0])]
    return [(m, m) for m in b if m in set(a)]


def pair_label(models: tuple[str, str]) -> str:
    """``m`` for a model compared with itself, ``base → tuned`` for two names."""
    return models[0] if models[0] == models[1] else f"{models[0]} → {models[1]}"


@dataclass(frozen=True)
class Pairing:
    """The matched chains of two runs and what was left out.

    ``chains``: one entry per matched chain: ``model`` (`pair_label`), ``domain``, ``intervention``,
    ``category``, ``target_t``, ``problem_id`` (the unit of sampling of every pooled interval), ``n``,
    ``majority_before/after`` (bool), ``whole_before/after`` (% or NaN) and ``index_before/after`` (the chain's
    position in each run's `RunOutcomes`).
    ``unpaired``: chains of shared cells with no partner: ``side`` (0 before, 1 after) and the cell fields.
    ``cells_left_out``: cells only one run measured: dicts with ``side``, ``model``, ``domain``,
    ``intervention``, ``target_t``, ``n`` and ``chains``. ``models_left_out``: ``side``, ``model``, ``chains``.
    """

    models: tuple[tuple[str, str], ...]
    chains: dict[str, np.ndarray]
    unpaired: dict[str, np.ndarray]
    cells_left_out: tuple[dict[str, Any], ...]
    models_left_out: tuple[dict[str, Any], ...]

    def __len__(self) -> int:
        return len(self.chains["n"])


_CELL = ("domain", "intervention", "target_t", "n")


def pair_chains(before: RunOutcomes, after: RunOutcomes, labels: Sequence[str] = ("before", "after")) -> Pairing:
    """Match the chains of ``before`` and ``after`` (see the module docstring).

    Raises `NothingToCompare`, with a one-line message saying what each run holds, when the runs share no
    model, no cell, or no chain within their shared cells.
    """
    models = pair_models(before.models(), after.models())
    if not models:
        raise NothingToCompare(
            f"nothing to compare: {labels[0]} and {labels[1]} share no model "
            f"({labels[0]}: {', '.join(before.models()) or 'none'}; {labels[1]}: {', '.join(after.models()) or 'none'})"
        )
    keys_b, cells_b = _keys(before, {b: i for i, (b, _) in enumerate(models)})
    keys_a, cells_a = _keys(after, {a: i for i, (_, a) in enumerate(models)})
    shared = set(cells_b) & set(cells_a)
    if not shared:
        raise NothingToCompare(
            f"nothing to compare: {labels[0]} and {labels[1]} share no (domain, intervention, timestep, N) cell "
            f"({labels[0]}: {describe_cells(_cell_rows(cells_b, models, 0))}; "
            f"{labels[1]}: {describe_cells(_cell_rows(cells_a, models, 1))})"
        )
    index_b = {key: i for i, key in enumerate(keys_b) if key is not None and key[0] in shared}
    matched_b, matched_a, lone_a = [], [], []
    for i, key in enumerate(keys_a):
        if key is None or key[0] not in shared:
            continue
        j = index_b.pop(key, None)
        if j is None:
            lone_a.append(i)
        else:
            matched_b.append(j)
            matched_a.append(i)
    if not matched_b:
        raise NothingToCompare(
            f"nothing to compare: {labels[0]} and {labels[1]} share {len(shared)} cell(s) but no chain "
            "(no problem intervened in both)"
        )
    lone_b = sorted(index_b.values())
    pair_names = [pair_label(m) for m in models]
    left_out = [{"side": 0, **_cell_dict(c, models, 0), "chains": n} for c, n in cells_b.items() if c not in shared]
    left_out += [{"side": 1, **_cell_dict(c, models, 1), "chains": n} for c, n in cells_a.items() if c not in shared]
    return Pairing(
        models=tuple(models),
        chains=_matched(
            before,
            after,
            np.array(matched_b, dtype=np.int64),
            np.array(matched_a, dtype=np.int64),
            [pair_names[keys_b[j][0][0]] for j in matched_b],
        ),
        unpaired=_unpaired(before, after, lone_b, lone_a),
        cells_left_out=tuple(
            sorted(
                left_out, key=lambda c: (c["side"], c["model"], c["domain"], c["intervention"], c["n"], c["target_t"])
            )
        ),
        models_left_out=tuple(
            _models_left_out(before, 0, {b for b, _ in models}) + _models_left_out(after, 1, {a for _, a in models})
        ),
    )


def _keys(run: RunOutcomes, pair_of: dict[str, int]) -> tuple[list, Counter]:
    """Per chain: ((cell), problem, occurrence), or None for a model that is not compared; and the chain
    count of each cell."""
    c = run.chains
    seen: Counter = Counter()
    cells: Counter = Counter()
    keys: list = []
    columns = [
        c["model"].tolist(),
        c["domain"].tolist(),
        c["intervention"].tolist(),
        c["target_t"].tolist(),
        c["n"].tolist(),
        c["problem_id"].tolist(),
    ]
    for model, domain, intervention, t, n, problem in zip(*columns):
        pair = pair_of.get(model)
        if pair is None:
            keys.append(None)
            continue
        cell = (pair, domain, intervention, round(float(t), 9), int(n))
        cells[cell] += 1
        seen[(cell, problem)] += 1
        keys.append((cell, problem, seen[(cell, problem)]))
    return keys, cells


def _cell_dict(cell: tuple, models: list[tuple[str, str]], side: int) -> dict[str, Any]:
    return {"model": models[cell[0]][side], **dict(zip(_CELL, cell[1:]))}


def describe_cells(cells: Sequence[dict[str, Any]]) -> str:
    """Cells in a few words: per (domain, intervention, N) its timesteps and chains, e.g.
    ``toy/paraphrase t=0.3, 0.7 N=2 (12 chains)``; the domain is named when there are several."""
    if not cells:
        return "no graded chains"
    groups: dict[tuple, list] = {}
    for c in cells:
        groups.setdefault((c["domain"], c["intervention"], c["n"]), []).append(c)
    several = len({c["domain"] for c in cells}) > 1
    parts = []
    for (domain, intervention, n), members in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        ts = ", ".join(f"{t:.6g}" for t in sorted({m["target_t"] for m in members}))
        chains = sum(m["chains"] for m in members)
        parts.append(f"{domain + ': ' if several else ''}{intervention} t={ts} N={n} ({chains} chains)")
    return "; ".join(parts)


def _cell_rows(cells: Counter, models: list[tuple[str, str]], side: int) -> list[dict[str, Any]]:
    return [{**_cell_dict(c, models, side), "chains": n} for c, n in cells.items()]


def _matched(before: RunOutcomes, after: RunOutcomes, ib: np.ndarray, ia: np.ndarray, names: list[str]) -> dict:
    cb, ca = before.chains, after.chains
    n = cb["n"][ib]
    threshold = majority_threshold(n)
    return {
        "model": objects(names),
        "domain": cb["domain"][ib],
        "intervention": cb["intervention"][ib],
        "category": cb["category"][ib],
        "target_t": cb["target_t"][ib],
        "problem_id": cb["problem_id"][ib],
        "n": n,
        "majority_before": cb["k"][ib] >= threshold,
        "majority_after": ca["k"][ia] >= threshold,
        "whole_before": cb["whole_pct"][ib],
        "whole_after": ca["whole_pct"][ia],
        # Which chain of each run this is (positions in its `RunOutcomes`), for a reader showing the pair.
        "index_before": ib,
        "index_after": ia,
    }


def _unpaired(before: RunOutcomes, after: RunOutcomes, lone_b: list[int], lone_a: list[int]) -> dict:
    out: dict[str, np.ndarray] = {"side": np.array([0] * len(lone_b) + [1] * len(lone_a), dtype=np.int64)}
    ib, ia = np.array(lone_b, dtype=np.int64), np.array(lone_a, dtype=np.int64)
    for name in ("domain", "intervention", "category", "target_t", "n"):
        out[name] = np.concatenate([before.chains[name][ib], after.chains[name][ia]])
    return out


def _models_left_out(run: RunOutcomes, side: int, compared: set[str]) -> list[dict[str, Any]]:
    counts = Counter(run.chains["model"].tolist())
    return [{"side": side, "model": m, "chains": counts.get(m, 0)} for m in run.models() if m not in compared]


def pair_clean(before: RunOutcomes, after: RunOutcomes, models: Sequence[tuple[str, str]] | None = None) -> list[dict]:
    """Clean accuracy of both runs per domain, for the compared ``models`` (default: `pair_models` of the
    two runs' models).

    Each dict: ``domain``, ``n_before``/``correct_before``, ``n_after``/``correct_after`` (every problem of
    each side), and ``paired_before``/``paired_after``: the 0/1 outcomes of the problems both sides have a
    trace outcome for (empty when a side only has its stored accuracy, not per-problem outcomes), with
    ``paired_problems``, their problem ids (a problem appears once per compared model pair).
    """
    models = list(models) if models is not None else pair_models(before.models(), after.models())
    per_domain: dict[str, dict[str, Any]] = {}
    for side, run in ((0, before), (1, after)):
        wanted = {m[side] for m in models}
        for domain, (n, correct) in _side_counts(run, wanted).items():
            entry = per_domain.setdefault(
                domain, {"domain": domain, "n_before": 0, "correct_before": 0, "n_after": 0, "correct_after": 0}
            )
            entry[("n_before", "n_after")[side]] = n
            entry[("correct_before", "correct_after")[side]] = correct
    for domain, entry in per_domain.items():
        pb, pa, problems = [], [], []
        for mb, ma in models:
            outcomes_b = _problem_outcomes(before, mb, domain)
            for key, ok in _problem_outcomes(after, ma, domain).items():
                if key in outcomes_b:
                    pb.append(outcomes_b[key])
                    pa.append(ok)
                    problems.append(key[0])
        entry["paired_before"], entry["paired_after"] = np.array(pb, dtype=bool), np.array(pa, dtype=bool)
        entry["paired_problems"] = objects(problems)
    return [per_domain[d] for d in sorted(per_domain)]


def _side_counts(run: RunOutcomes, models: set[str]) -> dict[str, tuple[int, int]]:
    """(problems, correct) per domain: from per-problem outcomes, else from the stored accuracy."""
    out: dict[str, list[int]] = {}
    clean = run.clean
    if len(clean["model"]):
        for model, domain, ok in zip(clean["model"].tolist(), clean["domain"].tolist(), clean["correct"].tolist()):
            if model in models:
                cell = out.setdefault(domain, [0, 0])
                cell[0] += 1
                cell[1] += bool(ok)
    else:
        for c in run.clean_summary:
            acc, n = float(c["accuracy"]), int(c["n"])
            if str(c["model"]) in models and n > 0 and acc == acc:
                cell = out.setdefault(str(c["domain"]), [0, 0])
                cell[0] += n
                cell[1] += round(acc * n)
    return {d: (n, k) for d, (n, k) in out.items()}


def _problem_outcomes(run: RunOutcomes, model: str, domain: str) -> dict[tuple[str, int], bool]:
    clean, seen, out = run.clean, Counter(), {}
    for m, d, problem, ok in zip(
        clean["model"].tolist(), clean["domain"].tolist(), clean["problem_id"].tolist(), clean["correct"].tolist()
    ):
        if m == model and d == domain:
            seen[problem] += 1
            out[(problem, seen[problem])] = bool(ok)
    return out
