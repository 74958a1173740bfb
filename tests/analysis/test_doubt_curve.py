"""recovery.analysis.doubt_curve / doubt_section / cli_doubt: doubt per sentence index after an intervention.

A hand-built run directory (real tables written with the pipeline's row schemas) checks every number against
hand-computed values; a small real toy run (tiny reasoner, session-scoped) checks the whole path into the
rendered report and the CLI; the imported real traces check the baseline-only case, under both sentence
splitters (`recovery.doubt.SENTENCE_SPLITTERS`).
"""

from __future__ import annotations

import json
import random
from collections import defaultdict

import pyarrow.parquet as pq
import pytest

from recovery.analysis.cli_doubt import doubt_analysis
from recovery.analysis.doubt_curve import (
    DoubtConfig,
    DoubtResult,
    analyze_doubt,
    baseline_window,
    reasoning_after_intervention,
)
from recovery.analysis.doubt_judge import DoubtJudge
from recovery.analysis.doubt_section import doubt_section
from recovery.doubt import is_doubt, split_sentences
from recovery.generation import GenerationResult, Sample
from recovery.run_dir import records
from recovery.segment import split_reasoning
from recovery.store import RunDir
from recovery.types import Continuation, Grade, Intervened, Trace
from run_rows import add_grades, continuation_row


def test_reasoning_after_intervention_stops_at_the_closing_tag():
    assert reasoning_after_intervention("\n\nWait, no. 5.\n</think>\n\nWait.") == "\n\nWait, no. 5.\n"
    # Only the model's own closing tag ends its reasoning; another family's is text.
    assert reasoning_after_intervention("A.</thought>B.</think>") == "A.</thought>B."
    assert reasoning_after_intervention("A.</think>B.</thought>", "</thought>") == "A.</think>B."
    assert reasoning_after_intervention("no tag here") == "no tag here"


def test_baseline_window():
    sentences = [f"s{i}." for i in range(10)]
    assert baseline_window(sentences[:3], 5, random.Random(0)) == (0, sentences[:3])
    assert baseline_window(sentences[:5], 5, random.Random(0)) == (0, sentences[:5])
    starts = set()
    for seed in range(200):
        start, window = baseline_window(sentences, 4, random.Random(seed))
        assert window == sentences[start : start + 4]
        starts.add(start)
    assert starts == set(range(7))  # every start 0..10−4 is reachable
    assert baseline_window(sentences, 4, random.Random(5)) == baseline_window(sentences, 4, random.Random(5))


# -- a hand-built run directory ------------------------------------------------------------------------------


def _chain(trace_id: str, model: str, intervention: str, category: str, t: float) -> Intervened:
    return Intervened(
        trace_id=trace_id,
        problem_id="p",
        model=model,
        intervention=intervention,
        category=category,
        target_t=t,
        actual_t=t,
        cut_index=1,
        n_steps=4,
        prefix="A.\n\nB.",
        inserted_text="B.",
        original_prefix_chars=5,
        original_reasoning_chars=10,
    )


def build_run(path, traces, continuations, chains):
    """Write the traces, chains, continuations and grades tables of a run directory with the pipeline's schemas.

    ``continuations``: (chain (or None for an unknown chain), sample index, text, verdict or None)."""
    run = RunDir(path)
    with run.table("traces").writer(records.TRACES) as w:
        w.add_many(records.trace_row(Trace("p", model, text, "", "", id=tid)) for tid, model, text in traces)
    with run.table("chains").writer(records.CHAINS) as w:
        w.add_many(records.chain_row(c) for c in chains)
    with (
        run.table("continuations").writer(records.CONTINUATIONS) as cw,
        run.table("grades").writer(records.GRADES) as gw,
    ):
        for chain, index, text, verdict in continuations:
            chain_id = chain.id if chain is not None else "missing-chain"
            cont = Continuation(chain_id, index, text, model=chain.model if chain else "m1")
            cw.add(continuation_row(cont, "p", 10, 10))
            if verdict is not None:
                add_grades(gw, [cont.id], [chain_id], [Grade(verdict)])
    return run


