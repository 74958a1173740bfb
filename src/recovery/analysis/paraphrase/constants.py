"""Names, the paper's reference figures and the verdict vocabulary of the paraphrase-quality check."""

from __future__ import annotations

from collections.abc import Mapping

NAME = "paraphrase"
SECTION_TITLE = "Paraphrase quality"
#: Registry names of the whole-prefix rewrite: the paper's and the toy world's.
PARAPHRASE_INTERVENTIONS: tuple[str, ...] = ("paraphrase", "toy/paraphrase")
#: The paper's Table 14 (GPT-5.1 judge, 100 traces per domain), for comparison in the report.
PAPER_TABLE14: Mapping[str, float] = {"logic": 0.92, "science": 0.98, "math": 0.93}

# Verdicts of one judgment. The rate counts YES over every sampled chain.
YES, NO, UNPARSEABLE, GENERATION_ERROR = "yes", "no", "unparseable", "generation_error"
