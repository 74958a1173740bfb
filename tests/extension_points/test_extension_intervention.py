"""A new intervention, added as docs/architecture.md says (a class, one `INTERVENTIONS` entry): through the
mini-benchmark on the tiny reasoner, and through `recovery run` (its chains made in worker processes). An
LLM-backed one is refused by the mini-benchmark, with the reason the doc gives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from recovery.interventions.base import Edit, InterventionContext, InterventionSpec
from recovery.interventions.registry import INTERVENTIONS, create
from recovery.run_config import InterventionsConfig, SamplingConfig
from recovery.run_dir import read_aggregates
from recovery.store import RunDir
from recovery.training.minibench import MiniBench, MiniBenchConfig, run_minibench
from recovery.types import Category


@dataclass(frozen=True)
class RepeatStep:
    """Neutral: the step at the cut, written ``times`` times."""

    times: int = 2

    name: ClassVar[str] = "repeat_step"
    category: ClassVar[Category] = Category.NEUTRAL
    needs_generator: ClassVar[bool] = False
    edit_kind: ClassVar[str] = "append"

    def apply(self, ctx: InterventionContext) -> Edit:
        copies = (ctx.prefix_steps[-1],) * (self.times - 1)
        return Edit(ctx.prefix_steps + copies, "\n\n".join(copies))


class AskTheLLM(RepeatStep):
    """An LLM-backed intervention: it would call ``ctx.generator``."""

    name: ClassVar[str] = "ask_the_llm"
    needs_generator: ClassVar[bool] = True


CONFIG = """\
run_dir: runs/repeat
dataset: {name: toy, limit: 4}
models: [{name: tiny-reasoner, backend: hf}]
traces: {sampling: {n: 1, max_new_tokens: 320}}
interventions:
  names: [repeat_step]
  timesteps: [0.5]
  options: {repeat_step: {times: 3}}
continuation: {n: 2, max_new_tokens: 320}
cpu_workers: 2
"""


def test_a_new_intervention_runs_in_the_mini_benchmark(restored, tiny_reasoner):
    restored(INTERVENTIONS)

    INTERVENTIONS["repeat_step"] = InterventionSpec(RepeatStep)

    config = MiniBenchConfig(
        n_problems=2,
        interventions=InterventionsConfig(
            names=["repeat_step"], timesteps=[0.5], options={"repeat_step": {"times": 3}}
        ),
        continuation=SamplingConfig(n=2, max_new_tokens=320),
    )
    bench = MiniBench(config)
    assert {c.intervention for c in bench.chains} == {"repeat_step"}
    assert all(chain.inserted_text.count("\n\n") == 1 for chain in bench.chains)  # two copies: times=3 reached it
    model, tokenizer = tiny_reasoner
    result = run_minibench(model, tokenizer, bench=bench)
    assert [row["intervention"] for row in result.per_intervention] == ["repeat_step"]
    assert result.n_chains == len(bench.chains) and result.clean_accuracy is not None


def test_an_llm_backed_intervention_is_refused_by_the_mini_benchmark(restored):
    restored(INTERVENTIONS)
    INTERVENTIONS["ask_the_llm"] = InterventionSpec(AskTheLLM)
    config = MiniBenchConfig(n_problems=1, interventions=InterventionsConfig(names=["ask_the_llm"], timesteps=[0.5]))
    with pytest.raises(ValueError, match="needs an intervention LLM; inside training use rule-based"):
        MiniBench(config)


def test_a_new_intervention_runs_through_recovery_run(tmp_path, monkeypatch, restored, recovery_cli):
    pytest.importorskip("torch")  # the tiny reasoner answers
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.yaml").write_text(CONFIG, encoding="utf-8")
    restored(INTERVENTIONS)
    INTERVENTIONS["repeat_step"] = InterventionSpec(RepeatStep)

    recovery_cli("run", "config.yaml", "--no-progress")
    rows = read_aggregates(RunDir(tmp_path / "runs" / "repeat"))
    assert {r["intervention"] for r in rows} == {"repeat_step"} and rows[0]["n_chains"] >= 1
    assert "repeat_step" in recovery_cli("interventions")


def test_an_intervention_named_by_its_module_and_class_is_imported_when_used(restored, recovery_cli):
    """The doc's ``"module:Class"`` form, for a class in a module above `recovery.interventions`: imported when
    the entry is first used, listed under its own family (the module's top-level package), built by name."""
    restored(INTERVENTIONS)
    path = f"{RepeatStep.__module__}:RepeatStep"

    INTERVENTIONS["repeat_step"] = InterventionSpec(path)

    spec = INTERVENTIONS["repeat_step"]
    assert spec.cls is RepeatStep and spec.family == RepeatStep.__module__.split(".")[0] != "paper"
    assert create("repeat_step", times=3) == RepeatStep(times=3)
    line = next(line for line in recovery_cli("interventions").splitlines() if "repeat_step" in line)
    cells = [cell.strip().rstrip("…") for cell in line.split("│")[1:-1]]  # a narrow terminal cuts the family
    assert cells[1] == "neutral" and spec.family.startswith(cells[2])
    with pytest.raises(ValueError, match="cannot be imported"):
        _ = InterventionSpec(f"{RepeatStep.__module__}:NoSuchClass").cls