@pytest.fixture
def hand_run(tmp_path):
    c1 = _chain("t1", "m1", "iv_a", "adversarial", 0.3)
    c2 = _chain("t1", "m1", "iv_b", "neutral", 0.5)
    c3 = _chain("t4", "m2", "iv_a", "adversarial", 0.3)
    traces = [
        # 5 sentences alternating doubt: every 2-sentence window holds exactly one doubtful sentence.
        ("t1", "m1", "<think>Wait, no. x = 1.\nWait, no. y = 2. Wait, no.</think> The answer is 2."),
        ("t2", "m1", "<think>Hmm.</think>"),  # 1 sentence (doubtful): shorter than the window
        ("t3", "m2", "no think tags at all"),  # skipped: no reasoning to sample
        ("t4", "m2", "<think>So 1. So 2. So 3.</think>"),  # no doubt anywhere
    ]
    continuations = [
        (c1, 0, "\n\nWait, no. So 5.\n</think>\n\nThe answer is 5.", "correct"),  # [doubt, -]
        (c1, 1, "So 4. Hmm, that is odd. Then 6.</think>", "wrong"),  # [-, doubt] (3rd sentence outside)
        (c2, 0, "Let me check. x = 2.", "correct"),  # [doubt, -]
        (c3, 0, "Actually, no. Fine.</think> Wait, no.", "no_answer"),  # [doubt, -]: text after </think> ignored
        (c2, 1, "Wait.", None),  # never graded: skipped
        (None, 0, "Wait.", "correct"),  # its chain is unknown: skipped
        (c1, 2, "</think> The answer is 5.", "correct"),  # no reasoning sentence: skipped
    ]
    build_run(tmp_path / "run", traces, continuations, [c1, c2, c3])
    return tmp_path / "run", (c1, c2, c3)


def test_hand_computed_rates(hand_run):
    run_dir, (c1, _, _) = hand_run
    result = analyze_doubt(run_dir, config=DoubtConfig(sentences=2, seed=0), progress=False)
    assert result.detector == "lexical" and result.baseline_source == "all traces"
    assert result.cells == {
        ("m1", "iv_a", "adversarial", True, 1): [1, 1],
        ("m1", "iv_a", "adversarial", True, 2): [1, 0],
        ("m1", "iv_a", "adversarial", False, 1): [1, 0],
        ("m1", "iv_a", "adversarial", False, 2): [1, 1],
        ("m1", "iv_b", "neutral", True, 1): [1, 1],
        ("m1", "iv_b", "neutral", True, 2): [1, 0],
        ("m2", "iv_a", "adversarial", False, 1): [1, 1],
        ("m2", "iv_a", "adversarial", False, 2): [1, 0],
    }
    assert result.curve() == [(4, 3), (4, 1)]
    assert result.curve(intervention="iv_a") == [(3, 2), (3, 1)]
    assert result.curve(model="m2") == [(1, 1), (1, 0)]
    assert result.curve(recovered=True) == [(2, 2), (2, 0)] and result.curve(recovered=False) == [(2, 1), (2, 1)]
    assert result.n_windows() == 4 and result.n_windows(model="m1", intervention="iv_a", recovered=True) == 1
    # baseline: t1 → 1 of 2, t2 → 1 of 1 (short), t4 → 0 of 2; t3 skipped
    assert result.baseline_counts("m1") == (3, 2) and result.baseline_counts("m2") == (2, 0)
    assert result.baseline_rate() == pytest.approx(2 / 5)
    assert result.baseline_traces == {"m1": 2, "m2": 1} and result.baseline_short == {"m1": 1, "m2": 0}
    assert result.skips == {
        ("continuations", "ungraded"): 1,
        ("continuations", "unknown_chain"): 1,
        ("continuations", "no_sentences"): 1,
        ("baseline", "no_think_tag"): 1,
    }

    out = run_dir / "analysis" / "doubt"
    rows = pq.read_table(out / "sentences.parquet").to_pylist()
    assert len(rows) == 8
    assert rows[0] == {
        "continuation_id": Continuation(c1.id, 0, "").id,
        "chain_id": c1.id,
        "model": "m1",
        "intervention": "iv_a",
        "target_t": 0.3,
        "sentence_index": 1,
        "sentence": "Wait, no.",
        "doubt": True,
        "detector": "lexical",
        "recovered": True,
    }
    assert [(r["sentence"], r["doubt"]) for r in rows[2:4]] == [("So 4.", False), ("Hmm, that is odd.", True)]
    base = pq.read_table(out / "baseline.parquet").to_pylist()
    assert [(r["trace_id"], r["sentence_index"], r["doubt"]) for r in base if r["trace_id"] != "t1"] == [
        ("t2", 1, True),
        ("t4", 1, False),
        ("t4", 2, False),
    ]
    t1 = [r for r in base if r["trace_id"] == "t1"]
    assert len(t1) == 2 and sum(r["doubt"] for r in t1) == 1 and 0 <= t1[0]["window_start"] <= 3
    assert DoubtResult.load(run_dir).to_json() == result.to_json()


