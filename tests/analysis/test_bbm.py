"""BIG-Bench Mistake: answer parsing, scoring, accuracy with Wilson intervals, loading the real files, and an
end-to-end run with the real tiny reasoner (whose answers are poor: structure and counts are checked, not
quality)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from recovery.analysis import bbm
from recovery.analysis.bbm import (
    CORRECT,
    FALSE_ALARM,
    GENERATION_ERROR,
    MISSED_MISTAKE,
    OUT_OF_RANGE,
    UNPARSEABLE,
    WRONG_STEP,
    BBMConfig,
    BBMDataConfig,
    BBMItem,
    BBMSamplingConfig,
    ParsedAnswer,
    accuracy_table,
    build_prompt,
    load_bbm,
    parse_mistake_answer,
    score_answer,
    wilson_interval,
)
from recovery.data.skips import Skips
from recovery.data.sources import DataError, HubCopy, RowError
from recovery.model_config import ModelConfig

EVAL = Path(__file__).resolve().parents[2] / "eval"
README_COUNTS = {  # rows and rows with mistake_index = null, from the data folder's README
    "dyck_languages": (986, 336),
    "logical_deduction": (300, 6),
    "multistep_arithmetic": (300, 62),
    "tracking_shuffled_objects": (300, 40),
    "word_sorting": (300, 34),
}


# ------------------------------------------------------------------------------------------ parsing


@pytest.mark.parametrize(
    ("reply", "kind", "step"),
    [
        ("Step 3", "step", 3),
        ("step #3", "step", 3),
        ("Step no. 3", "step", 3),
        ("The first mistake is in step 3.", "step", 3),
        ("The first incorrect step is Step 4.", "step", 4),
        ("Step 5 contains the first error.", "step", 5),
        ("\\boxed{3}", "step", 3),
        ("So the answer is \\boxed{\\text{Step 2}}.", "step", 2),
        ("\\boxed{\\text{No mistake}}", "no_mistake", None),
        ("No mistake", "no_mistake", None),
        ("none", "no_mistake", None),
        ("There are no mistakes", "no_mistake", None),
        ("All of the steps are correct.", "no_mistake", None),
        ("3", "step", 3),
        ("**Answer:** Step 2", "step", 2),
        ("Steps 1 and 2 check out.\nAnswer: Step 4", "step", 4),
        ("I compared step 1 with step 2.\nFinal answer: No mistake", "no_mistake", None),
        # Reasoning before </think> is ignored, whatever step it names.
        ("<think>Step 1 is fine... maybe step 2?</think>\n\nAnswer: Step 4", "step", 4),
        ("<think>Hmm, step 2 is wrong.</think>There are no mistakes.", "no_mistake", None),
        ("<thought>look at step 6</thought>The first error is in step 1.", "step", 1),
        # "no mistake in step 1" is a claim about one step, not about the whole solution.
        ("No mistakes until step 3, which adds wrongly.", "step", 3),
        # Two steps and no marker: ambiguous, never guessed.
        ("Step 2 is correct but step 5 is wrong.", "unparseable", None),
        ("There is no mistake in step 1, but step 2 is wrong", "unparseable", None),
        ("I am not sure.", "unparseable", None),
        ("", "unparseable", None),
        ("<think>Step 2 is wrong.</think>", "unparseable", None),
    ],
)
def test_parse_answer_forms(reply, kind, step):
    parsed = parse_mistake_answer(reply)
    assert (parsed.kind, parsed.step) == (kind, step), parsed
    if kind == "unparseable":
        assert parsed.detail  # the reason is always kept


def test_truncated_reasoning_is_unparseable_with_reason():
    parsed = parse_mistake_answer("<think>Step 3 looks wrong, but let me re", finish_reason="length")
    assert parsed.kind == "unparseable" and parsed.detail.startswith("truncated")
    # Truncated after the reasoning closed: the final answer is there, so it is read.
    assert parse_mistake_answer("x</think>Answer: Step 3", finish_reason="length").step == 3
    assert parse_mistake_answer(None).kind == "unparseable"


def test_score_answer_outcomes():
    flawed = BBMItem("t", 0, "Q", ("a", "b", "c"), mistake_index=1)  # first mistake: step 2
    clean = BBMItem("t", 1, "Q", ("a", "b"), mistake_index=None)
    assert score_answer(flawed, ParsedAnswer("step", 2)) == CORRECT
    assert score_answer(flawed, ParsedAnswer("step", 3)) == WRONG_STEP
    assert score_answer(flawed, ParsedAnswer("no_mistake")) == MISSED_MISTAKE
    assert score_answer(flawed, ParsedAnswer("step", 4)) == OUT_OF_RANGE
    assert score_answer(flawed, ParsedAnswer("step", 0)) == OUT_OF_RANGE
    assert score_answer(clean, ParsedAnswer("no_mistake")) == CORRECT
    assert score_answer(clean, ParsedAnswer("step", 1)) == FALSE_ALARM
    assert score_answer(clean, ParsedAnswer("unparseable", detail="x")) == UNPARSEABLE


def test_prompt_numbers_steps_from_one():
    item = BBMItem("multistep_arithmetic", 7, "((1 + 2) * 3) =", ("1 + 2 = 3.", " 3 * 3 = 9. "), None)
    prompt = build_prompt(item)
    assert "Question:\n((1 + 2) * 3) =" in prompt
    assert "Step 1: 1 + 2 = 3.\nStep 2: 3 * 3 = 9." in prompt
    assert "Step 3" not in prompt
    assert '"Answer: Step N"' in prompt and '"Answer: No mistake"' in prompt
    assert item.id == "bbm/multistep_arithmetic/7" and item.gold_step is None


# ------------------------------------------------------------------------------------------ metrics


def test_wilson_interval_hand_values():
    # 2/4: centre 0.5, half-width 1.96·sqrt(1/16 + 1.96²/64)/(1 + 1.96²/4) = 0.350.
    assert wilson_interval(2, 4) == pytest.approx((0.1500, 0.8500), abs=1e-4)
    # 0/10: upper bound z²/(n + z²) = 3.8415/13.8415.
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.27753), abs=1e-5)
    assert wilson_interval(3, 5) == pytest.approx((0.2307, 0.8824), abs=1e-4)
    assert all(math.isnan(x) for x in wilson_interval(0, 0))
    with pytest.raises(ValueError, match="k=5, n=4"):
        wilson_interval(5, 4)


def _row(model, task, gold, outcome):
    return {"model": model, "task": task, "gold_step": gold, "outcome": outcome}


def test_accuracy_table_hand_computed():
    rows = [
        _row("A", "word_sorting", 2, CORRECT),
        _row("A", "dyck_languages", 4, CORRECT),
        _row("A", "dyck_languages", None, CORRECT),
        _row("A", "dyck_languages", 1, WRONG_STEP),
        _row("A", "word_sorting", None, UNPARSEABLE),
        _row("B", "dyck_languages", None, GENERATION_ERROR),
    ]
    accs = {(a.model, a.task): a for a in accuracy_table(rows)}
    # Tasks in the paper's order, then the pooled entry; models as first seen.
    assert [(a.model, a.task) for a in accuracy_table(rows)] == [
        ("A", "dyck_languages"),
        ("A", "word_sorting"),
        ("A", "all"),
        ("B", "dyck_languages"),
        ("B", "all"),
    ]
    dyck = accs[("A", "dyck_languages")]
    assert (dyck.n, dyck.correct) == (3, 2) and dyck.accuracy == pytest.approx(2 / 3)
    assert (dyck.n_with_mistake, dyck.correct_with_mistake) == (2, 1)
    assert (dyck.n_without_mistake, dyck.correct_without_mistake) == (1, 1)
    words = accs[("A", "word_sorting")]
    assert (words.n, words.correct, words.outcomes[UNPARSEABLE]) == (2, 1, 1)  # unparseable counts as wrong
    pooled = accs[("A", "all")]
    assert (pooled.n, pooled.correct) == (5, 3)
    assert (pooled.ci_low, pooled.ci_high) == pytest.approx((0.2307, 0.8824), abs=1e-4)
    b = accs[("B", "dyck_languages")]
    assert (b.n, b.correct, b.outcomes) == (1, 0, {GENERATION_ERROR: 1})


def test_section_tables_and_paper_reference():
    rows = [
        _row("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "word_sorting", 2, CORRECT),
        _row("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "word_sorting", 3, WRONG_STEP),
    ]
    for r in rows:
        r.update(item_id="bbm/word_sorting/0", detail="")
    section = bbm.bbm_section(rows)
    main = section.tables[0]
    assert list(main.columns) == ["Model", "Word Sorting", "All"]
    assert list(main.rows[0]) == ["deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "50.0", "50.0"]
    paper = next(t for t in section.tables if t.title.startswith("The paper's Table 11"))
    assert list(paper.rows[0]) == ["deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "R1-Distill-Qwen-7B", "16.1"]
    assert section.figures[0].png_bytes.startswith(b"\x89PNG")
    assert bbm.paper_row_name("QwQ-32B") == "QwQ-32B" and bbm.paper_row_name("my-model") is None


# ------------------------------------------------------------------------------------------ loading


def test_load_all_five_local_files(shared_data):
    folder = shared_data / "bigbench_mistake"
    skips = Skips()
    items = load_bbm(path=folder, skips=skips)
    assert skips.total == 0
    for task, (rows, clean) in README_COUNTS.items():
        mine = [i for i in items if i.task == task]
        assert len(mine) == rows, task
        assert sum(i.mistake_index is None for i in mine) == clean, task
        assert all(i.mistake_index is None or 0 <= i.mistake_index < len(i.steps) for i in mine)
    first = json.loads((folder / "word_sorting.jsonl").read_text().splitlines()[0])
    ws = next(i for i in items if i.id == "bbm/word_sorting/0")
    assert ws.steps == tuple(first["steps"]) and ws.gold_step == first["mistake_index"] + 1
    assert [i.id for i in load_bbm("dyck_languages", path=folder, limit=3)] == [
        f"bbm/dyck_languages/{k}" for k in range(3)
    ]


def test_hub_copy_loads_the_same_items(shared_data):
    datasets = pytest.importorskip("datasets")
    folder = shared_data / "bigbench_mistake"
    tasks = ["multistep_arithmetic", "word_sorting"]
    rows = {t: [json.loads(line) for line in (folder / f"{t}.jsonl").read_text().splitlines()[:5]] for t in tasks}
    calls = []

    def per_config(repo, name, split, revision):  # the datasets.load_dataset signature
        calls.append((repo, name, split))
        return datasets.Dataset.from_list(rows[name])

    local = load_bbm(tasks, path=folder, limit=5)
    assert load_bbm(tasks, hub=HubCopy("someone/bbm", loader=per_config)) == local
    assert calls == [("someone/bbm", t, "train") for t in tasks]

    one_table = datasets.Dataset.from_list([{**r, "task": t} for t in tasks for r in rows[t]])
    flat = HubCopy("someone/bbm-flat", "test", loader=lambda repo, name, split, revision: one_table)
    loaded = load_bbm(tasks, hub=flat, task_column="task")
    assert loaded == local

    def offline(repo, name, split, revision):
        raise ConnectionError("no network")

    with pytest.raises(DataError, match="someone/bbm.*word_sorting"):
        load_bbm("word_sorting", hub=HubCopy("someone/bbm", loader=offline))


def test_a_config_naming_a_hub_copy_reads_that_repository_split_and_revision(tmp_path):
    calls = []

    def offline(repo, name, split, revision):  # the datasets.load_dataset signature
        calls.append((repo, name, split, revision))
        raise ConnectionError("no network")

    data = BBMDataConfig(hub_id="someone/bbm", split="test", revision="abc", tasks=["word_sorting"])
    config = BBMConfig(out=str(tmp_path / "bbm"), data=data, models=[ModelConfig(name="tiny-reasoner")])
    with pytest.raises(DataError, match="cannot load 'someone/bbm' config 'word_sorting' split 'test'"):
        bbm.run_bbm(config, progress=False, loader=offline)
    assert calls == [("someone/bbm", "word_sorting", "test", "abc")]
    assert BBMDataConfig(path="x").hub_copy(offline) is None


def test_bad_rows_are_counted_or_refused(tmp_path):
    path = tmp_path / "word_sorting.jsonl"
    lines = [
        {"input": "sort b a", "steps": ["a b"], "mistake_index": None},
        {"input": "sort c", "steps": [], "mistake_index": None},
        {"input": "sort d", "steps": ["x", "y"], "mistake_index": 2},
        {"input": "sort e", "steps": ["x"], "mistake_index": True},
        {"input": "sort f", "steps": ["x"]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\nnot json\n")
    skips = Skips()
    items = load_bbm("word_sorting", path=path, skips=skips)
    assert [i.id for i in items] == ["bbm/word_sorting/0"]
    assert dict(skips.counts) == {
        "missing_field:steps": 1,
        "bad_mistake_index": 2,
        "missing_field:mistake_index": 1,
        "bad_json": 1,
    }
    assert "line 3" in skips.examples["bad_mistake_index"][0]
    with pytest.raises(RowError, match="word_sorting.jsonl line 2"):
        load_bbm("word_sorting", path=path, strict=True)
    with pytest.raises(DataError, match="exactly one of path"):
        load_bbm("word_sorting")
    with pytest.raises(DataError, match="no dyck_languages.jsonl"):
        load_bbm("dyck_languages", path=tmp_path)


def test_config_files_load():
    cfg = bbm.load_bbm_config(EVAL / "bbm" / "paper_models.yaml")
    assert cfg.data.tasks == list(bbm.BBM_TASKS) and cfg.sampling.mode == "recommended"
    assert all(m.backend == "vllm" for m in cfg.models)
    phi = next(m for m in cfg.models if m.name == "Phi-4-reasoning-plus")
    assert bbm.sampling_for(phi, cfg.sampling).temperature == 0.8  # the model's own exception wins
    toy = bbm.load_bbm_config(EVAL / "bbm" / "toy.yaml", {"out": "x", "data": {"limit": 2}})
    assert (toy.out, toy.data.limit, toy.data.tasks) == ("x", 2, ["multistep_arithmetic", "tracking_shuffled_objects"])
    greedy = bbm.sampling_for(toy.models[0], toy.sampling, seed=5)
    assert (greedy.temperature, greedy.n, greedy.seed, greedy.max_new_tokens) == (0.0, 1, 5, 64)


# ------------------------------------------------------------------------------------------ end to end


def _toy_config(shared_data, out) -> BBMConfig:
    # multistep_arithmetic prompts fit the tiny reasoner's 1,024-token context; word_sorting ones do not, so
    # they come back as generation errors — counted, stored and retried.
    return BBMConfig(
        out=str(out),
        data=BBMDataConfig(
            path=str(shared_data / "bigbench_mistake"), tasks=["multistep_arithmetic", "word_sorting"], limit=2
        ),
        models=[ModelConfig(name="tiny-reasoner")],
        sampling=BBMSamplingConfig(mode="greedy", max_new_tokens=40),
        flush_every=3,
    )


def test_end_to_end_with_tiny_reasoner(tmp_path, shared_data, hf_factory):
    from recovery.pipeline import DatasetConfig, RunConfig, run_pipeline

    run_dir = tmp_path / "run"
    run_pipeline(
        RunConfig(run_dir=str(run_dir), dataset=DatasetConfig(name="toy", limit=2)), stages=["problems"], progress=False
    )
    config = _toy_config(shared_data, tmp_path / "bbm")
    result = bbm.run_bbm(config, make_generator=hf_factory, progress=False, run_dir=run_dir)

    assert result.written == 4 and len(result.rows) == 4
    by_task = {t: [r for r in result.rows if r["task"] == t] for t in config.data.tasks}
    assert all(r["outcome"] == GENERATION_ERROR and "does not fit" in r["detail"] for r in by_task["word_sorting"])
    for r in by_task["multistep_arithmetic"]:
        assert r["outcome"] in bbm.OUTCOMES and r["outcome"] != GENERATION_ERROR
        assert isinstance(r["reply"], str) and r["n_tokens"] <= 40 and r["prompt_tokens"] > 300
        assert r["correct"] == (r["outcome"] == CORRECT)
    assert {r["gold_step"] for r in by_task["multistep_arithmetic"]} == {4, None}  # items 0 and 1 of the file
    pooled = next(a for a in result.accuracies if a.task == "all")
    assert pooled.n == 4 and pooled.outcomes[GENERATION_ERROR] == 2

    out = tmp_path / "bbm"
    md = (out / "report" / "report.md").read_text()
    assert "BIG-Bench Mistake" in md and "Multistep Arith." in md and "generation_error" in md
    assert (out / "report" / "figures" / "bbm_accuracy.png").is_file()
    assert (out / "analysis" / "bbm" / "section.json").is_file()
    assert "## BIG-Bench Mistake" in (run_dir / "report" / "report.md").read_text()
    assert (run_dir / "analysis" / "bbm" / "section.json").is_file()

    # Resume: answered items are not asked again; the two generation errors are retried (and fail again).
    again = bbm.run_bbm(config, make_generator=hf_factory, progress=False)
    assert again.written == 2 and len(again.rows) == 4
    assert sorted(r["reply"] or "" for r in again.rows) == sorted(r["reply"] or "" for r in result.rows)

    # Same config and seed in a fresh folder: the same answers and the same section, byte for byte.
    fresh = bbm.run_bbm(_toy_config(shared_data, tmp_path / "bbm2"), make_generator=hf_factory, progress=False)
    assert sorted((r["id"], r["reply"]) for r in fresh.rows if r["reply"]) == sorted(
        (r["id"], r["reply"]) for r in result.rows if r["reply"]
    )
    for name in ("section.json", "bbm_accuracy.png"):
        assert (tmp_path / "bbm2" / "analysis" / "bbm" / name).read_bytes() == (
            out / "analysis" / "bbm" / name
        ).read_bytes()


def test_cli_lists_commands_and_reports_bad_input(tmp_path):
    from typer.testing import CliRunner

    from recovery.cli import app

    runner = CliRunner()
    listing = runner.invoke(app, ["analyze", "--help"])
    assert listing.exit_code == 0 and "bbm" in listing.output and "paraphrase" in listing.output
    bad = runner.invoke(
        app, ["analyze", "bbm", str(EVAL / "bbm" / "toy.yaml"), "--out", str(tmp_path), "--tasks", "nope"]
    )
    assert bad.exit_code == 2 and "no nope.jsonl" in bad.output
    no_judge = runner.invoke(app, ["analyze", "paraphrase", str(tmp_path)])
    assert no_judge.exit_code == 2 and "name a judge" in no_judge.output


def test_a_task_file_may_be_json_or_parquet_else_the_jsonl_is_named(tmp_path):
    row = {"input": "sort b a", "steps": ["a b"], "mistake_index": None}
    (tmp_path / "word_sorting.json").write_text(json.dumps([row]))
    assert [i.id for i in load_bbm("word_sorting", path=tmp_path)] == ["bbm/word_sorting/0"]
    with pytest.raises(DataError, match=r"no dyck_languages\.jsonl for BIG-Bench Mistake task 'dyck_languages'$"):
        load_bbm("dyck_languages", path=tmp_path)
