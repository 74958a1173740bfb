"""Does the paraphrase intervention keep the reasoning's meaning? An LLM judge says (paper App. D.4, Table 14).

The paper gave GPT-5.1 the problem, the original reasoning and the paraphrased one, asked whether both
contain logically equivalent reasoning steps, and reported the share judged equivalent on 100 random
traces per domain. Here, for a pipeline run directory:

* `paraphrase_items` collects the chains of the paraphrase intervention (``paraphrase``; the toy world's
  ``toy/paraphrase`` too) with the original prefix (the trace's steps up to the cut) and the paraphrased
  one (the chain's inserted text); chains that cannot be rebuilt are counted with a reason;
* `sample_per_domain` draws up to ``per_domain`` of them per domain, seeded;
* the judge (any `ModelConfig`, greedy) answers Yes/No to `judge_messages`; `parse_equivalence_reply`
  reads the reply (after ``</think>``), and an unreadable reply is counted, never guessed;
* `run_paraphrase_check` stores one row per judgment under ``RUN_DIR/analysis/paraphrase/judgments``
  (resumable), and the "Paraphrase quality" section with the equivalence rate per domain and its 95 %
  Wilson interval, then re-renders the run's report.
"""

from __future__ import annotations

from recovery.analysis.paraphrase.check import ParaphraseResult, run_paraphrase_check
from recovery.analysis.paraphrase.constants import (
    GENERATION_ERROR,
    NAME,
    NO,
    PAPER_TABLE14,
    PARAPHRASE_INTERVENTIONS,
    SECTION_TITLE,
    UNPARSEABLE,
    YES,
)
from recovery.analysis.paraphrase.items import ParaphraseItem, paraphrase_items, sample_per_domain
from recovery.analysis.paraphrase.judge import (
    JUDGE_PROMPT_VERSION,
    JUDGE_SYSTEM,
    JUDGE_USER,
    JUDGMENTS,
    ParaphraseCheckConfig,
    judge_messages,
    judgment_key,
    judgments_table,
    load_paraphrase_config,
    parse_equivalence_reply,
)
from recovery.analysis.paraphrase.rates import EquivalenceRate, equivalence_rates
from recovery.analysis.paraphrase.section import paraphrase_section

__all__ = [
    "GENERATION_ERROR",
    "JUDGE_PROMPT_VERSION",
    "JUDGE_SYSTEM",
    "JUDGE_USER",
    "JUDGMENTS",
    "NAME",
    "NO",
    "PAPER_TABLE14",
    "PARAPHRASE_INTERVENTIONS",
    "SECTION_TITLE",
    "UNPARSEABLE",
    "YES",
    "EquivalenceRate",
    "ParaphraseCheckConfig",
    "ParaphraseItem",
    "ParaphraseResult",
    "equivalence_rates",
    "judge_messages",
    "judgment_key",
    "judgments_table",
    "load_paraphrase_config",
    "paraphrase_items",
    "paraphrase_section",
    "parse_equivalence_reply",
    "run_paraphrase_check",
    "sample_per_domain",
]
