"""The ``recovery view`` command: check the folders, take the port, read the runs, serve until Ctrl-C.

Everything a user can get wrong is found before the server starts and said in one line by the CLI
(`recovery.configs.ConfigError`): a folder that is not a run directory, a port that is taken. The port is bound
first (``--port 0``: any free one) and handed to uvicorn, so the URL printed is the one that answers.
"""

from __future__ import annotations

import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recovery.configs import ConfigError
from recovery.report.viewer_links import VIEWER_HOST as LOCALHOST
from recovery.report.viewer_links import VIEWER_PORT as DEFAULT_PORT  # fixed: the report's links reach it
from recovery.run_dir import MANIFEST, is_run_dir


@dataclass(frozen=True)
class ViewerConfig:
    """What ``recovery view`` serves and where: ``run_dir``, optionally ``compare_dir`` (the run after training),
    on ``host:port`` (loopback unless told otherwise)."""

    run_dir: Path
    compare_dir: Path | None = None
    host: str = LOCALHOST
    port: int = DEFAULT_PORT

    def check(self) -> None:
        """`ConfigError` in one line when a folder is not a run directory."""
        for path in (self.run_dir, self.compare_dir):
            if path is not None and not is_run_dir(path):
                what = "does not exist" if not Path(path).exists() else f"has no {MANIFEST}"
                raise ConfigError(f"{path} is not a run directory ({what}); name a folder written by `recovery run`")


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``; `ConfigError` in one line when it cannot be had."""
    try:
        return socket.create_server((host, port), reuse_port=False)
    except OSError as err:
        raise ConfigError(f"cannot listen on {host}:{port}: {err.strerror or err}; pass another --port") from None


def serve(config: ViewerConfig, *, log_level: str = "warning", out: Any = None) -> None:
    """Serve the viewer of ``config`` until Ctrl-C (or SIGTERM), printing its URL to ``out`` (stdout)."""
    config.check()
    try:
        import uvicorn

        from recovery.viewer.app import Viewer, create_app  # lazy: loads fastapi
    except ImportError as err:
        raise ConfigError(f"recovery view needs FastAPI and uvicorn ({err}): pip install 'recovery[viewer]'") from None
    out = out or sys.stdout
    sock = bind(config.host, config.port)
    host, port = sock.getsockname()[:2]
    started = time.perf_counter()
    print(f"reading {config.run_dir}" + (f" and {config.compare_dir}" if config.compare_dir else "") + " …", file=out)
    viewer = Viewer.load(config.run_dir, config.compare_dir)
    print(f"read in {time.perf_counter() - started:.1f} s", file=out)
    print(f"viewer: http://{host}:{port}/cells  (Ctrl-C stops it)", file=out, flush=True)
    server = uvicorn.Server(uvicorn.Config(create_app(viewer), log_level=log_level, lifespan="off"))
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn re-raises the signal it handled once it has shut down
        pass
    finally:
        sock.close()
    print("viewer stopped", file=out, flush=True)


def register_view_command(app: Any) -> None:
    """Add ``recovery view`` to the command line ``app`` (a typer app)."""
    import typer

    @app.command("view")
    def view(
        run_dir: Path = typer.Argument(..., help="A run directory written by `recovery run`."),
        compare: Path | None = typer.Option(None, "--compare", help="A second run (e.g. after training) to compare."),
        port: int = typer.Option(DEFAULT_PORT, help="The port to listen on (0: any free one)."),
        host: str = typer.Option(LOCALHOST, help="The address to listen on; only this machine by default."),
    ) -> None:
        """Browse RUN_DIR in a web browser: its cells, their chains with filters, one chain with its intervention
        and continuations, and with --compare the chains whose outcome changed in a second run.

        Example: `recovery view runs/demo/base --compare runs/demo/sft`
        """
        serve(ViewerConfig(run_dir, compare, host, port))
