"""Where a run's report links into the run viewer (`recovery view RUN_DIR`, `recovery.viewer`): the viewer's
default address and the URL of one cell's chains. Kept here, below both, so the report's links and the viewer's
own routes are one definition."""

from __future__ import annotations

from urllib.parse import urlencode

VIEWER_HOST = "127.0.0.1"
VIEWER_PORT = 8765


def cell_query(model: str, domain: str, intervention: str, target_t: float) -> dict[str, str]:
    """The query of a cell's chains in the viewer (``/chains?model=…&domain=…&intervention=…&t=…``)."""
    return {"model": str(model), "domain": str(domain), "intervention": str(intervention), "t": f"{float(target_t):g}"}


def cell_url(model: str, domain: str, intervention: str, target_t: float) -> str:
    """The full URL of a cell's chains in a viewer running at its default address."""
    query = urlencode(cell_query(model, domain, intervention, target_t))
    return f"http://{VIEWER_HOST}:{VIEWER_PORT}/chains?{query}"


def how_to_view(run_dir: str) -> str:
    """The sentence a report says about its links into the viewer (Markdown)."""
    return (
        f"Each cell links to its chains in the run viewer, which must be running: start it with "
        f"`recovery view {run_dir}` (it listens on {VIEWER_HOST}:{VIEWER_PORT})."
    )
