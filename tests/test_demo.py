"""`recovery demo` end to end at miniature size: measure → own + teacher data → SFT → GRPO → measure → compare."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

import recovery.report.fmt as fmt
from recovery.demo import EVAL_SEED, TEACHER_SEED, TRAIN_SEED, DemoSize, GRPOSize, run_demo
from recovery.store import Table

pytestmark = pytest.mark.slow

TINY = DemoSize(
    eval_problems=6,
    own_problems=3,
    teacher_problems=12,
    timesteps=(0.5,),
    samples=2,
    own_samples=1,
    sft_steps=4,
    # Every chain of the choice run becomes a prompt (a miniature may have none that disagree); the robustness
    # callback measures at steps 0, 1 and 2 (step 0, every step, the end).
    grpo=GRPOSize(
        steps=2,
        prompts_per_step=2,
        generations=2,
        success_between=(0.0, 1.0),
        choice_problems=3,
        choice_samples=2,
        robustness_every=1,
        robustness_problems=2,
        robustness_samples=1,
    ),
    clean_problems=6,
    # Four steps at the full demo's peak rate (no schedule to speak of) leave a model that answers nothing,
    # and a miniature must still have chains to compare.
    sft_learning_rate=3.0e-4,
    # One generation process per measurement: replicas start a process each per measurement (most of this
    # miniature's time) and give the samples one process gives (tests/backends/test_backends_replicas.py).
    replicas=1,
)


def _files(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*.parquet"))}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """A plain demo, then ``--grpo`` in the same directory, as a user adds GRPO to a demo they ran: the
    second finds the first's runs and measures only the GRPO model."""
    out = tmp_path_factory.mktemp("demo")
    plain = run_demo(out, size=TINY, progress=False)
    first = {run: _files(out / run) for run in ("before", "after")}
    first_model = (out / "model-sft" / "model.safetensors").read_bytes()
    log = io.StringIO()
    with contextlib.redirect_stderr(log):  # progress bars and phase headers, as a user sees them
        result = run_demo(out, size=TINY, grpo=True, progress=True)
    return out, result, log.getvalue(), (plain, first, first_model)


def test_each_phase_has_a_header_in_order(demo):
    log = demo[2]
    headers = [
        "[1/8] measure the tiny reasoner",
        "[2/8] build recovery traces",
        "[3/8] train (SFT)",
        "[4/8] measure after SFT",
        "[5/8] choose GRPO prompts",
        "[6/8] train (GRPO)",
        "[7/8] measure again",
        "[8/8] compare",
    ]
    positions = [log.find(h) for h in headers]
    assert all(p >= 0 for p in positions) and positions == sorted(positions), log[-2000:]


def test_every_step_leaves_its_run_model_and_report(demo):
    out, result, *_ = demo
    runs = (
        "before",
        "before-clean",
        "train-own",
        "train-teacher",
        "after",
        "after-clean",
        "after-grpo",
        "after-grpo-clean",
        "train-sft",
    )
    for run in runs:
        assert (out / run / "config.json").is_file(), run
    assert Table(out / "train-own" / "continuations").count() > 0  # the model's own continuations
    assert not Table(out / "train-teacher" / "continuations").exists()  # teacher run: chains only
    assert Table(out / "train-teacher" / "chains").count() > 0
    assert (out / "model-sft" / "model.safetensors").is_file() and (out / "model-grpo" / "model.safetensors").is_file()
    assert set(result.training) == {"sft_steps", "grpo", "grpo_rewards", "grpo_steps"}
    assert (result.training["sft_steps"], result.training["grpo"], result.training["grpo_steps"]) == (4, True, 2)
    # The registry's combined reward, its mean over the GRPO steps as TRL logged it.
    rewards = result.training["grpo_rewards"]
    assert list(rewards) == ["recovery_reward"]
    assert all(-0.3 <= v <= 1.2 for v in rewards.values())
    assert result.report and result.report.endswith("compare/report.html")
    assert (out / "compare" / "report.md").read_text().strip()


def test_the_demo_records_its_timings(demo):
    """Each phase's wall seconds, in order, and each training's ``train_runtime``, in ``timings.json`` (what
    `bench/demo_time.py` reads) and on the result."""
    out, result, *_ = demo
    timings = json.loads((out / "timings.json").read_text())
    assert list(timings["phases"]) == [
        "measure the tiny reasoner",
        "build recovery traces",
        "train (SFT)",
        "measure after SFT",
        "choose GRPO prompts",
        "train (GRPO)",
        "measure again",
        "compare",
    ]
    assert timings["phases"] == result.seconds and all(s > 0 for s in result.seconds.values())
    assert set(timings["train_runtime"]) == {"sft", "grpo"} == set(result.train_runtime)
    assert 0 < timings["train_runtime"]["sft"] < timings["phases"]["train (SFT)"]
    assert 0 < timings["train_runtime"]["grpo"] < timings["phases"]["train (GRPO)"]


