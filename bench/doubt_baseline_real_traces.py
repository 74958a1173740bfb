"""The doubt baseline of the 153 real DeepSeek-R1-Distill traces under both sentence splitters.

The traces (``shared/data/real_traces``, see its README) are imported into a temporary run directory by the
pipeline's own ``problems`` and ``traces`` stages, then `recovery.analysis.doubt_curve.analyze_doubt` runs
with the lexical detector, once per splitter (`recovery.doubt.SENTENCE_SPLITTERS`: the project's
``default`` and the authors' ``reference``, spaCy's sentencizer inside blank-line segments). The baseline is
the doubt rate over one random window of 20 consecutive sentences per trace (paper §4.2, which reports
0.153 with its LLM judge); each ``--seeds`` value draws other windows. For context, the rate over every
sentence of every trace's reasoning (no window) is printed too.

Usage: python bench/doubt_baseline_real_traces.py [REAL_TRACES_DIR] [--seeds 0 1 2] [--sentences 20]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from recovery.analysis.doubt_curve import PAPER_BASELINE, DoubtConfig, analyze_doubt
from recovery.doubt import SENTENCE_SPLITTERS, is_doubt, split_sentences
from recovery.run_dir.records import TRACES_TABLE
from recovery.segment import split_reasoning
from recovery.store import RunDir

DEFAULT_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "real_traces"
TRACES_FILE = "thought_anchors_math_cots.jsonl"


def import_real_traces(real_dir: Path, run_dir: Path) -> None:
    """The real traces as a run directory (problems and traces tables), through the pipeline's import."""
    from recovery.pipeline import DatasetConfig, ModelConfig, RunConfig, TracesConfig, run_pipeline

    config = RunConfig(
        run_dir=str(run_dir),
        dataset=DatasetConfig(name="real_traces", path=str(real_dir)),
        models=[ModelConfig(name="r1-distill")],
        traces=TracesConfig(
            source="import",
            path=str(real_dir / TRACES_FILE),
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


def all_sentences_rate(run_dir: Path, splitter: str) -> tuple[int, int]:
    """(sentences, doubtful) over every sentence of every trace's reasoning."""
    n = k = 0
    for row in RunDir(run_dir).table(TRACES_TABLE).iter_rows(["id", "text"]):
        for sentence in split_sentences(split_reasoning(row["text"], record=row["id"]).reasoning, splitter=splitter):
            n += 1
            k += is_doubt(sentence)
    return n, k


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("real_dir", type=Path, nargs="?", default=DEFAULT_DIR)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--sentences", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "real"
        import_real_traces(args.real_dir, run_dir)
        print(
            f"doubt baseline of {args.real_dir / TRACES_FILE}: lexical detector, random {args.sentences}-sentence "
            f"windows (paper, LLM judge: {PAPER_BASELINE})"
        )
        print(
            f"{'splitter':<10} {'seed':>4} {'traces':>6} {'short':>5} {'sentences':>9} {'doubtful':>8} {'rate':>6} {'s':>5}"
        )
        for splitter in SENTENCE_SPLITTERS:
            for seed in args.seeds:
                start = time.perf_counter()
                cfg = DoubtConfig(sentences=args.sentences, seed=seed, splitter=splitter)
                result = analyze_doubt(run_dir, config=cfg, progress=False)
                n, k = result.baseline_counts()
                print(
                    f"{splitter:<10} {seed:>4} {sum(result.baseline_traces.values()):>6} "
                    f"{sum(result.baseline_short.values()):>5} {n:>9} {k:>8} {k / n:>6.3f} "
                    f"{time.perf_counter() - start:>5.1f}"
                )
        print("every sentence of the reasoning (no window):")
        for splitter in SENTENCE_SPLITTERS:
            n, k = all_sentences_rate(run_dir, splitter)
            print(f"{splitter:<10} {'-':>4} {'':>6} {'':>5} {n:>9} {k:>8} {k / n:>6.3f}")


if __name__ == "__main__":
    main()
