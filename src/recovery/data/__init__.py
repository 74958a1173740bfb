"""Datasets of the paper's three domains, trace import, and the selection filters (paper §3.2).

* Problems: `load_bbh` (Logic), `load_scibench` and `load_jeebench` (Science), `load_numina_olympiads`
  (Math), or by name through `load_problems` (``"bbh"``, ``"bbh/dyck_languages"``, ``"scibench"``,
  ``"jeebench/numeric"``, ``"numina_olympiads"``, ``"real_traces"`` …). Each reads local files when given
  ``path=`` and its Hugging Face Hub copy otherwise (a `HubCopy`: repository, split, revision, and a
  ``loader`` replacing ``datasets.load_dataset``, imported only then; `load_problems` takes them as the flat
  options ``hub_id=``, ``split=``, ``revision=``, ``loader=``). Ids are stable (``bbh/<task>/<index>``, ``scibench/<book>/<problemid>``,
  ``jeebench/<year>/p<paper>/<index>``, ``numina_olympiads/<hash of the problem>``).
* Traces: `import_traces` (JSONL / JSON / Parquet / Hub / rows, with a `TraceFields` column mapping and
  prompt stripping) and `load_real_traces` for ``shared/data/real_traces``.
* Filters (`recovery.data.filters`): correct original answer, closing think tag, drop the longest 2 % per
  model, keep problems every model solved, at most N problems per answer; the authors' order of them and the
  problem draw (`recovery.data.reference_selection`); the problems a reference model solved in a
  GeneralThoughts-style source (`recovery.data.general_thoughts`).

Bad rows are counted in a `Skips` by reason, never fatal (unless ``strict=True``).
"""

from recovery.data.bbh import BBH_ANSWER_TYPES, PAPER_BBH_TASKS, load_bbh
from recovery.data.filters import (
    FilterResult,
    answer_key,
    cap_per_answer,
    drop_longest,
    filter_closed,
    filter_correct,
    keep_solved_by_all,
    select_original_traces,
)
from recovery.data.jeebench import NUMERIC_TYPES, load_jeebench
from recovery.data.numina import load_numina_olympiads
from recovery.data.registry import DATASETS, dataset_names, load_problems
from recovery.data.scibench import SCIBENCH_BOOKS, load_scibench
from recovery.data.skips import Skips
from recovery.data.sources import DataError, HubCopy, RowError
from recovery.data.traces import TraceFields, TraceImport, import_traces, load_real_traces

__all__ = [
    "BBH_ANSWER_TYPES",
    "DATASETS",
    "NUMERIC_TYPES",
    "PAPER_BBH_TASKS",
    "SCIBENCH_BOOKS",
    "DataError",
    "FilterResult",
    "HubCopy",
    "RowError",
    "Skips",
    "TraceFields",
    "TraceImport",
    "answer_key",
    "cap_per_answer",
    "dataset_names",
    "drop_longest",
    "filter_closed",
    "filter_correct",
    "import_traces",
    "keep_solved_by_all",
    "load_bbh",
    "load_jeebench",
    "load_numina_olympiads",
    "load_problems",
    "load_real_traces",
    "load_scibench",
    "select_original_traces",
]
