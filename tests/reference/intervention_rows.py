"""The batch the interventions' differential tests feed both codes (`make_interventions.py` and
`test_interventions.py`): the four real traces of `inputs.trace_rows` mixed with small hand-written ones
that reach the authors' edge cases, in the authors' trace schema, as one model's filtered trace file.

The hand-written reasoning has empty steps, steps that start with newlines or an em space, trailing spaces,
a stray ``<think>`` inside the reasoning (the authors read the reasoning from after the last one), a
reasoning of one paragraph (dropped before the batch index is taken, so the items after it move up one
position) and an empty step at the cut. Eleven rows make two of the authors' batches of eight.
"""

from __future__ import annotations

import json
from pathlib import Path

from reference.inputs import INSTRUCTION, MODEL, SHARED, TIMESTEPS, trace_rows

BATCH_SIZE = 8  # scripts/run_pipeline.py --batch-size
# Beyond inputs.TIMESTEPS: t = 1.0 cuts at the trace's last step, where the authors join a hallucinated fact
# after one newline.
EXTRA_TIMESTEPS = (1.0,)
ALL_TIMESTEPS = TIMESTEPS + EXTRA_TIMESTEPS
WIKIPEDIA_FILE = SHARED / "wikipedia_paragraphs" / "wikitext2_test_paragraphs.jsonl"
WIKIPEDIA_ARTICLES = 1000  # scripts/create_interventions.py --wikipedia-pool-size
# A reply that strips to nothing, sent at this timestep as a second pass of every LLM-backed intervention.
EMPTY_REPLY = "  \n\n \n"
EMPTY_REPLY_T = 0.5

_HANDWRITTEN = {
    "edge_blank_steps": "<think>\n\nFirst line.  \n\n\n  Second starts with a newline and spaces.\n\n\n\n"
    "After an empty step.\n\nLast step with a trailing newline\n</think>\nAnswer: \\boxed{3}",
    "edge_stray_tag": "<think>Plan: the tag <think> appears literally.\n\nStep two follows.\n\nStep three.\n\n"
    "Step four ends it.</think>Done: \\boxed{4}",
    "edge_blank_step": "<think>\nAlpha step.\n\n   \n\nBeta step with trailing spaces   \n\nGamma.\n</think>\n\\boxed{1}",
    "edge_em_space": "<think>\nOne.\n\n\u2003Two two, after an em space.\n\nThree three three.\n\nFour.\n</think>\n"
    "\\boxed{4}",
    "edge_two_steps": "<think>Only two.\n\nSteps here, the second a little longer.</think>\\boxed{2}",
    "edge_empty_at_cut": "<think>Short.\n\n\n\nThen a much longer second step with many more characters in it than the "
    "first one has.\n\nAnd a third.</think>\\boxed{5}",
    "short_one_step": "<think>\nJust one paragraph, no blank line anywhere.\n</think>\n\\boxed{2}",
}
# Row order of the file: real traces A-D among the hand-written ones; the one-step trace is the second row.
ORDER = (
    "real:0",
    "short_one_step",
    "real:1",
    "edge_blank_steps",
    "real:2",
    "edge_stray_tag",
    "real:3",
    "edge_blank_step",
    "edge_em_space",
    "edge_two_steps",
    "edge_empty_at_cut",
)


def _handwritten_row(name: str) -> dict:
    problem = f"Hand-written problem {name}: what is the answer?"
    return {
        "record_id": name,
        "id": name,
        "question": f"{problem}\n\n{INSTRUCTION}",
        "raw_question": problem,
        "reference_answer": _HANDWRITTEN[name].rsplit("\\boxed{", 1)[1].split("}", 1)[0],  # its own answer
        "metadata": {},
        "domain": "MATH",
        "model_name": MODEL,
        "answer_content": _HANDWRITTEN[name],
    }


def batch_rows() -> list[dict]:
    """The rows of the batch file, in order (authors' trace schema)."""
    real = trace_rows()
    return [real[int(key[5:])] if key.startswith("real:") else _handwritten_row(key) for key in ORDER]


def write_import_file(path: Path, rows: list[dict] | None = None) -> Path:
    """The rows (default: `batch_rows`) as a file in the real-traces schema of ``shared/data/real_traces``
    (``problem_id``, ``problem``, ``gt_answer``, ``solution`` from ``<think>`` on), for a run that imports them."""
    lines = []
    for row in batch_rows() if rows is None else rows:
        record = {
            "id": row["record_id"],
            "problem_id": row["id"],
            "problem": row["raw_question"],
            "gt_answer": row["reference_answer"],
            "solution": row["answer_content"],
            "level": "",
            "type": "",
            "is_correct": True,
            "answer": row["reference_answer"],
        }
        lines.append(json.dumps(record, ensure_ascii=False))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def wikipedia_texts() -> list[str]:
    """The pool's source texts: the first `WIKIPEDIA_ARTICLES` texts of the WikiText-2 paragraphs file."""
    lines = WIKIPEDIA_FILE.read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["text"] for line in lines if line.strip()][:WIKIPEDIA_ARTICLES]


def item_key(record_id: str, intervention: str, t: float, *, empty_reply: bool = False) -> str:
    """The key of one stored item (our intervention name)."""
    return f"{record_id}|{intervention}|{t}" + ("|empty_reply" if empty_reply else "")
