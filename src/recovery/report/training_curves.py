"""The curves people watch during GRPO, drawn from a trainer's ``log_history`` (``trainer.state.log_history``,
or the ``log_history`` of a saved ``trainer_state.json``).

Two figures and one table:

* `grpo_figure`: each reward function's mean per logged step (TRL's ``rewards/<name>/mean``), the share of
  groups whose rewards all agree (``frac_reward_zero_std``: those teach nothing, their advantage is zero), the KL
  to the reference model (``kl``) and the mean completion length (``completions/mean_length``);
* `robustness_figure` / `robustness_table`: majority robustness per intervention at each evaluation of the
  `recovery.training.RobustnessCallback` (``robustness/<intervention>/majority``, step 0 included when it
  measured the start), with clean accuracy beside it.

Only what the trainer logged is drawn: a figure whose keys are absent is None, never an empty frame.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.ticker import MaxNLocator

import recovery.report.figures as figures
from recovery.report.data import Figure, Table, category_of

#: (log key, panel title) of the training panels of `grpo_figure`, after the rewards' panel.
TRAINING_PANELS: tuple[tuple[str, str], ...] = (
    ("frac_reward_zero_std", "share of groups with zero reward variance"),
    ("kl", "KL to the reference model"),
    ("completions/mean_length", "mean completion length (tokens)"),
)
ROBUSTNESS_PREFIX = "robustness/"
CLEAN_KEY = "robustness/clean_accuracy"
POOLED = "mean"  # the callback's name for every intervention pooled


def series(log_history: Sequence[Mapping[str, Any]], key: str) -> list[tuple[int, float]]:
    """``(step, value)`` of every log entry holding ``key``, in logging order."""
    return [(int(entry.get("step", i)), float(entry[key])) for i, entry in enumerate(log_history) if key in entry]


def reward_names(log_history: Sequence[Mapping[str, Any]]) -> list[str]:
    """The reward functions TRL logged a per-step mean for (``rewards/<name>/mean``), in first-seen order."""
    names: dict[str, None] = {}
    for entry in log_history:
        for key in entry:
            if key.startswith("rewards/") and key.endswith("/mean"):
                names[key[len("rewards/") : -len("/mean")]] = None
    return list(names)


def robustness_names(log_history: Sequence[Mapping[str, Any]]) -> list[str]:
    """The interventions the robustness callback logged a majority robustness for, the pooled ``mean`` last."""
    names: dict[str, None] = {}
    for entry in log_history:
        for key in entry:
            if key.startswith(ROBUSTNESS_PREFIX) and key.endswith("/majority"):
                names[key[len(ROBUSTNESS_PREFIX) : -len("/majority")]] = None
    return sorted(names, key=lambda name: (name == POOLED, name))


def _category(metric: str) -> str:
    """The category of the intervention behind a metric name (the callback writes ``toy/x`` as ``toy_x``)."""
    for candidate in (metric, metric.replace("_", "/", 1)):
        category = category_of(candidate)
        if category != "other":
            return category
    return "other"


def _step_axis(ax: Any) -> None:
    """Make ``ax``'s x axis the training step, as every training curve shows it: whole-number ticks, the
    label ``step`` and the report's light grid."""
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("step")
    ax.grid(True, color="#e6e6e6", linewidth=0.6)


def _titled_figure(fig: Any, title: str, name: str, caption: str) -> Figure:
    """The training-curve figure ``fig`` under its ``title``, rendered to PNG as the report's `Figure`."""
    fig.suptitle(title, fontsize=10)
    return Figure(name=name, png_bytes=figures.to_png(fig), caption=caption)


