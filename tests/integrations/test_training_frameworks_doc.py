"""docs/training-frameworks.md says what runs: its Python compiles, each `recovery` command line it shows names
a command and options that exist, and the reward it points verl and OpenRLHF at can be imported."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "training-frameworks.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_python_snippets_compile():
    assert blocks("python")
    for code in blocks("python"):
        compile(code, str(DOC), "exec")


def test_recovery_command_lines_name_real_commands_and_options():
    import typer.main

    from recovery.cli import app

    group = typer.main.get_command(app)
    lines = [line.split("#")[0] for code in blocks("bash") for line in code.splitlines()]
    commands = [shlex.split(line) for line in lines if line.strip().startswith("recovery ")]
    assert {c[1] for c in commands} >= {"export", "serve-rewards"}
    for words in commands:
        command = group.commands[words[1]]
        known = {opt for param in command.params for opt in getattr(param, "opts", [])}
        for word in words[2:]:
            if word.startswith("--"):
                assert word in known, f"{words[1]} has no option {word}"


def test_the_reward_paths_resolve():
    import importlib

    text = DOC.read_text(encoding="utf-8")
    for module in re.findall(r"pkg://([\w.]+)", text):
        assert hasattr(importlib.import_module(module), "compute_score")
    assert "compute_score_batch" in text and "reward_func" in text
    from recovery.integrations import openrlhf, verl

    assert callable(verl.compute_score_batch) and callable(openrlhf.reward_func)