def test_measured_problem_sets_are_disjoint(demo):
    out, *_ = demo
    seeds = {
        run: json.loads((out / run / "config.json").read_text())["dataset"]["options"]["seed"]
        for run in ("before", "train-own", "train-teacher")
    }
    assert seeds == {"before": EVAL_SEED, "train-own": TRAIN_SEED, "train-teacher": TEACHER_SEED}
    problems = {run: {r["id"] for r in Table(out / run / "problems").iter_rows(["id"])} for run in seeds}
    assert not problems["before"] & (problems["train-own"] | problems["train-teacher"])
    assert not problems["train-own"] & problems["train-teacher"]


def test_summary_reports_before_and_after_per_intervention(demo):
    _, result, *_ = demo
    table = result.summary_table()
    assert [c.header for c in table.columns][:5] == ["intervention", "before", "SFT", "after", "change"]
    assert table.row_count == len(result.before.by_intervention()) > 0
    assert 0.0 <= result.before.clean_accuracy <= 1.0 and 0.0 <= result.after.clean_accuracy <= 1.0
    # Clean accuracy is also measured on more problems (original traces only, no interventions).
    assert Table(demo[0] / "before-clean" / "problems").count() == 6
    assert not Table(demo[0] / "before-clean" / "chains").exists()
    assert 0.0 <= result.clean_before <= 1.0 and 0.0 <= result.clean_after <= 1.0
    assert "on more problems" in table.caption


def test_base_sft_and_grpo_are_measured_apart_with_doubt_and_intervals(demo):
    """The three stages on the same problems (each from its own model's traces, paired where they meet),
    the report holds the SFT → SFT+GRPO comparison with its reward means, the doubt section per stage, and
    paired intervals on every change."""
    out, result, *_ = demo

    def problems(run: str) -> set:
        return {r["id"] for r in Table(out / run / "problems").iter_rows(["id"])}

    assert problems("before") == problems("after") == problems("after-grpo")
    assert result.sft is not None and result.sft.run_dir == out / "after"
    assert result.after.run_dir == out / "after-grpo"
    assert result.grpo_comparison is not None and result.grpo_comparison.labels == ("SFT", "SFT+GRPO")
    md = (out / "compare" / "report.md").read_text()
    assert "What GRPO adds beyond SFT" in md and "Reward means over GRPO training" in md
    assert "| recovery_reward |" in md
    # The section's per-intervention row is the GRPO comparison's own figure (the number the spread reads).
    section = md.split("## What GRPO adds beyond SFT")[1].split("\n## ")[0]
    assert "**Majority robustness by intervention**" in section and "**Majority robustness by timestep**" in section
    (wrong,) = [r for r in result.grpo_comparison.by_intervention if r["intervention"] == "toy/wrong_continuation"]
    (row,) = [line for line in section.splitlines() if line.startswith("| toy | toy/wrong_continuation |")]
    assert row.split("|")[6].strip() == fmt.signed(wrong["delta"])
    assert "Doubt after the intervention, by training stage" in md
    assert [line.split(":")[0] for line in result.doubt_lines] == ["base", "SFT", "SFT+GRPO"]
    assert "Changes from **before** to **after**" in md and "paired chains" in md
    for comp in (result.comparison, result.grpo_comparison):
        assert comp.by_category and all("ci_low" in row and "ci_high" in row for row in comp.by_category)


def test_sft_rows_are_in_the_models_own_self_checking_style(demo):
    """The tiny reasoner checks its own steps, so the SFT rows are in that style: the clean examples and the
    recoveries carry a check after their operation steps."""
    out, *_ = demo
    from datasets import load_from_disk

    rows = list(load_from_disk(str(out / "sft-data")))
    assert {"teacher", "clean"} <= {r["origin"] for r in rows} <= {"own", "teacher", "clean"}
    recoveries = [r for r in rows if r["kind"] == "recovery"]
    assert recoveries and any("\n\nCheck: " in r["completion"] for r in recoveries)
    from_start = [r for r in rows if r["kind"] == "clean" and r["timestep"] == 0.0]
    assert from_start and all("\n\nCheck: " in r["completion"] for r in from_start)


def test_grpo_after_a_plain_demo_reuses_its_runs(demo):
    """``recovery demo`` then ``recovery demo --grpo`` in the same directory: the second run neither
    refuses the first's runs (one run directory per model) nor regenerates them; the SFT model it retrains
    is the same bytes, so the SFT run it resumes measured this model."""
    out, result, _, (plain, first, first_model) = demo
    assert plain.after.run_dir == out / "after" and plain.sft is None
    assert {run: _files(out / run) for run in first} == first
    assert (out / "model-sft" / "model.safetensors").read_bytes() == first_model
    assert result.comparison.labels == ("before", "after")


def test_a_moved_demo_directory_fails_before_any_work(demo, tmp_path):
    """A demo directory moved elsewhere holds runs whose models' paths name the old place: resuming it
    fails on them at once, before the measuring and the SFT training that come first."""
    import shutil

    from recovery.configs import ConfigError

    out = demo[0]
    moved = tmp_path / "moved"
    shutil.copytree(out, moved)
    model = moved / "model-sft" / "model.safetensors"
    stamp = model.stat().st_mtime_ns
    with pytest.raises(ConfigError, match=r"moved/after was created with a different config \(changed: models\)"):
        run_demo(moved, size=TINY, progress=False)
    assert model.stat().st_mtime_ns == stamp  # SFT did not train again


