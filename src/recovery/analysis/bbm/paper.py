"""The paper's BIG-Bench Mistake numbers (Table 11) and task titles, shown beside a run's for comparison."""

from __future__ import annotations

from collections.abc import Mapping

#: Column titles of the paper's Tables 1 and 11.
TASK_TITLES: Mapping[str, str] = {
    "dyck_languages": "Dyck",
    "logical_deduction": "Logical Ded.",
    "multistep_arithmetic": "Multistep Arith.",
    "tracking_shuffled_objects": "Track Shuffled Obj.",
    "word_sorting": "Word Sorting",
}
#: The paper's Table 11 (accuracy in %, task order of `BBM_TASKS`), for comparison in the report.
PAPER_TABLE11: Mapping[str, tuple[float, float, float, float, float]] = {
    "R1-Distill-Qwen-1.5B": (9.4, 7.3, 55.3, 51.6, 11.8),
    "R1-Distill-Qwen-7B": (19.6, 17.5, 88.2, 72.8, 16.1),
    "R1-Distill-Llama-8B": (10.3, 14.0, 70.8, 54.7, 13.8),
    "Llama-Nemotron-8B": (18.5, 5.2, 26.8, 67.7, 1.4),
    "R1-Distill-Qwen-14B": (39.7, 30.1, 86.8, 87.8, 25.9),
    "Phi-4-reasoning (14B)": (50.7, 63.5, 90.5, 89.6, 53.8),
    "Phi-4-reasoning-plus (14B)": (56.5, 65.6, 91.4, 92.0, 59.2),
    "QwQ-32B": (66.7, 66.9, 90.3, 94.6, 53.2),
    "R1-Distill-Qwen-32B": (42.4, 31.4, 89.4, 86.3, 30.7),
    "EXAONE-Deep-32B": (52.3, 54.3, 89.5, 94.5, 54.8),
    "R1-Distill-Llama-70B": (35.8, 25.0, 78.3, 86.8, 29.2),
    "Qwen3-30B-A3B-Thinking": (38.1, 76.8, 76.4, 83.8, 50.8),
    "Qwen3-30B-A3B-Instruct": (15.2, 57.2, 76.0, 82.9, 2.8),
    "GPT-4-Turbo": (15.3, 21.3, 38.3, 39.3, 36.3),
    "GPT-4": (17.1, 40.7, 44.0, 62.3, 35.0),
    "gpt-oss-20b": (59.3, 72.0, 91.0, 93.3, 45.0),
    "gpt-oss-120b": (73.5, 78.3, 90.7, 92.0, 50.7),
    "o3": (88.7, 82.7, 91.0, 92.0, 64.3),
}
# Our model names (registry / Hub basenames) → the paper's row names.
_PAPER_ALIASES: Mapping[str, str] = {
    "deepseek-r1-distill-qwen-1.5b": "R1-Distill-Qwen-1.5B",
    "deepseek-r1-distill-qwen-7b": "R1-Distill-Qwen-7B",
    "deepseek-r1-distill-llama-8b": "R1-Distill-Llama-8B",
    "llama-3.1-nemotron-nano-8b-v1": "Llama-Nemotron-8B",
    "deepseek-r1-distill-qwen-14b": "R1-Distill-Qwen-14B",
    "phi-4-reasoning": "Phi-4-reasoning (14B)",
    "phi-4-reasoning-plus": "Phi-4-reasoning-plus (14B)",
    "deepseek-r1-distill-qwen-32b": "R1-Distill-Qwen-32B",
    "deepseek-r1-distill-llama-70b": "R1-Distill-Llama-70B",
    "qwen3-30b-a3b-thinking-2507": "Qwen3-30B-A3B-Thinking",
    "qwen3-30b-a3b-instruct-2507": "Qwen3-30B-A3B-Instruct",
}


def paper_row_name(model: str) -> str | None:
    """The paper's Table 11 row for a model name or path (``deepseek-ai/DeepSeek-R1-Distill-Qwen-7B`` →
    ``R1-Distill-Qwen-7B``), or None when the paper did not evaluate it."""
    base = model.rstrip("/").rsplit("/", 1)[-1]
    if base in PAPER_TABLE11:
        return base
    return _PAPER_ALIASES.get(base.lower())