def grpo_figure(log_history: Sequence[Mapping[str, Any]], title: str = "GRPO training") -> Figure | None:
    """Reward means, zero-variance share, KL and completion length per logged step; None when nothing of it was
    logged."""
    rewards = reward_names(log_history)
    panels = [(key, label) for key, label in TRAINING_PANELS if series(log_history, key)]
    if not rewards and not panels:
        return None
    with figures.figure_style():
        fig = figures.new_figure(figsize=(3.0 * (len(panels) + bool(rewards)), 2.8), layout="constrained")
        axes = fig.subplots(1, len(panels) + bool(rewards), squeeze=False)[0]
        index = 0
        if rewards:
            ax = axes[0]
            for name in rewards:
                steps, values = zip(*series(log_history, f"rewards/{name}/mean"))
                ax.plot(steps, values, marker="o", markersize=2, linewidth=1.2, label=name)
            ax.set_title("reward mean per step")
            ax.legend(loc="best")
            index = 1
        for ax, (key, label) in zip(axes[index:], panels):
            steps, values = zip(*series(log_history, key))
            ax.plot(steps, values, color="#222222", marker="o", markersize=2, linewidth=1.2)
            ax.set_title(label)
        for ax in axes:
            _step_axis(ax)
        return _titled_figure(
            fig,
            title,
            "grpo_training",
            "Per logged GRPO step: each reward function's mean over the step's completions, the share of "
            "prompt groups whose completions all scored the same (no advantage, nothing learnt), the KL to the "
            "starting model and the mean completion length, as the trainer logged them.",
        )


def robustness_figure(log_history: Sequence[Mapping[str, Any]], title: str = "Robustness during GRPO") -> Figure | None:
    """Majority robustness per intervention (and clean accuracy) at each evaluation of the robustness callback;
    None when the callback did not run."""
    names = robustness_names(log_history)
    if not names:
        return None
    styles = figures.intervention_styles([n for n in names if n != POOLED], _category)
    with figures.figure_style():
        fig = figures.new_figure(figsize=(6.4, 3.4), layout="constrained")
        ax = fig.subplots()
        for name in names:
            steps, values = zip(*series(log_history, f"{ROBUSTNESS_PREFIX}{name}/majority"))
            style = {"color": "#111111", "linewidth": 2.2} if name == POOLED else {**styles[name], "linewidth": 1.1}
            ax.plot(steps, values, markersize=3, label="pooled" if name == POOLED else name, **style)
        clean = series(log_history, CLEAN_KEY)
        if clean:
            steps, values = zip(*clean)
            ax.plot(steps, values, color="#888888", linestyle="--", marker="x", markersize=3, label="clean accuracy")
        ax.set_ylim(*figures.padded_ylim(0.0, 1.0))
        _step_axis(ax)
        ax.set_ylabel("majority robustness")
        handles, labels = ax.get_legend_handles_labels()
        figures.fit_legend(fig, handles, labels, max_cols=3)
        return _titled_figure(
            fig,
            title,
            "grpo_robustness",
            "Majority robustness per intervention on the robustness callback's mini-benchmark at each of its "
            "evaluations during training (step 0: the starting model), pooled in black; clean accuracy dashed.",
        )


def robustness_table(log_history: Sequence[Mapping[str, Any]]) -> Table | None:
    """The values `robustness_figure` draws, one row per intervention and one column per evaluated step."""
    names = robustness_names(log_history)
    if not names:
        return None
    keys = [f"{ROBUSTNESS_PREFIX}{name}/majority" for name in names] + [CLEAN_KEY]
    steps = sorted({step for key in keys for step, _ in series(log_history, key)})
    rows = []
    for name, key in zip([*names, "clean accuracy"], keys):
        at = dict(series(log_history, key))
        if not at:
            continue
        label = "pooled" if name == POOLED else name
        rows.append([label, *(f"{at[s]:.3f}" if s in at else "" for s in steps)])
    return Table(
        "Robustness callback during training",
        ["intervention", *(f"step {s}" for s in steps)],
        rows,
        align=["l", *("r" for _ in steps)],
        caption="Majority robustness on the callback's mini-benchmark (its own problems, fewer samples than the "
        "benchmark runs), at each evaluation.",
    )
