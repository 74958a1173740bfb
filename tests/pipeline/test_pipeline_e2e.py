"""End to end on CPU: real HF generation with the tiny reasoner, real data, real files, a real report."""

from __future__ import annotations

import json

import pytest

from recovery.pipeline import (
    DatasetConfig,
    FilterConfig,
    InterventionsConfig,
    ModelConfig,
    RunConfig,
    SamplingConfig,
    TracesConfig,
    run_pipeline,
)
from recovery.pipeline.chain_workers import cpu_workers
from recovery.store import Table

FIGURE_PREFIXES = ("majority", "levels", "length")


def assert_full_report(run_dir):
    report = run_dir / "report"
    md = (report / "report.md").read_text()
    html = (report / "report.html").read_text()
    for heading in ("Majority robustness", "Length", "Skip"):
        assert heading.lower() in md.lower(), heading
    figures = sorted(p.name for p in (report / "figures").glob("*.png"))
    assert figures, "no figures written"
    assert "data:image/png;base64," in html and 'src="http' not in html
    return md, figures


def no_filters() -> FilterConfig:
    # A toy-world model neither solves nor finishes BBH traces: keep every trace so later stages have work.
    return FilterConfig(require_correct=False, require_closed=False, drop_longest_fraction=0.0, intersect_models=False)


def test_bbh_subset_end_to_end(tmp_path, shared_data, hf_factory, capsys):
    config = RunConfig(
        run_dir=str(tmp_path / "bbh"),
        # Dyck questions are short enough for the tiny reasoner's 1k-token context.
        dataset=DatasetConfig(name="bbh/dyck_languages", path=str(shared_data / "bbh"), limit=3),
        models=[ModelConfig(name="tiny-reasoner")],
        traces=TracesConfig(
            sampling=SamplingConfig(n=1, temperature=0.0, top_p=1.0, max_new_tokens=200), filters=no_filters()
        ),
        interventions=InterventionsConfig(
            # min_steps=1: a toy-world model writes BBH traces of one or two steps.
            names=["random_characters", "wikipedia_text"],
            timesteps=[0.3, 0.7],
            min_steps=1,
            wikipedia_pool=str(shared_data / "wikipedia_paragraphs" / "wikitext2_test_paragraphs.jsonl"),
        ),
        continuation=SamplingConfig(n=2, max_new_tokens=48),
    )
    summary = run_pipeline(config, make_generator=hf_factory, progress=True, n_boot=200)
    bars = capsys.readouterr().err  # every long stage shows a progress bar, as users run it
    # With two or more CPU workers, grading runs alongside generation and shows on the continuations bar.
    grading_bar = "graded alongside" if cpu_workers(config) >= 2 else "grading"
    for desc in ("traces [tiny-reasoner]", "interventions", "continuations [tiny-reasoner]", grading_bar):
        assert desc in bars, desc
    # What was written is listed in run order, grades after continuations even when graded alongside.
    assert list(summary.written) == ["problems", "traces", "filter", "chains", "continuations", "grades", "aggregate"]
    run_dir = tmp_path / "bbh"
    assert Table(run_dir / "problems").count() == 3
    assert Table(run_dir / "traces").count() == 3
    chains = Table(run_dir / "chains").count()
    skipped = sum(v for k, v in summary.skips.items() if k.startswith("chains/") or k.startswith("filter/"))
    assert chains > 0, summary
    assert Table(run_dir / "continuations").count() == 2 * chains
    assert Table(run_dir / "grades").count() == 2 * chains
    rows = json.loads((run_dir / "aggregates.json").read_text())
    assert {r["intervention"] for r in rows} == {"random_characters", "wikipedia_text"}
    assert all(r["domain"] == "logic" for r in rows)
    assert_full_report(run_dir)
    assert skipped >= 0

    # Re-running does nothing new and duplicates nothing.
    again = run_pipeline(config, make_generator=hf_factory, progress=False, n_boot=200)
    assert again.written["continuations"] == 0 and again.written["grades"] == 0
    assert Table(run_dir / "continuations").count() == 2 * chains
    assert Table(run_dir / "kept").count() == 3