@pytest.fixture(scope="module")
def grpo_only(demo, tmp_path_factory):
    """``recovery demo --grpo-only --wandb`` in the same directory: the base model's runs are shared, GRPO trains
    the base model alone and reports to W&B (offline, under its own directory)."""
    wandb = pytest.importorskip("wandb")
    out = demo[0]
    wandb_dir = tmp_path_factory.mktemp("wandb")
    log = io.StringIO()
    with pytest.MonkeyPatch.context() as env, contextlib.redirect_stderr(log):
        env.setenv("WANDB_MODE", "offline")
        env.setenv("WANDB_DIR", str(wandb_dir))
        env.setenv("WANDB_SILENT", "true")
        env.setenv("WANDB_PROJECT", "recovery-tests")
        wandb.teardown()
        result = run_demo(out, size=TINY, grpo_only=True, wandb=True, progress=True)
        if wandb.run is not None:
            wandb.finish()
        wandb.teardown()
    return out, result, log.getvalue(), wandb_dir


def _offline_run(wandb_dir: Path):
    """The one offline W&B run under ``wandb_dir``, read by tests/training/wandb_offline.py."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(
        "wandb_offline", Path(__file__).parent / "training" / "wandb_offline.py"
    )
    module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))
    spec.loader.exec_module(module)
    (run_dir,) = module.offline_runs(wandb_dir)
    return module.read_offline_run(run_dir)


def test_grpo_only_trains_the_base_model_without_sft(grpo_only):
    out, result, log, _ = grpo_only
    headers = [
        "[1/5] measure the tiny reasoner",
        "[2/5] choose GRPO prompts",
        "[3/5] train (GRPO)",
        "[4/5] measure again",
        "[5/5] compare",
    ]
    positions = [log.find(h) for h in headers]
    assert all(p >= 0 for p in positions) and positions == sorted(positions), log[-2000:]
    # The prompts were chosen on the base model's own continuations on training problems.
    choice = json.loads((out / "train-base" / "config.json").read_text())
    assert choice["models"][0]["name"] == "tiny-reasoner"
    assert choice["dataset"]["options"]["seed"] == TRAIN_SEED
    assert (out / "model-grpo-only" / "model.safetensors").is_file()
    assert result.after.run_dir == out / "after-grpo-only" and result.sft is None
    assert result.training["grpo_only"] is True and list(result.training["grpo_rewards"]) == ["recovery_reward"]
    assert [line.split(":")[0] for line in result.doubt_lines] == ["base", "GRPO"]
    assert result.grpo_comparison is None and result.comparison.labels == ("before", "after")
    config = json.loads((out / "after-grpo-only" / "config.json").read_text())
    assert config["models"][0]["path"] == str(out / "model-grpo-only")


def test_grpo_curves_are_the_trainers_own_log(grpo_only):
    """The report's curves are drawn from the log history kept beside the GRPO model: the robustness table shows
    the callback's majority robustness at steps 0, 1 and 2 exactly as the trainer logged it, and the figures
    are in the report."""
    out, result, *_ = grpo_only
    history = json.loads((out / "model-grpo-only" / "log_history.json").read_text())
    steps = [e["step"] for e in history if "robustness/mean/majority" in e]
    assert steps == [0, 1, 2]
    assert [e["step"] for e in history if "frac_reward_zero_std" in e] == [1, 2]
    assert all("kl" in e and "completions/mean_length" in e for e in history if "frac_reward_zero_std" in e)
    md = (out / "compare" / "report.md").read_text()
    assert "GRPO training curves" in md
    assert (out / "compare" / "figures" / "grpo_training.png").is_file()
    assert (out / "compare" / "figures" / "grpo_robustness.png").is_file()
    pooled = next(line for line in md.splitlines() if line.startswith("| pooled |"))
    logged = [e["robustness/mean/majority"] for e in history if "robustness/mean/majority" in e]
    assert pooled.split("|")[2:5] == [f" {v:.3f} " for v in logged]


def test_grpo_curves_reach_wandb_with_the_logged_values(grpo_only):
    """With --wandb the same curves go to W&B: each reward's mean, the zero-variance share, KL and completion length
    per step, and the callback's robustness per intervention at steps 0, 1 and 2, with the values of the log
    history the report draws."""
    out, *_, wandb_dir = grpo_only
    run = _offline_run(wandb_dir)
    assert run.complete
    history = json.loads((out / "model-grpo-only" / "log_history.json").read_text())
    logged = {}
    for row in run.history:
        for key, value in row.items():
            logged.setdefault(key, []).append(value)
    for key in ("rewards/recovery_reward/mean", "frac_reward_zero_std", "kl", "completions/mean_length"):
        assert logged[f"train/{key}"] == [e[key] for e in history if key in e and "train_runtime" not in e], key
    pooled = [e["robustness/mean/majority"] for e in history if "robustness/mean/majority" in e]
    assert logged["train/robustness/mean/majority"] == pooled
    assert "train/robustness/toy_wrong_continuation/majority" in logged
