"""Plug-ins from a shell: a throwaway distribution (a ``*.dist-info`` with an entry point in the
``recovery.plugins`` group, and its module) written into a folder put on ``PYTHONPATH`` of a subprocess — what
``pip install`` leaves in site-packages — is seen by the ``recovery`` command of this interpreter: its
intervention is listed under its own family and used by ``recovery run``, its analysis is a ``recovery
analyze`` command, its reward is found by a GRPO recipe's ``reward_funcs``. A plug-in that fails to import is
one line naming it, and the built-ins and the other plug-ins still work."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from recovery.run_dir import read_aggregates
from recovery.store import RunDir

SRC = Path(__file__).resolve().parents[2] / "src"

PLUGIN = '''\
"""A plug-in adding an intervention, a reward and an analysis, as a user's package would."""

from dataclasses import dataclass
from typing import ClassVar

from recovery.analysis.commands import ANALYSES
from recovery.interventions.base import Edit, InterventionSpec
from recovery.interventions.registry import register
from recovery.rewards import REWARDS, RewardSpec
from recovery.types import Category


@dataclass(frozen=True)
class EchoStep:
    """Neutral: the step at the cut, written twice."""

    name: ClassVar[str] = "echo_step"
    category: ClassVar[Category] = Category.NEUTRAL
    needs_generator: ClassVar[bool] = False
    edit_kind: ClassVar[str] = "append"

    def apply(self, ctx):
        step = ctx.prefix_steps[-1]
        return Edit(ctx.prefix_steps + (step,), step)


def always_half(completions, **kwargs):
    return [0.5 for _ in completions]


def add_hello(analyze_app):
    @analyze_app.command("plugin-hello")
    def plugin_hello():
        """Say hello from the plug-in."""
        print("hello from the plug-in")


register("echo_step", InterventionSpec(EchoStep))
REWARDS["always_half"] = RewardSpec(always_half)
ANALYSES["plugin-hello"] = add_hello
'''

CONFIG = """\
run_dir: runs/echo
dataset: {name: toy, limit: 2}
models: [{name: tiny-reasoner, backend: hf}]
traces: {sampling: {n: 1, max_new_tokens: 320}}
interventions: {names: [echo_step], timesteps: [0.5]}
continuation: {n: 1, max_new_tokens: 320}
cpu_workers: 2
"""


def install(site: Path, distribution: str, module: str, source: str) -> None:
    """What ``pip install`` of a distribution declaring ``[recovery.plugins]`` leaves in ``site``."""
    info = site / f"{distribution.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[recovery.plugins]\n{module} = {module}\n", encoding="utf-8")
    (site / f"{module}.py").write_text(source, encoding="utf-8")


@pytest.fixture
def site(tmp_path) -> Path:
    """A folder holding the plug-in distribution ``recovery-echo`` (module ``recovery_echo``)."""
    install(tmp_path / "site", "recovery-echo", "recovery_echo", PLUGIN)
    return tmp_path / "site"


def shell(site: Path, *args: str, cwd: Path | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    """``python -m recovery ARGS`` of this interpreter with ``site`` on its path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(site)]), "COLUMNS": "250"}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd or site
    )


def row_of(listing: str, name: str) -> list[str]:
    """The cells of ``name``'s row in the ``recovery interventions`` table."""
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in listing.splitlines() if "│" in line]
    return next(row for row in rows if row[0] == name)


def test_a_plugin_is_listed_under_its_own_family_and_loads_only_when_a_registry_is_read(site):
    out = shell(site, "-m", "recovery", "interventions")
    assert out.returncode == 0 and not out.stderr, out.stderr
    assert row_of(out.stdout, "echo_step")[:3] == ["echo_step", "neutral", "recovery-echo"]
    assert row_of(out.stdout, "paraphrase")[2] == "paper" and row_of(out.stdout, "toy/paraphrase")[2] == "toy"

    code = (
        "import sys, recovery.cli, recovery.pipeline, recovery.toy.interventions; "
        "print('recovery_echo' in sys.modules); "
        "from recovery.interventions import INTERVENTIONS; INTERVENTIONS.names(); "
        "print('recovery_echo' in sys.modules)"
    )
    assert shell(site, "-c", code).stdout.split() == ["False", "True"]  # importing loads no plug-in; reading does


def test_recovery_run_and_analyze_use_a_plugin_from_the_shell(site, tmp_path):
    pytest.importorskip("torch")  # the tiny reasoner answers
    (tmp_path / "config.yaml").write_text(CONFIG, encoding="utf-8")
    out = shell(site, "-m", "recovery", "run", "config.yaml", "--no-progress", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = read_aggregates(RunDir(tmp_path / "runs" / "echo"))
    assert {r["intervention"] for r in rows} == {"echo_step"} and rows[0]["n_chains"] >= 1

    out = shell(site, "-m", "recovery", "analyze", "plugin-hello")
    assert out.returncode == 0 and out.stdout.strip() == "hello from the plug-in", out.stdout + out.stderr
    assert "plugin-hello" in shell(site, "-m", "recovery", "analyze", "--help").stdout


def test_a_plugin_that_fails_to_import_is_one_line_naming_it(site, tmp_path):
    install(site, "recovery-broken", "recovery_broken", 'raise RuntimeError("boom")\n')
    failure = "plug-in 'recovery_broken' (recovery_broken, from recovery-broken) failed to load: RuntimeError: boom"

    out = shell(site, "-m", "recovery", "interventions")
    assert out.returncode == 0 and out.stderr.splitlines() == [failure], out.stderr
    assert row_of(out.stdout, "echo_step")[2] == "recovery-echo" and row_of(out.stdout, "paraphrase")[2] == "paper"

    (tmp_path / "config.yaml").write_text(CONFIG.replace("echo_step", "broken_step"), encoding="utf-8")
    out = shell(site, "-m", "recovery", "run", "config.yaml", cwd=tmp_path)
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    assert out.returncode == 2 and len(lines) == 2, out.stdout + out.stderr
    assert lines[0] == failure and "unknown intervention 'broken_step'" in lines[1]
    assert not (tmp_path / "runs").exists(), "nothing was written"


def test_a_plugins_reward_is_found_by_a_grpo_recipes_reward_funcs(site):
    code = textwrap.dedent(
        """
        from recovery.training.configs import GRPOScriptArguments
        from recovery.training.grpo import check_rewards, reward_functions

        args = GRPOScriptArguments(reward_funcs=["correctness", "always_half"])
        check_rewards(args)
        correctness, half = reward_functions(args)
        print(type(correctness).__name__, half(completions=["a", "b"]))
        """
    )
    out = shell(site, "-c", code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "CorrectnessReward [0.5, 0.5]"
