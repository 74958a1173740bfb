"""Store the authors' trace selection for the fixture of selection_rows.py (run once; see inputs.py).

    python tests/reference/make_selection.py --authors /path/to/RLLM-CoT-Robustness

Writes each model's scored rows to a JSONL file and runs the authors' ``scripts/filter_correct.py`` ``main``
on them as the paper's Math setup calls it (``--require-intersection --require-closing-think
--drop-top-length-fraction 0.02``, the answer cap 1 here); stores the problem ids each model kept, in order.

Issue 35 adds two pieces: the tag cases of `selection_rows.tag_case_rows` (another family's tags inside the
text) through the same ``main`` with ``--require-closing-think`` alone, and the selection judge: their
``scripts/judge_answers.py`` ``main`` in ``--mode single`` on every row, its runner replaced by
`RecordingJudge`, which answers as their mock judge would and records each prompt it was sent.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shlex
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1]))  # tests/, as pytest puts it

from reference.inputs import store  # noqa: E402
from reference.make_metrics import run_main, write_jsonl  # noqa: E402
from reference.selection_rows import MODELS, OPTIONS, model_rows, tag_case_rows  # noqa: E402


class RecordingJudge:
    """Stands in for their runner in judge_answers.py: "Correct" when the reference answer is in the extract
    (their mock runner's rule), else "Incorrect"; records (system prompt, prompt, reply) per call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []

    def generate(self, prompts, *, system_prompts="", model_name=None, decoding=None, **_):
        out = []
        for prompt in prompts:
            reference = prompt.split("Reference Answer:\n", 1)[1].split("\n\nAnswer Content (extract):\n", 1)[0]
            extract = prompt.split("\n\nAnswer Content (extract):\n", 1)[1]
            reply = "Correct" if reference.strip() and reference.strip() in extract else "Incorrect"
            self.calls.append((system_prompts, prompt, reply))
            out.append([reply])
        return out

    def unload_model(self) -> None:
        pass


def read_ids(path: Path, key: str) -> list[str]:
    return [json.loads(line)[key] for line in path.read_text(encoding="utf-8").splitlines()]


def authors_tag_selection(filter_correct, tmp: Path) -> dict[str, list[str]]:
    """The tag cases each model kept under ``--require-closing-think`` alone (their closure test decides)."""
    kept = {}
    for number, (model, rows) in enumerate(tag_case_rows().items()):
        source, out = write_jsonl(tmp / f"tags{number}.jsonl", rows), tmp / f"tags_out{number}.jsonl"
        run_main(filter_correct, ["--inputs", str(source), "--outputs", str(out), "--require-closing-think"], None)
        kept[model] = read_ids(out, "id")
    return kept


def authors_selection_judge(authors: Path, tmp: Path) -> list[dict]:
    """Their judge_answers.py ``main``, ``--mode single``, on every row of every model (the selection rows, then
    the tag cases): per row the system prompt, the prompt and the reply."""
    spec = importlib.util.spec_from_file_location("authors_judge_answers", authors / "scripts" / "judge_answers.py")
    judge_answers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(judge_answers)
    runner = RecordingJudge()
    rows = [row for rows in model_rows().values() for row in rows]
    rows += [row for rows in tag_case_rows().values() for row in rows]
    source, out = write_jsonl(tmp / "judge_in.jsonl", rows), tmp / "judge_out.jsonl"
    argv = ["--input", str(source), "--output", str(out), "--backend", "mock", "--mode", "single"]
    run_main(judge_answers, argv, runner)
    assert len(runner.calls) == len(rows)
    return [
        {"model": row["model_name"], "problem_id": row["id"], "system": system, "prompt": prompt, "reply": reply}
        for row, (system, prompt, reply) in zip(rows, runner.calls, strict=True)
    ]


def authors_filter_correct(authors: Path):
    """Their ``scripts/filter_correct.py`` as a module (it puts their checkout on sys.path itself)."""
    spec = importlib.util.spec_from_file_location("authors_filter_correct", authors / "scripts" / "filter_correct.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--authors", required=True, type=Path)
    args = parser.parse_args()
    command = "python tests/reference/make_selection.py " + shlex.join(["--authors", str(args.authors)])
    filter_correct = authors_filter_correct(args.authors.resolve())
    rows = model_rows()
    with tempfile.TemporaryDirectory() as tmp:
        inputs = [Path(tmp) / f"in{i}.jsonl" for i in range(len(MODELS))]
        outputs = [Path(tmp) / f"out{i}.jsonl" for i in range(len(MODELS))]
        for path, model in zip(inputs, MODELS):
            path.write_text("".join(json.dumps(row) + "\n" for row in rows[model]), encoding="utf-8")
        argv = ["--inputs", *map(str, inputs), "--outputs", *map(str, outputs)]
        argv += ["--require-intersection", "--require-closing-think"]
        argv += ["--drop-top-length-fraction", str(OPTIONS["drop_top_length_fraction"])]
        argv += ["--max-per-reference-answer", str(OPTIONS["max_per_reference_answer"])]
        sys.argv = ["filter_correct.py", *argv]
        filter_correct.main()
        kept = {
            model: [json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines()]
            for path, model in zip(outputs, MODELS)
        }
        tag_kept = authors_tag_selection(filter_correct, Path(tmp))
        judged = authors_selection_judge(args.authors.resolve(), Path(tmp))
    payload = {
        "filter_correct_args": argv[2 * len(MODELS) + 2 :],
        "kept_problem_ids": kept,
        "tag_cases_kept": tag_kept,
        "single_judge": judged,
    }
    print(store("selection", command, payload))
    print(json.dumps(kept, indent=1))


if __name__ == "__main__":
    main()