def test_hand_computed_section(hand_run):
    run_dir, _ = hand_run
    section = doubt_section(analyze_doubt(run_dir, config=DoubtConfig(sentences=2), progress=False))
    assert section.title == "Doubt after the intervention"
    assert "**0.400** (2 of 5 sentences in 3 traces)" in section.markdown
    assert [f.name for f in section.figures] == ["doubt_after_intervention", "doubt_recovered"]
    assert all(f.png_bytes.startswith(b"\x89PNG") for f in section.figures)
    summary, by_index, baseline, skips = section.tables
    rows = {(r[0], r[1]): r for r in summary.rows}
    # m1/iv_a: 2 continuations, 1 recovered; index 1: 1 of 2 doubtful; indices 1–2: 2 of 4
    assert rows[("m1", "iv_a")][3:8] == (2, "50%", "0.500", "0.500", "0.500")
    assert rows[("m1", "iv_a")][8:] == ("0.500", "0.500")  # recovered: k1 [T, F]; not: k2 [F, T]
    assert rows[("all models", "iv_a")][3:6] == (3, "33%", "0.667")
    assert by_index.columns[:5] == ["index", "sentences", "all", "iv_a", "iv_b"]
    assert [r[:5] for r in by_index.rows] == [(1, 4, "0.750", "0.667", "1.000"), (2, 4, "0.250", "0.333", "0.000")]
    assert {r[0]: r[1:] for r in baseline.rows} == {
        "m1": (2, 1, 3, 2, "0.667"),
        "m2": (1, 0, 2, 0, "0.000"),
        "all models": (3, 1, 5, 2, "0.400"),
    }
    assert {(r[0], r[1]): r[2] for r in skips.rows}[("continuations", "ungraded")] == 1


def test_reference_splitter_in_the_analysis_and_the_section(tmp_path):
    pytest.importorskip("spacy")
    chain = _chain("t1", "m1", "iv_a", "adversarial", 0.3)
    trace = "<think>x = 1\nHmm. So 2.\n\nWait, no. 3.</think> The answer is 3."
    continuation = "x = 1\nHmm. So 2.\n\nLet me check. 4.</think> The answer is 4."
    run_dir = tmp_path / "run"
    build_run(run_dir, [("t1", "m1", trace)], [(chain, 0, continuation, "correct")], [chain])
    default = analyze_doubt(run_dir, config=DoubtConfig(sentences=3), progress=False)
    assert default.splitter == "default" and default.curve() == [(1, 0), (1, 1), (1, 0)]  # "x = 1" "Hmm." "So 2."
    reference = analyze_doubt(run_dir, config=DoubtConfig(sentences=3, splitter="reference"), progress=False)
    out = run_dir / "analysis" / "doubt"
    rows = pq.read_table(out / "sentences.parquet").to_pylist()
    assert [r["sentence"] for r in rows] == ["x = 1\nHmm.", "So 2.", "Let me check."]  # spaCy: "1\nHmm." is one
    assert reference.curve() == [(1, 1), (1, 0), (1, 1)]
    base = [r["sentence"] for r in pq.read_table(out / "baseline.parquet").to_pylist()]
    whole = split_sentences(split_reasoning(trace).reasoning, splitter="reference")
    assert whole == ["x = 1\nHmm.", "So 2.", "Wait, no.", "3."] and base in (whole[:3], whole[1:])
    assert json.loads((out / "summary.json").read_text())["splitter"] == "reference"
    assert DoubtResult.load(run_dir).to_json() == reference.to_json()
    md = doubt_section(reference).markdown
    assert "split by the **reference** splitter" in md and "spaCy's rule-based sentencizer" in md
    assert "grading protocol, on which *recovered* rests, is unknown" in md  # hand-built: no run config
    assert "project's **default** splitter" in doubt_section(default).markdown
    with pytest.raises(ValueError, match="splitter must be one of"):
        DoubtConfig(splitter="spacy")


