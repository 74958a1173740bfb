"""What the extension-point tests share: registries put back as they were after a test added to them (another
test in the session must not see a dataset, reward or backend it did not add), and the CLI run in this
process (where the test's registrations are)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping

import pytest


@pytest.fixture
def restored() -> Iterator[Callable[[MutableMapping], None]]:
    """``restored(registry)``: the registry dict gets back its entries of now when the test ends."""
    saved: list[tuple[MutableMapping, dict]] = []

    def keep(registry: MutableMapping) -> None:
        saved.append((registry, dict(registry)))

    yield keep
    for registry, entries in reversed(saved):
        registry.clear()
        registry.update(entries)


@pytest.fixture
def recovery_cli() -> Callable[..., str]:
    """``recovery_cli("run", "config.yaml", ...)``: the `recovery` command in this process; its output, after
    checking it exited 0."""
    from typer.testing import CliRunner

    from recovery.cli import app

    def invoke(*args: str) -> str:
        result = CliRunner().invoke(app, list(args))
        assert result.exit_code == 0, result.output
        return result.output

    return invoke
