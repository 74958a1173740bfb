"""``recovery serve-rewards``: the recovery rewards as an HTTP service, for trainers whose GPU nodes should not
spend their CPUs on grading (extra ``recovery[reward-server]``: FastAPI and uvicorn).

* `recovery.integrations.server.app` — endpoints, request shapes, errors (``/score``, ``/openrlhf``, ``/verl``,
  ``/health``);
* `recovery.integrations.server.pool` — the scoring worker processes (each with its math-verify workers);
* `recovery.integrations.server.limits` — body size and read-time limits (413, 408).

`serve` runs it in the foreground: uvicorn handles SIGINT / SIGTERM by finishing the requests in flight, then
the application's shutdown stops every worker (and their math-verify workers) before the process exits.
Importing this package loads neither FastAPI nor uvicorn.
"""

from __future__ import annotations

from typing import Any

from recovery.configs import ConfigError
from recovery.integrations.core import RewardSettings

__all__ = ["register_serve_command", "serve"]


def serve(config: Any, *, log_level: str = "info") -> None:
    """Serve `create_app(config)` with uvicorn on ``config.host:config.port`` until SIGINT / SIGTERM."""
    import uvicorn

    from recovery.integrations.server.app import create_app  # lazy: loads fastapi

    server = uvicorn.Server(
        uvicorn.Config(
            create_app(config),
            host=config.host,
            port=config.port,
            log_level=log_level,
            lifespan="on",
            timeout_graceful_shutdown=max(5, int(config.time_limit_s) + 5),
        )
    )
    try:
        server.run()
    except KeyboardInterrupt:  # uvicorn re-raises the signal it handled once it has shut down
        pass
    if not server.started:
        raise RuntimeError(f"the reward server did not start on {config.host}:{config.port} (see the log above)")


def register_serve_command(app: Any) -> None:
    """Add ``serve-rewards`` to the Typer ``app``."""
    import typer

    def serve_rewards(
        host: str = typer.Option("127.0.0.1", help="Interface to listen on (0.0.0.0: every interface)."),
        port: int = typer.Option(8000, help="TCP port."),
        workers: int = typer.Option(2, help="Scoring processes (each with its own math-verify worker)."),
        time_limit_s: float = typer.Option(60.0, help="Per request: rows not scored by then are answered null."),
        max_rows: int = typer.Option(8192, help="Rows per request (more: 413)."),
        max_body_mb: float = typer.Option(16.0, help="Request body size limit in MB (more: 413)."),
        max_concurrent: int = typer.Option(8, help="Requests scored at once."),
        max_queue: int = typer.Option(64, help="Requests waiting for a slot (more: 503)."),
        correctness_weight: float = typer.Option(1.0, help="RecoveryReward's correctness weight."),
        doubt_weight: float = typer.Option(0.2, help="RecoveryReward's doubt weight."),
        length_weight: float = typer.Option(0.3, help="RecoveryReward's length-overhead weight."),
        unclosed: str = typer.Option("no_answer", help="Unclosed reasoning: no_answer (default) or grade."),
        unscorable: str = typer.Option("neutral", help="Rows that cannot be scored (openrlhf/verl): neutral, raise."),
        log_level: str = typer.Option("info", help="uvicorn's log level."),
    ) -> None:
        """Serve the recovery rewards over HTTP (FastAPI + uvicorn): /score, /openrlhf (OpenRLHF's
        --remote_rm_url protocol), /verl, /health. Stop with Ctrl-C or SIGTERM; no worker outlives it.

        Example: `recovery serve-rewards --host 0.0.0.0 --port 8000 --workers 8`
        """
        from recovery.integrations.server.app import ServerConfig  # lazy: loads fastapi

        try:
            settings = RewardSettings(
                correctness_weight=correctness_weight,
                doubt_weight=doubt_weight,
                length_weight=length_weight,
                unclosed=unclosed,
                unscorable=unscorable,
            )
            config = ServerConfig(
                host=host,
                port=port,
                workers=workers,
                time_limit_s=time_limit_s,
                max_rows=max_rows,
                max_body_mb=max_body_mb,
                max_concurrent=max_concurrent,
                max_queue=max_queue,
                settings=settings,
            )
        except ValueError as err:  # a bad option: one line, exit 2
            raise ConfigError(f"serve-rewards: {err}") from None
        serve(config, log_level=log_level)

    app.command(name="serve-rewards")(serve_rewards)