class JudgeBackend:
    """A `Generator` standing in for the judge LLM (none runs here): answers like the lexical detector,
    except "Maybe" for the sentence "Fine."."""

    concurrency = 1  # the Generator protocol: one request in flight

    name = "scripted-judge"

    def generate(self, requests):
        for r in requests:
            sentence = (
                r.messages[-1].content.split("Consider the following text: ", 1)[1].split(". Does this text", 1)[0]
            )
            reply = "Maybe" if sentence == "Fine." else ("Yes" if is_doubt(sentence) else "No")
            yield GenerationResult(r.request_id, (Sample(reply, 1, "stop"),), prompt_tokens=5)

    def close(self):
        pass


def test_judge_detector_and_its_skips(hand_run):
    run_dir, _ = hand_run
    result = analyze_doubt(run_dir, DoubtJudge(JudgeBackend()), DoubtConfig(sentences=2), progress=False)
    assert result.detector == "judge"
    assert ("m2", "iv_a", "adversarial", False, 2) not in result.cells  # "Fine." got no verdict
    assert result.curve() == [(4, 3), (3, 1)]
    assert result.skips[("continuations", "detector:no_yes_or_no")] == 1
    assert result.examples == {"no_yes_or_no": "Maybe"}
    rows = pq.read_table(run_dir / "analysis" / "doubt" / "sentences.parquet").to_pylist()
    assert (
        len(rows) == 7 and {r["detector"] for r in rows} == {"judge"} and "Fine." not in {r["sentence"] for r in rows}
    )
    skips = doubt_section(result).tables[-1]
    assert ("continuations", "detector:no_yes_or_no", 1, "Maybe") in skips.rows


class MaybeBackend(JudgeBackend):
    """A judge that never answers Yes or No."""

    concurrency = 1  # the Generator protocol: one request in flight

    def generate(self, requests):
        for r in requests:
            yield GenerationResult(r.request_id, (Sample("Maybe", 1, "stop"),), prompt_tokens=5)


def test_a_judge_without_any_verdict_is_reported_not_hidden(hand_run):
    run_dir, _ = hand_run
    result = analyze_doubt(run_dir, DoubtJudge(MaybeBackend()), DoubtConfig(sentences=2), progress=False)
    assert not result.cells and not result.baseline and result.n_windows() == 4
    # 8 sentences after interventions, 5 in baseline windows — each one counted
    assert result.skips[("continuations", "detector:no_yes_or_no")] == 8
    assert result.skips[("baseline", "detector:no_yes_or_no")] == 5
    section = doubt_section(result)
    assert "4 graded continuations, but the detector gave no verdict" in section.markdown
    assert "No baseline: the detector gave no verdict on any sentence of the 3 traces" in section.markdown
    assert section.figures == () and [t.title for t in section.tables] == ["Skipped items"]


def test_same_seed_same_bytes_and_windows_independent_of_other_traces(tmp_path):
    long_text = "<think>" + " ".join(f"Step {i} is {i * 3}." for i in range(60)) + "</think>"
    traces = [("t1", "m", long_text), ("t2", "m", "<think>Wait. A. B.</think>")]
    paths = {}
    for name, subset in (("a", traces), ("b", traces), ("c", traces[:1])):
        build_run(tmp_path / name, subset, [], [])
        analyze_doubt(tmp_path / name, config=DoubtConfig(sentences=5, seed=3), progress=False)
        paths[name] = tmp_path / name / "analysis" / "doubt"
    for file in ("sentences.parquet", "baseline.parquet", "summary.json"):
        assert (paths["a"] / file).read_bytes() == (paths["b"] / file).read_bytes(), file

    def start_of_t1(out):
        return next(
            r["window_start"] for r in pq.read_table(out / "baseline.parquet").to_pylist() if r["trace_id"] == "t1"
        )

    assert start_of_t1(paths["a"]) == start_of_t1(paths["c"])  # seeded per trace, not by position
    starts = set()
    for seed in range(6):
        analyze_doubt(tmp_path / "c", config=DoubtConfig(sentences=5, seed=seed), progress=False)
        starts.add(start_of_t1(paths["c"]))
    assert len(starts) > 1


