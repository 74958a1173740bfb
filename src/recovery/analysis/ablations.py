"""The paper's ablations as numbers and report sections (§5 Tables 7–9, App. A.2 Table 10).

Pure functions of aggregate rows (`recovery.pipeline.aggregate.read_aggregates`) or chain outcomes
(`recovery.pipeline.aggregate.chain_outcomes`); reading run directories and storing the sections is
`recovery.analysis.ablation_runs`' job.

- **Append "Wait"** (Tables 7–8): rows of a base run and a run with ``interventions.append_wait`` are
  matched by (model, domain, intervention, target_t); each match gives the percentage-point change of its
  majority robustness. Table 7 averages these changes over interventions per (model, t), Table 8 over
  models per (intervention, t), each cell the unweighted mean of the matched rows (as the paper averages
  "across interventions"/"across models"). Rows found in one run only are listed, never dropped silently.
- **Model swap** (Table 9): a swap run labels its groups ``"A→B"`` (`recovery.pipeline.swap`); a cell
  (original A, continuing B) is the mean over interventions of the majority robustness at the chosen t.
- **Consecutive interventions** (Table 10): accuracy = correct continuations / graded continuations of the
  chains at the chosen t, one run per k.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from recovery.metrics import ChainOutcome
from recovery.pipeline.swap import split_label
from recovery.report import fmt
from recovery.report.data import Figure, Section, Table, category_of, order_interventions

MAJORITY = "majority_mean"
T_DIGITS = 9  # target_t is compared after rounding, as the report does


def _t(value: Any) -> float:
    return round(float(value), T_DIGITS)


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return sum(finite) / len(finite) if finite else math.nan


@dataclass(frozen=True)
class Pivot:
    """A 2-D table of means: ``cells[i][j]`` is the mean of the values filed under (index[i], columns[j])
    (NaN where none were), ``counts[i][j]`` how many values it averages."""

    index: tuple
    columns: tuple
    cells: tuple[tuple[float, ...], ...]
    counts: tuple[tuple[int, ...], ...]

    def cell(self, i: Any, j: Any) -> float:
        """The mean at row label ``i`` and column label ``j`` (KeyError for unknown labels)."""
        if i not in self.index or j not in self.columns:
            raise KeyError(f"no cell ({i!r}, {j!r}) in a pivot of {self.index} × {self.columns}")
        return self.cells[self.index.index(i)][self.columns.index(j)]


def mean_pivot(
    items: Iterable[Any],
    index: Callable[[Any], Any],
    column: Callable[[Any], Any],
    value: Callable[[Any], float],
    *,
    index_order: Callable[[Iterable[Any]], list] = sorted,
    column_order: Callable[[Iterable[Any]], list] = sorted,
) -> Pivot:
    """Group ``items`` by (index(item), column(item)) and average ``value(item)`` (NaN values skipped)."""
    groups: dict[tuple, list[float]] = defaultdict(list)
    for item in items:
        groups[(index(item), column(item))].append(float(value(item)))
    rows = tuple(index_order({i for i, _ in groups}))
    cols = tuple(column_order({c for _, c in groups}))
    cells = tuple(tuple(_mean(groups.get((i, c), [])) for c in cols) for i in rows)
    counts = tuple(tuple(len(groups.get((i, c), [])) for c in cols) for i in rows)
    return Pivot(rows, cols, cells, counts)


def _index_rows(rows: Iterable[Mapping[str, Any]], run: str) -> dict[tuple, Mapping[str, Any]]:
    out: dict[tuple, Mapping[str, Any]] = {}
    for i, row in enumerate(rows):
        missing = [k for k in ("model", "domain", "intervention", "target_t") if row.get(k) is None]
        if missing:
            raise ValueError(f"{run} aggregate row {i} lacks {', '.join(missing)}: {dict(row)}")
        key = (str(row["model"]), str(row["domain"]), str(row["intervention"]), _t(row["target_t"]))
        if key in out:
            raise ValueError(f"{run} aggregate rows repeat model/domain/intervention/target_t {key}")
        out[key] = row
    return out


def _majority(row: Mapping[str, Any]) -> float:
    value = row.get(MAJORITY)
    return math.nan if value is None else float(value)


# ------------------------------------------------------------------------------------ append "Wait"


@dataclass(frozen=True)
class WaitDelta:
    """One matched (model, domain, intervention, t) group: majority robustness without and with "Wait"."""

    model: str
    domain: str
    intervention: str
    target_t: float
    base: float
    wait: float
    base_chains: int
    wait_chains: int

    @property
    def delta_pp(self) -> float:
        """Change in percentage points (wait − base) × 100."""
        return 100.0 * (self.wait - self.base)


@dataclass(frozen=True)
class Unmatched:
    """An aggregate group that has no counterpart (or no majority value): ``run`` names where it was found."""

    run: str
    model: str
    domain: str
    intervention: str
    target_t: float
    reason: str


@dataclass(frozen=True)
class WaitComparison:
    deltas: tuple[WaitDelta, ...]
    unmatched: tuple[Unmatched, ...]

    def domains(self) -> list[str]:
        return sorted({d.domain for d in self.deltas})


def match_wait(base_rows: Iterable[Mapping[str, Any]], wait_rows: Iterable[Mapping[str, Any]]) -> WaitComparison:
    """Pair the base run's and the Wait run's aggregate rows by (model, domain, intervention, target_t)."""
    base, wait = _index_rows(base_rows, "base run"), _index_rows(wait_rows, "wait run")
    deltas, unmatched = [], []
    for key in sorted(set(base) | set(wait), key=str):
        if key not in wait:
            unmatched.append(Unmatched("base", *key, "only in the base run"))
            continue
        if key not in base:
            unmatched.append(Unmatched("wait", *key, "only in the wait run"))
            continue
        b, w = _majority(base[key]), _majority(wait[key])
        if math.isnan(b) or math.isnan(w):
            which = "base" if math.isnan(b) else "wait"
            unmatched.append(Unmatched(which, *key, "no majority robustness value"))
            continue
        deltas.append(WaitDelta(*key, b, w, int(base[key].get("n_chains") or 0), int(wait[key].get("n_chains") or 0)))
    return WaitComparison(tuple(deltas), tuple(unmatched))


def wait_by_model(comp: WaitComparison, domain: str) -> Pivot:
    """Table 7: mean pp change per (t, model), averaged across interventions."""
    return mean_pivot(
        (d for d in comp.deltas if d.domain == domain), lambda d: d.target_t, lambda d: d.model, lambda d: d.delta_pp
    )


def wait_by_intervention(comp: WaitComparison, domain: str) -> Pivot:
    """Table 8: mean pp change per (t, intervention), averaged across models."""
    return mean_pivot(
        (d for d in comp.deltas if d.domain == domain), lambda d: d.target_t, lambda d: d.intervention,
        lambda d: d.delta_pp, column_order=order_interventions,
    )  # fmt: skip


def pivot_table(
    pivot: Pivot, title: str, corner: str, cell: Callable[[float], str], caption: str = "", header=str
) -> Table:
    """A report `Table` of ``pivot`` with formatted cells (row labels in the first column)."""
    rows = [[fmt.timestep(i) if isinstance(i, float) else str(i), *(cell(v) for v in line)]
            for i, line in zip(pivot.index, pivot.cells)]  # fmt: skip
    columns = [corner, *(header(c) for c in pivot.columns)]
    return Table(title, columns, rows, "l" + "r" * len(pivot.columns), caption)


def _signed2(v: float) -> str:
    return fmt.signed(v, 2)


def wait_section(
    comp: WaitComparison, *, base_label: str, wait_label: str, notes: Sequence[str] = (), figures: bool = True
) -> Section:
    """The report section of the append-"Wait" ablation (Tables 7–8, every matched row, the unmatched)."""
    overall = _mean([d.delta_pp for d in comp.deltas])
    lines = [
        f"Majority robustness of **{wait_label}** (\"Wait\" appended after every intervention) minus that of "
        f"**{base_label}**, in percentage points (paper §5, Tables 7–8). Groups are matched by model, domain, "
        f"intervention and timestep: {len(comp.deltas)} matched, {len(comp.unmatched)} unmatched. "
        f"Mean change over matched groups: {fmt.signed(overall, 2)} pp.",
        *notes,
    ]
    tables: list[Table] = []
    figs: list[Figure] = []
    for domain in comp.domains():
        by_model = wait_by_model(comp, domain)
        by_iv = wait_by_intervention(comp, domain)
        tables.append(pivot_table(by_model, f"Change in majority robustness (pp), averaged across interventions — {domain}",
                                  "t", _signed2, "Paper Table 7: rows are timesteps, columns models."))  # fmt: skip
        tables.append(pivot_table(by_iv, f"Change in majority robustness (pp), averaged across models — {domain}",
                                  "t", _signed2, "Paper Table 8: rows are timesteps, columns interventions.",
                                  header=lambda iv: f"{iv} ({category_of(iv)})"))  # fmt: skip
        if figures:
            figs.append(wait_figure(by_iv, domain))
    tables.append(Table(
        "Every matched group", ["Model", "Domain", "Intervention", "t", "Chains (base/wait)", "Base", "Wait", "Δ pp"],
        [[d.model, d.domain, d.intervention, fmt.timestep(d.target_t), f"{d.base_chains}/{d.wait_chains}",
          fmt.num(d.base), fmt.num(d.wait), _signed2(d.delta_pp)] for d in comp.deltas],
        "llllrrrr", collapsed=True,
    ))  # fmt: skip
    if comp.unmatched:
        tables.append(unmatched_table(comp.unmatched))
    return Section('Ablation: appending "Wait" after the intervention', "\n\n".join(lines), tuple(figs), tuple(tables))


def unmatched_table(unmatched: Sequence[Unmatched]) -> Table:
    """Groups that could not be compared, with where they were found and why."""
    return Table(
        "Unmatched groups", ["Run", "Model", "Domain", "Intervention", "t", "Reason"],
        [[u.run, u.model, u.domain, u.intervention, fmt.timestep(u.target_t), u.reason] for u in unmatched],
        caption="Groups present in only one run (or without a majority value) are left out of every average.",
    )  # fmt: skip


# ------------------------------------------------------------------------------------------ model swap


@dataclass(frozen=True)
class SwapCell:
    """Majority robustness of chains written by ``original`` and continued by ``swapped``."""

    original: str
    swapped: str
    domain: str
    intervention: str
    majority: float
    n_chains: int
    run: str


@dataclass(frozen=True)
class SwapResult:
    target_t: float
    cells: tuple[SwapCell, ...]
    duplicates: tuple[SwapCell, ...]  # the same group found again in a later run (left out)

    def domains(self) -> list[str]:
        return sorted({c.domain for c in self.cells})


def swap_cells(runs: Sequence[tuple[str, Iterable[Mapping[str, Any]]]], target_t: float = 0.3) -> SwapResult:
    """The (original, swapped, domain, intervention) groups at ``target_t`` of every run, in run order.

    A group found in more than one run (e.g. a model continuing its own chains in two swap runs) is taken
    from the first run that has it; later ones are returned as ``duplicates``.
    """
    t = _t(target_t)
    cells: dict[tuple, SwapCell] = {}
    duplicates = []
    for run, rows in runs:
        for key, row in _index_rows(rows, run).items():
            model, domain, intervention, row_t = key
            if row_t != t:
                continue
            original, swapped = split_label(model)
            cell = SwapCell(original, swapped, domain, intervention, _majority(row), int(row.get("n_chains") or 0), run)
            ckey = (original, swapped, domain, intervention)
            if ckey in cells:
                duplicates.append(cell)
            else:
                cells[ckey] = cell
    ordered = sorted(cells.values(), key=lambda c: (c.domain, c.original, c.swapped, c.intervention))
    return SwapResult(t, tuple(ordered), tuple(duplicates))


def swap_matrix(result: SwapResult, domain: str) -> Pivot:
    """Table 9: majority robustness (%) per (original, swapped), averaged across interventions."""
    cells = [c for c in result.cells if c.domain == domain]
    models = sorted({c.original for c in cells} | {c.swapped for c in cells})
    # Square, same order on both axes: pairs that were not run show as NaN.
    order = lambda present: models
    return mean_pivot(cells, lambda c: c.original, lambda c: c.swapped, lambda c: 100.0 * c.majority,
                      index_order=order, column_order=order)  # fmt: skip


def swap_section(result: SwapResult, run_labels: Sequence[str], notes: Sequence[str] = (), figures: bool = True) -> Section:
    """The report section of the model-swap ablation (Table 9 per domain, the groups behind it)."""
    lines = [
        f"Chains (original trace + intervention) written by the row model, continued by the column model, at "
        f"t = {fmt.timestep(result.target_t)} (paper §5, Table 9). Each cell is the majority robustness (%) "
        "averaged across interventions; the diagonal is a model continuing its own chains. Runs: "
        + ", ".join(f"`{r}`" for r in run_labels) + ".",
        *notes,
    ]
    if result.duplicates:
        lines.append(f"{len(result.duplicates)} group(s) appeared in more than one run; the first run's value is used.")
    tables: list[Table] = []
    figs: list[Figure] = []
    for domain in result.domains():
        matrix = swap_matrix(result, domain)
        caption = "Rows: original model; columns: swapped (continuing) model. Interventions averaged per cell: " + \
            ", ".join(f"{o}→{s}: {n}" for o, line in zip(matrix.index, matrix.counts)
                      for s, n in zip(matrix.columns, line) if n)  # fmt: skip
        tables.append(pivot_table(matrix, f"Majority robustness after swapping models (%) — {domain}",
                                  "Original \\ Swapped", lambda v: fmt.num(v, 1), caption))  # fmt: skip
        if figures:
            figs.append(swap_figure(matrix, domain, result.target_t))
    tables.append(Table(
        "Groups behind the matrix", ["Original", "Swapped", "Domain", "Intervention", "Chains", "Majority", "Run"],
        [[c.original, c.swapped, c.domain, c.intervention, str(c.n_chains), fmt.num(c.majority), c.run]
         for c in result.cells],
        "llllrrl", collapsed=True,
    ))  # fmt: skip
    return Section("Ablation: continuing another model's chains (model swap)", "\n\n".join(lines), tuple(figs), tuple(tables))


# --------------------------------------------------------------------------- consecutive interventions


@dataclass(frozen=True)
class RepeatCell:
    """Chains of one model and intervention at one t under k consecutive interventions."""

    model: str
    domain: str
    intervention: str
    k: int
    n_chains: int
    n_samples: int
    correct: int
    majority_robust: int
    run: str

    @property
    def accuracy(self) -> float:
        """Correct continuations / graded continuations (NaN when none were graded)."""
        return self.correct / self.n_samples if self.n_samples else math.nan

    @property
    def majority(self) -> float:
        return self.majority_robust / self.n_chains if self.n_chains else math.nan


@dataclass(frozen=True)
class RepeatsResult:
    target_t: float
    cells: tuple[RepeatCell, ...]
    duplicates: tuple[RepeatCell, ...]

    def domains(self) -> list[str]:
        return sorted({c.domain for c in self.cells})


def repeat_cells(runs: Sequence[tuple[int, str, Iterable[ChainOutcome]]], target_t: float = 0.3) -> RepeatsResult:
    """Pool the chain outcomes at ``target_t`` of each (k, run) per (model, domain, intervention).

    A (model, domain, intervention, k) found in more than one run is taken from the first; later ones are
    returned as ``duplicates``.
    """
    t = _t(target_t)
    cells: dict[tuple, RepeatCell] = {}
    duplicates = []
    for k, run, outcomes in runs:
        sums: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
        for o in outcomes:
            if _t(o.target_t) != t:
                continue
            s = sums[(o.model, o.domain, o.intervention)]
            s[0] += 1
            s[1] += o.n
            s[2] += o.k
            s[3] += int(o.levels.majority)
        for (model, domain, intervention), (chains, n, correct, maj) in sorted(sums.items()):
            cell = RepeatCell(model, domain, intervention, int(k), chains, n, correct, maj, run)
            key = (model, domain, intervention, int(k))
            if key in cells:
                duplicates.append(cell)
            else:
                cells[key] = cell
    ordered = sorted(cells.values(), key=lambda c: (c.domain, c.model, c.intervention, c.k))
    return RepeatsResult(t, tuple(ordered), tuple(duplicates))


def repeats_pivot(result: RepeatsResult, domain: str, value: Callable[[RepeatCell], float]) -> Pivot:
    """Table 10 layout: one row per model (``model / intervention`` when several interventions), one
    column per k; ``value`` picks the number (e.g. accuracy in %)."""
    cells = [c for c in result.cells if c.domain == domain]
    several = len({c.intervention for c in cells}) > 1
    label = (lambda c: f"{c.model} / {c.intervention}") if several else (lambda c: c.model)
    return mean_pivot(cells, label, lambda c: c.k, value)


def repeats_section(result: RepeatsResult, run_labels: Sequence[str], notes: Sequence[str] = (), figures: bool = True) -> Section:
    """The report section of the consecutive-interventions ablation (Table 10 per domain)."""
    ivs = sorted({c.intervention for c in result.cells})
    lines = [
        f"Accuracy (% of graded continuations that are correct) after k consecutive interventions "
        f"({', '.join(ivs) or 'none'}) at t = {fmt.timestep(result.target_t)}, one run per k (paper App. A.2, "
        "Table 10). Runs: " + ", ".join(f"`{r}`" for r in run_labels) + ".",
        *notes,
    ]
    if result.duplicates:
        lines.append(f"{len(result.duplicates)} group(s) appeared in more than one run with the same k; the first is used.")
    tables: list[Table] = []
    figs: list[Figure] = []
    for domain in result.domains():
        acc = repeats_pivot(result, domain, lambda c: 100.0 * c.accuracy)
        maj = repeats_pivot(result, domain, lambda c: 100.0 * c.majority)
        one = lambda v: fmt.num(v, 1)
        tables.append(pivot_table(acc, f"Accuracy (%) under k consecutive interventions — {domain}", "Model", one,
                                  "Paper Table 10: columns are the number of interventions k.", header=lambda k: f"k={k}"))  # fmt: skip
        tables.append(pivot_table(maj, f"Majority robustness (%) under k consecutive interventions — {domain}", "Model",
                                  one, header=lambda k: f"k={k}"))  # fmt: skip
        if figures:
            figs.append(repeats_figure(acc, domain))
    tables.append(Table(
        "Counts behind the tables", ["Model", "Domain", "Intervention", "k", "Chains", "Continuations", "Correct", "Run"],
        [[c.model, c.domain, c.intervention, str(c.k), str(c.n_chains), str(c.n_samples), str(c.correct), c.run]
         for c in result.cells],
        "llllrrrl", collapsed=True,
    ))  # fmt: skip
    return Section("Ablation: consecutive interventions", "\n\n".join(lines), tuple(figs), tuple(tables))


# --------------------------------------------------------------------------------------------- figures


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in text)


def wait_figure(by_iv: Pivot, domain: str) -> Figure:
    """pp change vs timestep, one line per intervention coloured by category, with a zero line."""
    from recovery.report.figures import _style, category_color, new_figure, to_png

    with _style():
        fig = new_figure(figsize=(5.2, 3.0), layout="constrained")
        ax = fig.subplots()
        ts = list(by_iv.index)
        markers = "osD^vP*X"
        for j, iv in enumerate(by_iv.columns):
            ax.plot(ts, [line[j] for line in by_iv.cells], marker=markers[j % len(markers)], markersize=3,
                    linewidth=1.3, color=category_color(category_of(iv)), label=iv)  # fmt: skip
        ax.axhline(0.0, color="#444444", linewidth=0.8)
        ax.set_xticks(ts, [fmt.timestep(t) for t in ts])
        ax.set_xlabel("timestep t")
        ax.set_ylabel("Δ majority robustness (pp)")
        ax.grid(True, color="#e6e6e6", linewidth=0.6)
        fig.legend(loc="outside lower center", ncols=3, frameon=False, fontsize=7)
        fig.suptitle(f'Appending "Wait": change per intervention — {domain}', fontsize=9)
        png = to_png(fig)
    return Figure(f"ablation_wait_{_slug(domain)}", png,
                  "Change in majority robustness from appending \"Wait\", averaged across models (Table 8).")  # fmt: skip


def swap_figure(matrix: Pivot, domain: str, target_t: float) -> Figure:
    """Heat map of the swap matrix with the values written in the cells."""
    from recovery.report.figures import _style, new_figure, to_png

    with _style():
        n_rows, n_cols = len(matrix.index), len(matrix.columns)
        fig = new_figure(figsize=(1.2 * n_cols + 2.2, 0.6 * n_rows + 1.4), layout="constrained")
        ax = fig.subplots()
        image = ax.imshow([list(line) for line in matrix.cells], cmap="viridis", vmin=0.0, vmax=100.0, aspect="auto")
        for i, line in enumerate(matrix.cells):
            for j, v in enumerate(line):
                if not math.isnan(v):
                    ax.text(j, i, f"{v:.1f}", ha="center", va="center", color="white" if v < 60 else "black", fontsize=8)
        ax.set_xticks(range(n_cols), list(matrix.columns), rotation=30, ha="right")
        ax.set_yticks(range(n_rows), list(matrix.index))
        ax.set_xlabel("swapped (continuing) model")
        ax.set_ylabel("original model")
        fig.colorbar(image, ax=ax, label="majority robustness (%)")
        fig.suptitle(f"Model swap at t = {fmt.timestep(target_t)} — {domain}", fontsize=9)
        png = to_png(fig)
    return Figure(f"ablation_swap_{_slug(domain)}", png, "Majority robustness (%) after swapping models (Table 9).")


def repeats_figure(acc: Pivot, domain: str) -> Figure:
    """Accuracy vs number of consecutive interventions, one line per model."""
    from recovery.report.figures import _style, model_colors, new_figure, to_png

    with _style():
        fig = new_figure(figsize=(5.2, 3.0), layout="constrained")
        ax = fig.subplots()
        colors = model_colors(list(acc.index))
        ks = list(acc.columns)
        for label, line in zip(acc.index, acc.cells):
            ax.plot(ks, list(line), marker="o", markersize=3, linewidth=1.3, color=colors[label], label=label)
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_xlabel("consecutive interventions k")
        ax.set_ylabel("accuracy (%)")
        ax.grid(True, color="#e6e6e6", linewidth=0.6)
        fig.legend(loc="outside lower center", ncols=3, frameon=False, fontsize=7)
        fig.suptitle(f"Accuracy under consecutive interventions — {domain}", fontsize=9)
        png = to_png(fig)
    return Figure(f"ablation_repeats_{_slug(domain)}", png, "Accuracy (%) per model vs k (Table 10).")
