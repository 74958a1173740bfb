"""BIG-Bench Mistake (Tyen et al., 2024): can a model find the first wrong step of a chain of thought?

The paper (§3, Table 1; App. A.3, Table 11) gives reasoning models a question with a step-by-step solution
written by PaLM 2 and asks for the location of the first logical mistake, zero-shot; accuracy is reported
per task. This package does the same with any model the project's backends run:

* `load_bbm` reads the benchmark from local ``<task>.jsonl`` files (as in github.com/WHGTyen/BIG-Bench-Mistake)
  or from a Hub copy named by the caller (``datasets.load_dataset``, one config per task or one table with a
  task column);
* `build_prompt` numbers the steps and asks for "Step N" or "No mistake" (the paper does not print its
  prompt, so this one is ours);
* `parse_mistake_answer` reads the reply (after ``</think>`` when the model reasoned) and `score_answer`
  compares it with the human annotation; an unreadable reply counts as wrong, with its reason kept;
* `run_bbm` asks every configured model about every item (resumable: answered items are skipped), stores
  one Parquet row per answer under ``OUT/analysis/bbm/answers`` and writes a report section with accuracy
  per model × task (Table 11 layout), counts and 95 % Wilson intervals.

Modules, one job each: `data` (items, loading), `prompt` (the prompt, reading replies), `scoring`
(outcomes, accuracy, Wilson intervals), `config` (dataclasses, YAML, decoding), `answers` (stored rows and
their resume keys), `run` (generation, resume, reports), `report` (the section), `paper` (the paper's
numbers). Everything public is re-exported here, so ``recovery.analysis.bbm.<name>`` keeps working.
"""

from recovery.analysis.bbm.answers import ANSWERS, NAME, answer_key, answer_row, answers_table, read_answers
from recovery.analysis.bbm.config import BBMConfig, BBMDataConfig, BBMSamplingConfig, load_bbm_config, sampling_for
from recovery.analysis.bbm.data import BBM_TASKS, BBMItem, bbm_item, load_bbm
from recovery.analysis.bbm.paper import PAPER_TABLE11, TASK_TITLES, paper_row_name
from recovery.analysis.bbm.prompt import (
    FINAL_MARKERS,
    PROMPT_VERSION,
    ParsedAnswer,
    build_prompt,
    final_answer_part,
    parse_mistake_answer,
)
from recovery.analysis.bbm.report import accuracy_figure, bbm_section
from recovery.analysis.bbm.run import BBMResult, run_bbm, store_in_run
from recovery.analysis.bbm.scoring import (
    CORRECT,
    FALSE_ALARM,
    GENERATION_ERROR,
    MISSED_MISTAKE,
    OUT_OF_RANGE,
    OUTCOMES,
    UNPARSEABLE,
    WRONG_STEP,
    Z95,
    TaskAccuracy,
    accuracy_table,
    score_answer,
    wilson_interval,
)

__all__ = [
    "ANSWERS",
    "BBMConfig",
    "BBMDataConfig",
    "BBMItem",
    "BBMResult",
    "BBMSamplingConfig",
    "BBM_TASKS",
    "CORRECT",
    "FALSE_ALARM",
    "FINAL_MARKERS",
    "GENERATION_ERROR",
    "MISSED_MISTAKE",
    "NAME",
    "OUTCOMES",
    "OUT_OF_RANGE",
    "PAPER_TABLE11",
    "PROMPT_VERSION",
    "ParsedAnswer",
    "TASK_TITLES",
    "TaskAccuracy",
    "UNPARSEABLE",
    "WRONG_STEP",
    "Z95",
    "accuracy_figure",
    "accuracy_table",
    "answer_key",
    "answer_row",
    "answers_table",
    "bbm_item",
    "bbm_section",
    "build_prompt",
    "final_answer_part",
    "load_bbm",
    "load_bbm_config",
    "paper_row_name",
    "parse_mistake_answer",
    "read_answers",
    "run_bbm",
    "sampling_for",
    "score_answer",
    "store_in_run",
    "wilson_interval",
]