def test_not_a_run_directory(tmp_path):
    with pytest.raises(ValueError, match="not a run directory"):
        analyze_doubt(tmp_path, progress=False)
    with pytest.raises(ValueError):
        DoubtConfig(sentences=0)


# -- a real toy run ------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def toy_run(tmp_path_factory):
    """A small real run: the tiny reasoner on 4 toy problems, 2 interventions at t=0.5, N=2."""
    pytest.importorskip("torch")
    from recovery.pipeline import (
        DatasetConfig,
        InterventionsConfig,
        RunConfig,
        SamplingConfig,
        TracesConfig,
        run_pipeline,
    )
    from recovery.toy import has_checkpoint

    if not has_checkpoint():
        pytest.skip("tiny reasoner checkpoint not shipped")
    run_dir = tmp_path_factory.mktemp("doubt") / "toy"
    config = RunConfig(
        run_dir=str(run_dir),
        dataset=DatasetConfig(name="toy", limit=4, options={"seed": 5}),
        traces=TracesConfig(sampling=SamplingConfig(n=1, temperature=0.0, top_p=1.0, max_new_tokens=200)),
        interventions=InterventionsConfig(names=["toy/wrong_continuation", "toy/unrelated_cot"], timesteps=[0.5]),
        continuation=SamplingConfig(n=2, max_new_tokens=160),
    )
    run_pipeline(config, progress=False, n_boot=50)
    return run_dir


def test_toy_run_section_lands_in_the_report(toy_run):
    result, report = doubt_analysis(toy_run, progress=False)
    md = (toy_run / "report" / "report.md").read_text()
    assert report == toy_run / "report" / "report.html"
    assert "## Doubt after the intervention" in md and "figures/doubt_after_intervention.png" in md
    assert (toy_run / "report" / "figures" / "doubt_after_intervention.png").is_file()
    assert "Doubt after the intervention" in report.read_text()
    # every graded continuation with reasoning became a window; the rates match the stored labels
    grades = {r["id"]: r["verdict"] for r in RunDir(toy_run).table("grades").iter_rows(["id", "verdict"])}
    rows = pq.read_table(toy_run / "analysis" / "doubt" / "sentences.parquet").to_pylist()
    assert result.n_windows() == len({r["continuation_id"] for r in rows}) > 0
    assert sum(result.windows.values()) + sum(v for (s, _), v in result.skips.items() if s == "continuations") == len(
        grades
    )
    counts = defaultdict(lambda: [0, 0])
    for r in rows:
        assert r["recovered"] == (grades[r["continuation_id"]] == "correct")
        assert r["doubt"] == is_doubt(r["sentence"])
        counts[r["sentence_index"]][0] += 1
        counts[r["sentence_index"]][1] += r["doubt"]
    assert result.curve() == [tuple(counts.get(i, (0, 0))) for i in range(1, 21)]
    stored = json.loads((toy_run / "analysis" / "doubt" / "section.json").read_text())
    assert stored["section"]["title"] == "Doubt after the intervention"


def test_toy_run_cli(toy_run):
    from typer.testing import CliRunner

    from recovery.cli import app

    out = CliRunner().invoke(
        app, ["analyze", "doubt", str(toy_run), "--sentences", "5", "--seed", "3", "--no-progress"]
    )
    assert out.exit_code == 0, out.output
    summary = json.loads((toy_run / "analysis" / "doubt" / "summary.json").read_text())
    assert (summary["sentences"], summary["seed"], summary["detector"]) == (5, 3, "lexical")
    assert "after intervention" in out.output and "report:" in out.output
    assert max(c[4] for c in summary["cells"]) <= 5
    bad = CliRunner().invoke(app, ["analyze", "doubt", str(toy_run / "nope")])
    assert bad.exit_code == 2 and "not a run directory" in bad.output


