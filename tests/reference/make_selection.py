"""Store the authors' trace selection for the fixture of selection_rows.py (run once; see inputs.py).

    python tests/reference/make_selection.py --authors /path/to/RLLM-CoT-Robustness

Writes each model's scored rows to a JSONL file and runs the authors' ``scripts/filter_correct.py`` ``main``
on them as the paper's Math setup calls it (``--require-intersection --require-closing-think
--drop-top-length-fraction 0.02``, the answer cap 1 here); stores the problem ids each model kept, in order.
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
from reference.selection_rows import MODELS, OPTIONS, model_rows  # noqa: E402


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
    payload = {"filter_correct_args": argv[2 * len(MODELS) + 2 :], "kept_problem_ids": kept}
    print(store("selection", command, payload))
    print(json.dumps(kept, indent=1))


if __name__ == "__main__":
    main()