def test_imported_real_traces_end_to_end(tmp_path, shared_data, hf_factory):
    real = shared_data / "real_traces"
    config = RunConfig(
        run_dir=str(tmp_path / "real"),
        dataset=DatasetConfig(name="real_traces", path=str(real), limit=4),
        models=[ModelConfig(name="tiny-reasoner")],
        traces=TracesConfig(
            source="import",
            path=str(real / "thought_anchors_math_cots.jsonl"),
            fields={
                "problem_id": "problem_id",
                "response": "solution",
                "question": "problem",
                "answer": "gt_answer",
                "model": None,
                "id_prefix": "thought_anchors_math",
            },
            filters=FilterConfig(drop_longest_fraction=0.0),
        ),
        interventions=InterventionsConfig(names=["toy/random_characters", "random_characters"], timesteps=[0.5]),
        continuation=SamplingConfig(n=2, max_new_tokens=24),
    )
    summary = run_pipeline(config, make_generator=hf_factory, progress=False, n_boot=200)
    run_dir = tmp_path / "real"
    kept = [r for r in Table(run_dir / "kept").iter_rows() if r["kept"]]
    assert 1 <= len(kept) <= 4
    assert Table(run_dir / "chains").count() == 2 * len(kept)
    # 24 new tokens never finish a real MATH solution: every continuation is graded "no answer".
    verdicts = {r["verdict"] for r in Table(run_dir / "grades").iter_rows(["verdict"])}
    assert verdicts <= {"no_answer", "wrong", "correct"}
    assert summary.grades.get("no_answer", 0) > 0 and not [k for k in summary.skips if "unclosed" in k]
    md, _ = assert_full_report(run_dir)
    assert "thought_anchors" in json.dumps(json.loads((run_dir / "config.json").read_text()))


def test_changed_config_refuses_to_resume(tmp_path):
    from recovery.configs import ConfigError

    base = dict(run_dir=str(tmp_path / "r"), dataset=DatasetConfig(name="toy", limit=2))
    run_pipeline(RunConfig(**base), stages=["problems"], progress=False)
    with pytest.raises(ConfigError, match="changed: dataset"):
        run_pipeline(
            RunConfig(**{**base, "dataset": DatasetConfig(name="toy", limit=3)}), stages=["problems"], progress=False
        )


def test_unknown_stage_and_missing_pool(tmp_path):
    config = RunConfig(
        run_dir=str(tmp_path / "r"),
        dataset=DatasetConfig(name="toy", limit=2),
        interventions=InterventionsConfig(names=["wikipedia_text"]),
    )
    with pytest.raises(ValueError, match="unknown stage"):
        run_pipeline(config, stages=["nope"], progress=False)


class AlwaysYesJudge:
    """Stands in for a strong judge LLM (which cannot run here): answers "Yes" to every request."""

    concurrency = 1  # the Generator protocol: one request in flight

    name = "always-yes"

    def generate(self, requests):
        from recovery.generation import GenerationResult, Sample

        for r in requests:
            yield GenerationResult(r.request_id, (Sample("Yes", 1, "stop"),), prompt_tokens=0)

    def close(self):
        pass


def test_llm_judge_disagreements_are_logged(tmp_path, hf_factory):
    from recovery.pipeline import GradingConfig

    config = RunConfig(
        run_dir=str(tmp_path / "judge"),
        dataset=DatasetConfig(name="toy", limit=3, options={"seed": 5}),
        traces=TracesConfig(sampling=SamplingConfig(n=1, temperature=0.0, top_p=1.0, max_new_tokens=200)),
        interventions=InterventionsConfig(names=["toy/wrong_continuation"], timesteps=[0.5]),
        continuation=SamplingConfig(n=3, max_new_tokens=200),
        grading=GradingConfig(judge=ModelConfig(name="judge")),
    )
    factory = lambda m: AlwaysYesJudge() if m.name == "judge" else hf_factory(m)  # noqa: E731
    summary = run_pipeline(config, make_generator=factory, progress=False, n_boot=100)
    grades = list(Table(tmp_path / "judge" / "grades").iter_rows())
    assert grades and all(g["judge_verdict"] in ("correct", None) for g in grades)
    wrong = [g for g in grades if g["rule_verdict"] in ("wrong", "no_answer") and g["judge_verdict"] == "correct"]
    logged = list(Table(tmp_path / "judge" / "judge_disagreements").iter_rows())
    assert len(logged) == len(wrong) == summary.grades.get("judge_disagrees", 0)
    assert all(g["verdict"] == g["rule_verdict"] for g in grades)  # rule-based stays primary
