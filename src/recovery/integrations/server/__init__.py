"""``recovery serve-rewards``: the recovery rewards as an HTTP service, for trainers whose GPU nodes should not
spend their CPUs on grading (extra ``recovery[reward-server]``: FastAPI and uvicorn).

* `recovery.integrations.server.app` — endpoints, answers, errors (``/score``, ``/openrlhf``, ``/verl``,
  ``/health``); `recovery.integrations.server.shapes` — what each endpoint accepts;
* `recovery.integrations.server.batcher` — the rows of every request in one queue, scored in chunks, retried
  when a worker fails;
* `recovery.integrations.server.pool` — the scoring worker processes (each with its math-verify workers);
* `recovery.integrations.server.limits` — body size, header and body read-time limits (413, 408).

`serve` runs it in the foreground: uvicorn handles SIGINT / SIGTERM by finishing the requests in flight, then
the application's shutdown stops every worker (and their math-verify workers) before the process exits.
Importing this package loads neither FastAPI nor uvicorn.
"""

from __future__ import annotations

from typing import Any

from recovery.configs import ConfigError
from recovery.integrations.core import RewardSettings
from recovery.integrations.server.config import ServerConfig
from recovery.integrations.server.limits import header_timeout_protocol

__all__ = ["register_serve_command", "serve", "uvicorn_config"]


def uvicorn_config(config: Any, *, log_level: str = "info") -> Any:
    """The ``uvicorn.Config`` that serves `create_app(config)`: its header timeout, a listen backlog for a
    trainer's burst of connections, a graceful shutdown long enough to finish the requests in flight."""
    import uvicorn

    from recovery.integrations.server.app import create_app  # lazy: loads fastapi

    return uvicorn.Config(
        create_app(config),
        host=config.host,
        port=config.port,
        http=header_timeout_protocol(config.header_timeout_s),
        backlog=4096,
        log_level=log_level,
        lifespan="on",
        timeout_graceful_shutdown=max(5, int(config.time_limit_s) + 5),
    )


def serve(config: Any, *, log_level: str = "info") -> None:
    """Serve `create_app(config)` with uvicorn on ``config.host:config.port`` until SIGINT / SIGTERM."""
    import uvicorn

    server = uvicorn.Server(uvicorn_config(config, log_level=log_level))
    try:
        server.run()
    except KeyboardInterrupt:  # uvicorn re-raises the signal it handled once it has shut down
        pass
    if not server.started:
        raise RuntimeError(f"the reward server did not start on {config.host}:{config.port} (see the log above)")


def register_serve_command(app: Any) -> None:
    """Add ``serve-rewards`` to the Typer ``app``."""
    import typer

    server, scoring = ServerConfig(), RewardSettings()  # each option's default is its setting's

    def serve_rewards(
        host: str = typer.Option(server.host, help="Interface to listen on (0.0.0.0: every interface)."),
        port: int = typer.Option(server.port, help="TCP port."),
        workers: int = typer.Option(server.workers, help="Scoring processes (each with its own math-verify worker)."),
        time_limit_s: float = typer.Option(
            server.time_limit_s, help="Per request: rows not scored by then make it a 503."
        ),
        max_rows: int = typer.Option(server.max_rows, help="Rows per request (more: 413)."),
        max_body_mb: float = typer.Option(server.max_body_mb, help="Request body size limit in MB (more: 413)."),
        max_pending_rows: int = typer.Option(
            server.max_pending_rows, help="Rows admitted and not answered yet (more: 503)."
        ),
        chunk_rows: int = typer.Option(
            server.chunk_rows, help="Rows a scoring process gets at a time (from any requests)."
        ),
        reward: str = typer.Option(scoring.reward, help="The reward, by its name in recovery.rewards.registry."),
        reward_options: str = typer.Option("{}", help="Its options, a JSON object (as a recipe's reward_options)."),
        correctness_weight: float = typer.Option(
            scoring.correctness_weight, help="RecoveryReward's correctness weight."
        ),
        doubt_weight: float = typer.Option(scoring.doubt_weight, help="RecoveryReward's doubt weight."),
        length_weight: float = typer.Option(scoring.length_weight, help="RecoveryReward's length-overhead weight."),
        unclosed: str = typer.Option(scoring.unclosed, help="Unclosed reasoning: no_answer (default) or grade."),
        unscorable: str = typer.Option(
            scoring.unscorable, help="Rows that cannot be scored (openrlhf/verl): neutral, raise."
        ),
        log_level: str = typer.Option("info", help="uvicorn's log level."),
    ) -> None:
        """Serve the recovery rewards (or any reward of the registry: --reward) over HTTP (FastAPI + uvicorn):
        /score, /openrlhf (OpenRLHF's --remote_rm_url protocol), /verl, /health. Stop with Ctrl-C or SIGTERM;
        no worker outlives it.

        Example: `recovery serve-rewards --host 0.0.0.0 --port 8000 --workers 8`
        """
        try:
            settings = RewardSettings(
                reward=reward,
                reward_options=reward_options,
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
                max_pending_rows=max_pending_rows,
                chunk_rows=chunk_rows,
                settings=settings,
            )
        except ValueError as err:  # a bad option: one line, exit 2
            raise ConfigError(f"serve-rewards: {err}") from None
        serve(config, log_level=log_level)

    app.command(name="serve-rewards")(serve_rewards)
