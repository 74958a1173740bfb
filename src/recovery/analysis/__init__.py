"""The paper's analyses beyond robustness scores (§4.2, App. A–E), each usable on any run or model.

Every analysis computes its numbers, writes its raw results under ``RUN_DIR/analysis/<name>/`` and stores
the report `Section` it produced there too (`recovery.report.sections_store`). ``recovery report RUN_DIR``
then shows every stored analysis after the standard sections, so an analysis run later (or on another
machine) still lands in the same report. The CLI entry point is ``recovery analyze <name> …``
(`recovery.analysis.commands`).
"""
