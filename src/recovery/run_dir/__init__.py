"""The run directory: what the benchmark's stages write and every reader reads back.

::

    RUN_DIR/
      config.json          the manifest: the `RunConfig` the run was created with (resuming checks it)
      weights.json         a fingerprint of each local model's weights (resuming checks it)
      servers.json         the settings probed from each model's server (resuming checks it)
      progress.json        whether the run is finished (`recovery.run_dir.state`)
      problems/ traces/ kept/ chains/ skips/ continuations/ grades/ judge_disagreements/
                           one folder of Parquet shards per table (`recovery.store`)
      clean_accuracy.json  the filter stage's clean accuracy per (model, domain)
      aggregates.json      the aggregate stage's rows per (model, domain, intervention, timestep)
      summary.json         what the last invocation wrote and skipped
      report/              report.md and report.html
      analysis/<name>/     results and the stored report section of each analysis

The door to all of it is `open` (`recovery.run_dir.run`): a `Run` reads the manifest as a `RunConfig`, the
tables as records and rows, and the JSON files, and hands the pipeline's stages each table to write by name
(``run.tables.chains``). Table names stay inside this package: no module outside it names a table.

- `recovery.run_dir.run`: the `Run` and `open`.
- `recovery.run_dir.records`: table names, Arrow schemas, rows ↔ `recovery.types` records.
- `recovery.run_dir.files`: the manifest and the JSON files, written atomically.
- `recovery.run_dir.readers`: skips, verdict counts and ids stored twice, read back from the tables.
- `recovery.run_dir.tallies`: per-chain tallies (K of N, length changes) for aggregation and comparison.
- `recovery.run_dir.reference_lengths`: the columns of the authors' length overhead (``protocol: reference``).
- `recovery.run_dir.weights`: which weights the run measured, checked on resume.
- `recovery.run_dir.writing`: the one door through which a run is written (`writing`: lock, manifest, marks,
  summary) and the manifest's rule for resuming (`check_resumable`).
"""

from recovery.run_dir.files import (
    AGGREGATES_FILE,
    ANALYSIS_DIR,
    CLEAN_ACCURACY_FILE,
    MANIFEST,
    REPORT_DIR,
    SUMMARY_FILE,
    is_run_dir,
    read_aggregates,
    read_clean_accuracy,
    read_manifest,
    run_config_from_manifest,
    write_aggregates,
    write_clean_accuracy,
    write_manifest,
    write_summary,
)
from recovery.run_dir.readers import GENERATION_ERROR, TRANSIENT_SKIPS, grade_verdicts, summary_skips
from recovery.run_dir.run import Run, Tables, open_run
from recovery.run_dir.tallies import ChainTallies, chain_outcomes, chain_tallies, run_think_closers

# ``recovery.run_dir.open(path)``: the door (`open_run` where a module's own ``open`` must stay the builtin).
open = open_run

__all__ = [
    "AGGREGATES_FILE",
    "ANALYSIS_DIR",
    "CLEAN_ACCURACY_FILE",
    "GENERATION_ERROR",
    "MANIFEST",
    "REPORT_DIR",
    "Run",
    "SUMMARY_FILE",
    "Tables",
    "TRANSIENT_SKIPS",
    "ChainTallies",
    "chain_outcomes",
    "chain_tallies",
    "grade_verdicts",
    "is_run_dir",
    "open",
    "open_run",
    "read_aggregates",
    "read_clean_accuracy",
    "read_manifest",
    "run_config_from_manifest",
    "run_think_closers",
    "summary_skips",
    "write_aggregates",
    "write_clean_accuracy",
    "write_manifest",
    "write_summary",
]
