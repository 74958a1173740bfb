"""Inputs of the differential tests against the authors' reference implementation (issue 29).

The same inputs feed two programs: the ``make_*.py`` scripts beside this file, which run the authors' code
(github.com/ExplainableML/RLLM-CoT-Robustness at `AUTHORS_COMMIT`, a checkout named on their command line,
never copied here) and store what it returned under ``data/``; and the tests, which run this project's
``protocol: reference`` on the same inputs and compare. Everything here is fixed data: real R1-distill
traces from ``../shared/data/real_traces``, one fixed intervention-LLM reply per intervention (written to
exercise what the two codes treat differently: blank lines, labels, surrounding whitespace) and fixed
continuations.
"""

from __future__ import annotations

import json
from pathlib import Path

AUTHORS_REPO = "ExplainableML/RLLM-CoT-Robustness"
AUTHORS_COMMIT = "f3ec89990857e1af739eb2981fc06759f921bd94"
DATA = Path(__file__).parent / "data"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
TRACES_FILE = SHARED / "real_traces" / "thought_anchors_math_cots.jsonl"

# The authors' default reasoning instruction (scripts/generate_traces.py, --reasoning-instruction); their
# stored ``question`` is the problem, a blank line and this instruction.
INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
MODEL = "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B"
TIMESTEPS = (0.1, 0.3, 0.5, 0.7, 0.9)
# Real traces: four closed and correct; one whose reasoning never closes (for the filters, `trace_rows(unclosed=True)`).
TRACE_IDS = ("problem_2370_seed0", "problem_1022_seed0", "problem_6356_seed0", "problem_53_seed0")
UNCLOSED_TRACE_ID = "problem_2940_seed0"

# Our intervention names and the authors' (rllm_robustness/constants.py).
AUTHORS_NAMES = {
    "complete_step": "benign_complete_step",
    "paraphrase": "benign_rewrite_trace",
    "wikipedia_text": "neutral_add_random_text",
    "random_characters": "neutral_insert_random_characters",
    "wrong_continuation": "adversarial_continue_with_wrong_reasoning",
    "hallucinated_fact": "adversarial_insert_wrong_fact",
    "unrelated_cot": "adversarial_continue_unrelated",
}

# One reply per LLM-backed intervention, as the intervention LLM might write it.
LLM_REPLIES = {
    "complete_step": "  Next step: I need to compute the value carefully.\n\nThen I simplify the result.\n",
    "paraphrase": (
        "\nFirst, I read the problem and note what is given.\n\n\n"
        "Then I set up the equation and work through it.\n\n"
        "  Finally I check the arithmetic once more.  \n"
    ),
    "wrong_continuation": "I can see that the two quantities must be equal, so the answer is 0.",
    "hallucinated_fact": "\n\nI remember that every such expression is always divisible by 7.\n\n",
    "unrelated_cot": "Okay, so I need to think about how Roman aqueducts carried water.\n\nThey used gravity.",
}

# Fixed continuations, assigned to chains in order (chain i gets CONTINUATIONS[i % len]), N = 4 each.
CONTINUATIONS = (
    (
        "\n\nWait, let me check that again.\n\nSo the value is 66.\n</think>\n\nThe answer is \\boxed{66}.",
        "Hmm, that seems off. Actually the sum is 12.\n</think>\n\\boxed{12}",
        "Continuing the computation without closing the reasoning",
        "  So we get 4. </think> Final answer: \\boxed{4}  ",
    ),
    (
        "Let me recompute.\n\n2 + 2 = 4.\n</think>\n\n**Answer:** \\boxed{4}",
        "\nWait, no. That is not right.\n\nThe right value is 7.\n</think>\n\\boxed{7}",
        "</think>\\boxed{0}",
        "I think the answer is 66.\n</think>\n\nTherefore the answer is $\\boxed{66}$.",
    ),
)


def trace_rows(*, unclosed: bool = False) -> list[dict]:
    """The fixture traces in the authors' trace schema (scripts/generate_traces.py output rows).

    ``answer_content`` is the model's output: the stored generation from ``<think>`` on (the Thought
    Anchors prompt ends with ``Solution: \\n``, the model then wrote ``<think>\\n...``).
    """
    by_id = {}
    for line in TRACES_FILE.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        by_id[row["id"]] = row
    rows = []
    for trace_id in TRACE_IDS + ((UNCLOSED_TRACE_ID,) if unclosed else ()):
        row = by_id[trace_id]
        solution = row["solution"]
        answer_content = solution[solution.index("<think>") :]
        rows.append(
            {
                "record_id": trace_id,
                "id": row["problem_id"],
                "question": f"{row['problem']}\n\n{INSTRUCTION}",
                "raw_question": row["problem"],
                "reference_answer": row["gt_answer"],
                "metadata": {},
                "domain": "MATH",
                "model_name": MODEL,
                "answer_content": answer_content,
            }
        )
    return rows


def load(piece: str) -> dict:
    """A stored output of the authors' code (``data/<piece>.json``): ``{"command", "commit", ...}``."""
    return json.loads((DATA / f"{piece}.json").read_text(encoding="utf-8"))


def store(piece: str, command: str, payload: dict) -> Path:
    """Write one piece's outputs with the command and commit that produced them."""
    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / f"{piece}.json"
    body = {"command": command, "authors_repo": AUTHORS_REPO, "commit": AUTHORS_COMMIT, **payload}
    path.write_text(json.dumps(body, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    return path
