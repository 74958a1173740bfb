"""Dataset-card templates ship inside the wheel: a non-editable install renders the real card, not a generic one."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_an_installed_wheel_renders_the_shipped_card(tmp_path):
    source = tmp_path / "source"
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", str(source), "--no-deps", "--no-build-isolation", "-w", str(wheels)], check=True)
    (wheel,) = wheels.glob("recovery-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True)
    probe = (
        "import re, recovery, recovery.training_data.cards as cards\n"
        "template = cards.load_template('sft')\n"
        "names = set(re.findall(r'\\$\\{(\\w+)\\}', template))\n"
        "print(recovery.__file__)\n"
        "print(cards.render_card('sft', {name: 'X' for name in names}), end='')\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), "HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, cwd=tmp_path, capture_output=True, text=True, check=True
    )
    first, _, card = out.stdout.partition("\n")
    assert first.startswith(str(site))  # the installed copy, not the checkout
    shipped = (ROOT / "src" / "recovery" / "data_cards" / "sft.md").read_text(encoding="utf-8")
    assert card == re.sub(r"\$\{\w+\}", "X", shipped)