def test_toy_run_reference_splitter_and_grading_protocol(toy_run):
    pytest.importorskip("spacy")
    from typer.testing import CliRunner

    from recovery.cli import app

    out = CliRunner().invoke(app, ["analyze", "doubt", str(toy_run), "--splitter", "reference", "--no-progress"])
    assert out.exit_code == 0, out.output
    assert "reference splitter" in out.output
    summary = json.loads((toy_run / "analysis" / "doubt" / "summary.json").read_text())
    protocol = "rule-based grader; unclosed continuations: no_answer (never correct)"  # the run's (default) grading
    assert (summary["splitter"], summary["grading"]) == ("reference", protocol)
    md = (toy_run / "report" / "report.md").read_text()
    assert "split by the **reference** splitter" in md
    assert f"graded correct by the run's grading protocol: {protocol}." in md
    assert f"Grading: {protocol}." in md  # the overview names it too
    bad = CliRunner().invoke(app, ["analyze", "doubt", str(toy_run), "--splitter", "spacy", "--no-progress"])
    assert bad.exit_code == 2 and "splitter must be one of default, reference" in bad.output


# -- imported real traces: the baseline alone ----------------------------------------------------------------


@pytest.fixture(scope="module")
def real_run(tmp_path_factory, shared_data):
    """The 153 real DeepSeek-R1-Distill traces imported by the pipeline (problems and traces stages)."""
    from recovery.pipeline import DatasetConfig, ModelConfig, RunConfig, TracesConfig, run_pipeline

    real = shared_data / "real_traces"
    run_dir = tmp_path_factory.mktemp("doubt_real") / "real"
    config = RunConfig(
        run_dir=str(run_dir),
        dataset=DatasetConfig(name="real_traces", path=str(real)),
        models=[ModelConfig(name="r1-distill")],
        traces=TracesConfig(
            source="import",
            path=str(real / "thought_anchors_math_cots.jsonl"),
            fields={
                "problem_id": "problem_id",
                "response": "solution",
                "question": "problem",
                "answer": "gt_answer",
                "id_prefix": "thought_anchors_math",
            },
        ),
    )
    run_pipeline(config, stages=["problems", "traces"], progress=False)
    return run_dir


def test_imported_real_traces_give_the_baseline(real_run):
    result, _ = doubt_analysis(real_run, progress=False)
    assert not result.cells and result.baseline_traces == {"r1-distill": 153}
    n, k = result.baseline_counts()
    assert n == 153 * 20 and 0 < k < n  # every real trace has ≥ 20 sentences
    md = (real_run / "report" / "report.md").read_text()
    assert "No graded continuations" in md and "figures/doubt_baseline.png" in md
    assert f"**{k / n:.3f}** ({k} of {n} sentences in 153 traces)" in md


def test_real_traces_baseline_under_both_splitters(real_run):
    """Both splitters run on the 153 real traces and give a baseline in a sane range (the measured numbers
    are in `bench/doubt_baseline_real_traces.py`'s output; the paper's LLM judge gave 0.153)."""
    pytest.importorskip("spacy")
    rates, windows = {}, {}
    for splitter in ("default", "reference"):
        result, _ = doubt_analysis(real_run, splitter=splitter, progress=False, render=False)
        assert result.splitter == splitter and result.baseline_traces == {"r1-distill": 153}
        n, k = result.baseline_counts()
        assert n == 153 * 20 and result.baseline_short == {"r1-distill": 0}  # every trace has ≥ 20 sentences
        rates[splitter] = k / n
        rows = pq.read_table(real_run / "analysis" / "doubt" / "baseline.parquet").to_pylist()
        windows[splitter] = {(r["trace_id"], r["sentence_index"]): r["sentence"] for r in rows}
    assert all(0.05 < rate < 0.3 for rate in rates.values()), rates
    # The windows hold the splitters' own sentences: they differ (spaCy keeps line-broken lines together).
    differ = sum(windows["default"][key] != windows["reference"][key] for key in windows["default"])
    assert differ > 153 and any("\n" in s for s in windows["reference"].values())
    assert not any("\n" in s for s in windows["default"].values())
    traces = {r["id"]: r["text"] for r in RunDir(real_run).table("traces").iter_rows(["id", "text"])}
    trace_id = next(iter(windows["reference"]))[0]
    whole = split_sentences(split_reasoning(traces[trace_id]).reasoning, splitter="reference")
    window = [windows["reference"][(trace_id, i)] for i in range(1, 21)]
    assert any(whole[i : i + 20] == window for i in range(len(whole) - 19))
