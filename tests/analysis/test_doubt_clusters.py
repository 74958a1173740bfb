"""Doubt-phrase clustering (paper App. B, E.1) with the real offline embedding model, UMAP and HDBSCAN.

No LLM can run here, so the cluster summaries are written by a scripted text generator that records the
prompt it was given and answers in the requested format.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from recovery.analysis.doubt_clusters import (
    ClusterConfig,
    DoubtSentence,
    cluster_points,
    embed_sentences,
    group_clusters,
    load_doubt_sentences,
    parse_summaries,
    reduce_dimensions,
    run_doubt_clusters,
    sample_sentences,
    summary_messages,
)

pytest.importorskip("sentence_transformers")
pytest.importorskip("umap")

NEGATIONS = [
    "Wait, no.",
    "Wait, no, no.",
    "No, wait.",
    "Wait, no, that's wrong.",
    "Wait no.",
    "Hmm, wait, no.",
    "Wait, wait, no.",
    "No, no, wait.",
    "Wait, no!",
    "Wait, no, hold on.",
]
BACK_ON_TRACK = [
    "Let me get back on track.",
    "Okay, back on track.",
    "Let me refocus on the problem.",
    "Back to the original problem.",
    "Let me get back to the problem.",
    "Alright, I need to get back on track.",
    "Let me return to the question.",
    "Getting back on track now.",
    "Let me focus on the problem again.",
    "Back to the problem at hand.",
]


@pytest.fixture(scope="module")
def embedder():
    from recovery.analysis.doubt_clusters import load_embedder

    return load_embedder(device="cpu")


def _sentences(texts, intervention="x"):
    return [DoubtSentence(f"c{i:03d}", 1, t, intervention=intervention) for i, t in enumerate(texts)]


def test_two_obvious_groups_become_two_clusters(embedder):
    sentences = _sentences(NEGATIONS + BACK_ON_TRACK)
    vectors = embed_sentences([s.sentence for s in sentences], embedder)
    assert vectors.shape == (20, 384)
    points, note = reduce_dimensions(vectors, dims=50, seed=0)
    # 20 points: UMAP keeps 18 dimensions (fewer components than points − 1) and says why.
    assert points.shape == (20, 18) and "only 20 sentences" in note
    labels, strengths = cluster_points(points, min_cluster_size=4)
    clusters, noise = group_clusters(labels, sentences, strengths, examples=3)
    assert noise == 0 and [c.size for c in clusters] == [10, 10]
    groups = [{sentences[i].sentence for i in c.members} for c in clusters]
    assert sorted(groups, key=lambda g: "Wait, no." in g) == [set(BACK_ON_TRACK), set(NEGATIONS)]
    assert all(len(c.examples) == 3 and set(c.examples) <= groups[k] for k, c in enumerate(clusters))
    # Seeded: the same input gives the same projection, hence the same clusters.
    again, _ = reduce_dimensions(vectors, dims=50, seed=0)
    assert (again == points).all()


def test_group_clusters_orders_by_size_and_picks_frequent_examples():
    sentences = _sentences(["a", "b", "b", "c", "d", "d", "d", "e"])
    labels = [7, 7, 7, -1, 3, 3, 3, 3]  # HDBSCAN's numbers are arbitrary; ranks follow size
    clusters, noise = group_clusters(labels, sentences, examples=2)
    assert noise == 1
    assert [(c.rank, c.size, c.members) for c in clusters] == [(1, 4, (4, 5, 6, 7)), (2, 3, (0, 1, 2))]
    assert clusters[0].examples == ("d", "e") and clusters[1].examples == ("b", "a")


def test_sampling_is_seeded_and_capped():
    sentences = _sentences([f"s{i}" for i in range(50)])
    a = sample_sentences(sentences, 10, seed=0)
    assert len(a) == 10 and a == sample_sentences(sentences, 10, seed=0)
    assert a != sample_sentences(sentences, 10, seed=1)
    assert [s.continuation_id for s in a] == sorted(s.continuation_id for s in a)  # input order kept
    assert sample_sentences(sentences, 100, seed=0) == sentences


def test_summary_prompt_follows_appendix_e1_and_replies_are_parsed():
    sentences = _sentences([f"Wait, no {i}." for i in range(14)] + ["Back on track."] * 3 + ["Back to it."])
    clusters, _ = group_clusters([0] * 14 + [1] * 4, sentences)
    messages = summary_messages(clusters, sentences, samples=10, seed=0)
    user = messages[1].content
    # Largest first; 10 of the 14 distinct sentences; duplicates shown once.
    assert user.index("Cluster 1 (14 sentences)") < user.index("Cluster 2 (4 sentences)")
    block1 = user.split("Cluster 2")[0]
    assert sum(line.startswith("- Wait, no") for line in block1.splitlines()) == 10
    assert user.count("- Back on track.") == 1 and "- Back to it." in user
    assert summary_messages(clusters, sentences, samples=10, seed=0) == messages
    assert parse_summaries(
        "Here you go:\nCluster 2: Gets back on track.\nCluster 1 - Abrupt negation\nCluster 9: x", [1, 2]
    ) == {1: "Abrupt negation", 2: "Gets back on track."}


# ------------------------------------------------------------------------------------------ run directory


class ScriptedSummariser:
    """Stands in for the summarising LLM: records the prompt and labels clusters 1 and 2 (not 3+)."""

    def __init__(self) -> None:
        self.calls = []

    def __call__(self, messages, decoding):
        self.calls.append((messages, decoding))
        return "Cluster 1: Redirects to the problem.\nCluster 2: Abrupt negation."


@pytest.fixture()
def run_dir(tmp_path):
    """A real (bare) run directory: config.json and the problems table of a toy run."""
    from recovery.pipeline import DatasetConfig, RunConfig, run_pipeline

    path = tmp_path / "run"
    run_pipeline(
        RunConfig(run_dir=str(path), dataset=DatasetConfig(name="toy", limit=2)), stages=["problems"], progress=False
    )
    return path


def _write_doubt_table(run_dir, rows):
    from recovery.analysis.doubt_curve import SENTENCES_SCHEMA

    path = run_dir / "analysis" / "doubt" / "sentences.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=SENTENCES_SCHEMA), path)


def _doubt_rows():
    rows = []
    # One more "back on track" sentence than negations, so the ranks are fixed: 1 = back on track.
    texts = [(t, "toy/wrong_continuation") for t in NEGATIONS] + [
        (t, "toy/unrelated_cot") for t in BACK_ON_TRACK + ["Let me get back on track now."]
    ]
    for i, (text, intervention) in enumerate(texts):
        for detector, doubt in (("lexical", True), ("llm:judge", True)):
            rows.append(
                {
                    "continuation_id": f"k{i:02d}",
                    "chain_id": f"ch{i}",
                    "model": "m",
                    "intervention": intervention,
                    "target_t": 0.5,
                    "sentence_index": 1,
                    "sentence": text,
                    "doubt": doubt,
                    "detector": detector,
                    "recovered": True,
                }
            )
        rows.append({**rows[-1], "sentence_index": 2, "sentence": "So x = 4.", "doubt": False})
    return rows


def test_run_clusters_the_doubt_tables_sentences_and_reports_them(run_dir, embedder):
    from recovery.analysis.cli_probes import rerender
    from recovery.report.sections_store import load_section

    _write_doubt_table(run_dir, _doubt_rows())
    summariser = ScriptedSummariser()
    cfg = ClusterConfig(min_cluster_size=4, seed=0, progress=False)
    result = run_doubt_clusters(run_dir, cfg, embedder=embedder, summarizer=summariser)
    # Only doubtful rows of one detector (the non-lexical one, as the paper's judge): 21 sentences.
    assert (result.n_found, result.n_clustered) == (21, 21)
    assert "llm:judge" in result.source
    assert [c.size for c in result.clusters] == [11, 10] and result.noise == 0
    assert [c.summary for c in result.clusters] == ["Redirects to the problem.", "Abrupt negation."]
    assert result.clusters[0].interventions == (("toy/unrelated_cot", 11),)
    ((messages, decoding),) = summariser.calls
    assert decoding.temperature == 0.0 and "Cluster 2 (10 sentences)" in messages[1].content

    out = run_dir / "analysis" / "doubt_clusters"
    stored = pq.read_table(out / "clusters.parquet").to_pylist()
    assert [(r["cluster"], r["size"], r["summary"]) for r in stored] == [
        (1, 11, "Redirects to the problem."),
        (2, 10, "Abrupt negation."),
    ]
    sentences = pq.read_table(out / "sentences.parquet").to_pylist()
    assert len(sentences) == 21 and {r["cluster"] for r in sentences} == {1, 2}
    meta = json.loads((out / "clusters.json").read_text())
    assert meta["umap_dims"] == 19 and meta["n_clusters"] == 2

    section = load_section(run_dir, "doubt_clusters")
    assert section.title == "Doubt phrases"
    table = section.tables[0]
    assert table.columns[-1] == "summary" and [r[1] for r in table.rows] == [11, 10]
    assert "noise: 0" in table.title and "19 dimensions instead of 50" in section.markdown
    assert "all-MiniLM-L6-v2" in section.markdown

    # Same input, same seed → the same bytes.
    before = (out / "sentences.parquet").read_bytes(), (out / "clusters.parquet").read_bytes()
    run_doubt_clusters(run_dir, cfg, embedder=embedder, summarizer=ScriptedSummariser())
    assert ((out / "sentences.parquet").read_bytes(), (out / "clusters.parquet").read_bytes()) == before

    md = (rerender(run_dir).parent / "report.md").read_text()
    assert "## Doubt phrases" in md and "Abrupt negation." in md
    assert all(f"“{e}”" in md for c in result.clusters for e in c.examples)


def test_a_detector_can_be_chosen_and_bad_tables_are_named(run_dir):
    _write_doubt_table(run_dir, _doubt_rows())
    found, source = load_doubt_sentences(run_dir, detector="lexical")
    assert len(found) == 21 and "`lexical`" in source
    with pytest.raises(ValueError, match=r"detector 'nope'.*llm:judge"):
        load_doubt_sentences(run_dir, detector="nope")
    path = run_dir / "analysis" / "doubt" / "sentences.parquet"
    pq.write_table(pa.table({"sentence": ["Wait, no."]}), path)
    with pytest.raises(ValueError, match=r"sentences\.parquet: missing column\(s\) \['doubt'\]"):
        load_doubt_sentences(run_dir)


def test_without_a_doubt_table_the_lexical_detector_reads_the_continuations(run_dir):
    from recovery.run_dir import records
    from recovery.store import RunDir
    from recovery.types import Continuation, Intervened
    from run_rows import continuation_row

    run = RunDir(run_dir)
    chain = Intervened(
        trace_id="t1",
        problem_id="p1",
        model="m",
        intervention="toy/wrong_continuation",
        category="adversarial",
        target_t=0.5,
        actual_t=0.5,
        cut_index=1,
        n_steps=4,
        prefix="A\n\nB",
        inserted_text="B",
        original_prefix_chars=3,
        original_reasoning_chars=9,
    )
    with run.table("chains").writer(records.CHAINS) as w:
        w.add(records.chain_row(chain))
    texts = [
        "\n\nWait, no. So 5 + 3 = 8. Hmm, let me check. Yes.\n</think>\n\nWait, the answer is 8.",  # doubt after </think> is not reasoning
        "So 1. So 2. So 3. Hold on, that is sentence four.",  # with window=3 the doubt is out of reach
        "",
    ]
    with run.table("continuations").writer(records.CONTINUATIONS) as w:
        for i, text in enumerate(texts):
            w.add(continuation_row(Continuation(chain.id, i, text), "p1"))
        w.add(continuation_row(Continuation("missing-chain", 0, "Actually, no."), "p1"))
    from collections import Counter

    skips = Counter()
    found, source = load_doubt_sentences(run_dir, window=3, skips=skips)
    assert "lexical detector" in source
    assert skips == {"empty_continuation": 1, "continuation_without_chain": 1}
    got = sorted((s.sentence, s.sentence_index, s.intervention) for s in found)
    assert got == [
        ("Actually, no.", 1, ""),
        ("Hmm, let me check.", 3, "toy/wrong_continuation"),
        ("Wait, no.", 1, "toy/wrong_continuation"),
    ]


def test_too_few_sentences_is_a_counted_skip_with_a_section(run_dir):
    from recovery.report.sections_store import load_section

    _write_doubt_table(run_dir, _doubt_rows()[:6])  # two sentences × two detectors (+ non-doubt rows)
    result = run_doubt_clusters(run_dir, ClusterConfig(progress=False), embedder=object())
    assert result.clusters == [] and result.skips == {"too_few_sentences_to_cluster": 1}
    assert "Too few doubtful sentences" in load_section(run_dir, "doubt_clusters").markdown


def test_cli_names_a_directory_without_doubt_data(tmp_path):
    from typer.testing import CliRunner

    from recovery.cli import app

    result = CliRunner().invoke(app, ["analyze", "doubt-clusters", str(tmp_path / "nowhere"), "--no-progress"])
    assert result.exit_code == 2 and "nowhere" in result.output and "continuations" in result.output


def test_a_run_without_continuations_clusters_its_baseline_windows(run_dir):
    # E.g. imported real traces: the doubt analysis labelled random windows of the original traces only.
    from recovery.analysis.doubt_clusters.sentences import load_doubt_sentences

    _write_doubt_table(run_dir, [])  # no post-intervention sentences
    baseline = pa.Table.from_pylist(
        [
            {
                "trace_id": f"t{i}",
                "model": "m",
                "window_start": 0,
                "sentence_index": 1,
                "sentence": text,
                "doubt": text != "So x = 4.",
                "detector": "lexical",
            }
            for i, text in enumerate(["Wait, no.", "So x = 4.", "Hold on, that is wrong."])
        ]
    )
    pq.write_table(baseline, run_dir / "analysis" / "doubt" / "baseline.parquet")
    rows, source = load_doubt_sentences(run_dir)
    assert [(r.continuation_id, r.sentence) for r in rows] == [("t0", "Wait, no."), ("t2", "Hold on, that is wrong.")]
    assert "baseline.parquet" in source and "no continuations" in source
