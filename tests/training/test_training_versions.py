"""The version floors: the training code's `REQUIRED_VERSIONS` are the floors pyproject.toml declares (the ones CI
installs in its floors environment through .ci/floors.py), and a stage refuses anything older."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

import pytest

from recovery.training.common import REQUIRED_VERSIONS, check_versions

ROOT = Path(__file__).resolve().parents[2]


def floors_script():
    spec = importlib.util.spec_from_file_location("ci_floors", ROOT / ".ci" / "floors.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_required_versions_are_the_declared_floors():
    pins = floors_script().pins(list(REQUIRED_VERSIONS))
    assert pins == [f"{name}=={floor}" for name, (floor, _) in REQUIRED_VERSIONS.items()]


def test_floors_script_refuses_ambiguous_or_missing_floors(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\ndependencies = ["a>=1", "b"]\n[project.optional-dependencies]\nx = ["a>=2", "c[y]>=3,<4"]\n'
    )
    pins = floors_script().pins
    assert pins(["c"], pyproject) == ["c==3"]
    with pytest.raises(SystemExit, match="different floors"):
        pins(["a"], pyproject)
    with pytest.raises(SystemExit, match="no >= floor"):
        pins(["b"], pyproject)
    with pytest.raises(SystemExit, match="not declared"):
        pins(["d"], pyproject)


def test_installed_versions_pass():
    check_versions()


def test_older_versions_are_refused_with_the_reason(monkeypatch):
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.29.1" if name == "trl" else real(name))
    with pytest.raises(RuntimeError, match=r"trl 0\.29\.1 is older than 1\.0 .*log_metric"):
        check_versions()
