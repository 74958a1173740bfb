"""The viewer's web application (FastAPI): one route per view, each a shareable URL.

::

    /cells                          the index: one row per cell, each linking to its chains
    /chains?model=…&domain=…&intervention=…&category=…&t=…&outcome=…&doubt=…&verdict=…&q=…&sort=…&order=…&page=…
    /chain/<chain id>               one chain
    /compare?direction=improved|worsened&…   (with --compare) the chains whose outcome changed, same filters
    /compare/<chain id>             one chain of the first run beside its partner in the second

Everything is read from the run directories through `recovery.viewer.chains` and friends; no file is served, so no
URL reaches outside them. An unknown chain, filter, value or page is a 404 page naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from recovery.run_dir import open_run
from recovery.viewer import pages
from recovery.viewer.cells import RunCells, run_cells
from recovery.viewer.chains import LABELS, OUTCOMES, ChainQuery, NotFound, RunChains
from recovery.viewer.compare import DIRECTIONS, RunPair
from recovery.viewer.detail import chain_view
from recovery.viewer.doubt import RunDoubt


@dataclass
class LoadedRun:
    """One run as the viewer holds it: its chains, its doubt flags and its cells (read once, at start)."""

    label: str
    chains: RunChains
    doubt: RunDoubt
    cells: RunCells

    @classmethod
    def load(cls, path: str | Path, label: str | None = None) -> LoadedRun:
        run = open_run(path)
        chains = RunChains(run)
        return cls(label or str(run.path), chains, RunDoubt(run, chains), run_cells(chains))


@dataclass
class Viewer:
    """What the application serves: a run, and optionally a second one to compare it with."""

    run: LoadedRun
    other: LoadedRun | None = None
    pair: RunPair | None = None

    @classmethod
    def load(cls, run_dir: str | Path, compare_dir: str | Path | None = None) -> Viewer:
        """Read ``run_dir`` (and ``compare_dir``), each labelled by its folder's name (its path when both share one)."""
        if compare_dir is None:
            return cls(LoadedRun.load(run_dir))
        same = Path(run_dir).resolve().name == Path(compare_dir).resolve().name
        run = LoadedRun.load(run_dir, None if same else Path(run_dir).resolve().name)
        other = LoadedRun.load(compare_dir, None if same else Path(compare_dir).resolve().name)
        return cls(run, other, RunPair.of(run.chains, other.chains, (run.label, other.label)))


def _choices(chains: RunChains) -> dict[str, list[str]]:
    """The values each filter of the chains' form offers."""
    return {
        **{name: list(chains.values[name]) for name in LABELS},
        "t": [f"{t:g}" for t in np.unique(chains.target_t)],
        "outcome": list(OUTCOMES),
        "doubt": ["yes", "no"],
        "verdict": list(chains.verdicts),
    }


def create_app(viewer: Viewer) -> FastAPI:
    """The application serving ``viewer``."""
    app = FastAPI(title="recovery viewer", docs_url=None, redoc_url=None, openapi_url=None)
    loaded, compare = viewer.run, viewer.pair is not None

    @app.exception_handler(NotFound)
    async def _not_found(request: Request, err: NotFound) -> HTMLResponse:
        return HTMLResponse(pages.not_found(str(err)), status_code=404)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, err: StarletteHTTPException) -> HTMLResponse:
        message = f"no page {request.url.path!r}" if err.status_code == 404 else str(err.detail)
        return HTMLResponse(pages.not_found(message), status_code=err.status_code)

    @app.get("/")
    def index() -> RedirectResponse:
        return RedirectResponse("/cells")

    @app.get("/cells", response_class=HTMLResponse)
    def cells() -> str:
        return pages.cells_page(loaded.label, loaded.cells, compare=compare)

    @app.get("/chains", response_class=HTMLResponse)
    def chains(request: Request) -> str:
        query, given = ChainQuery.from_params(request.query_params)
        found = loaded.chains.page(query, loaded.doubt.chain_flags)
        shown = {k: v for k, v in given.items() if k not in ("sort", "order", "page", "size")}
        title = "Chains of " + (", ".join(f"{k}={v}" for k, v in shown.items()) or "the run")
        return pages.chains_page(title, found, given, _choices(loaded.chains), compare=compare)

    @app.get("/chain/{chain_id}", response_class=HTMLResponse)
    def chain(chain_id: str) -> str:
        i = loaded.chains.index_of(chain_id)
        paired = viewer.pair is not None and bool((viewer.pair.index_before == i).any())
        link = f"/compare/{chain_id}" if paired else ""
        return pages.chain_page(
            chain_view(loaded.chains, loaded.doubt, i), loaded.doubt.detector, compare_link=link, compare=compare
        )

    @app.get("/compare", response_class=HTMLResponse)
    def compare_list(request: Request) -> str:
        pair = _pair()
        query, given = ChainQuery.from_params(request.query_params, ["direction"])
        direction = given.get("direction", "improved")
        found = pair.page(direction, loaded.chains.matching(query, loaded.doubt.chain_flags), query.page, query.size)
        counts = {d: len(pair.changed(d)) for d in DIRECTIONS}
        form = pages.filter_form(
            "/compare", given, _choices(loaded.chains), hidden={"direction": direction}, sorting=False
        )
        return pages.compare_list_page(pair.labels, found, given, direction, counts, pair.note, form)

    @app.get("/compare/{chain_id}", response_class=HTMLResponse)
    def compare_chain(chain_id: str) -> str:
        pair = _pair()
        b, a = pair.partner(chain_id)
        other = viewer.other
        assert other is not None
        return pages.compare_chain_page(
            pair.labels,
            chain_view(loaded.chains, loaded.doubt, b),
            chain_view(other.chains, other.doubt, a),
            (loaded.doubt.detector, other.doubt.detector),
        )

    def _pair() -> RunPair:
        if viewer.pair is None:
            raise NotFound("no run to compare with: start the viewer with --compare OTHER_RUN_DIR")
        return viewer.pair

    return app
