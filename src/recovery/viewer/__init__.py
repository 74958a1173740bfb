"""``recovery view RUN_DIR [--compare OTHER_RUN_DIR]``: a local web app to read a run chain by chain, from a cell
of the report down to one continuation's doubt (extra ``recovery[viewer]``: FastAPI and uvicorn).

* `recovery.viewer.chains` — the run's chains as arrays: filters, sorting, paging;
* `recovery.viewer.cells` — the index, one row per cell with the report's own figures;
* `recovery.viewer.detail` — one chain: problem, original trace and cut, intervention, continuations;
* `recovery.viewer.doubt` — the doubt sentences, by the detector the run used;
* `recovery.viewer.compare` — the same chains in two runs and which changed outcome;
* `recovery.viewer.pages` — the HTML; `recovery.viewer.app` — the routes;
* `recovery.viewer.command` — the command: checks the folder, loads, serves until Ctrl-C.

Importing this package loads neither FastAPI nor uvicorn.
"""

from recovery.viewer.command import DEFAULT_PORT, ViewerConfig, register_view_command, serve

__all__ = ["DEFAULT_PORT", "ViewerConfig", "register_view_command", "serve"]
