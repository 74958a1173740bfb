"""A new protocol style, added as docs/architecture.md says (one module: a style that overrides the parts it
changes, here the user turn and the length measure; one `STYLES` registration), run through the toy pipeline:
every request carries its user turn and rendering, and the tallies, the aggregates and the report measure length
its way; mixed in per part, it changes that part alone; a misspelt style fails in one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest

from recording import Recording
from recovery.interventions import create
from recovery.pipeline import run_pipeline
from recovery.pipeline.validate import load_run_config
from recovery.plan import LengthMeasure, plan_for
from recovery.plan.styles.authors import WholeResponseLength
from recovery.plan.styles.project import ProjectStyle
from recovery.prompt_building import ProjectPrompts
from recovery.protocol import STYLES
from recovery.run_dir import open_run
from recovery.run_dir.records import CHAINS_TABLE, CONTINUATIONS_TABLE
from recovery.run_dir.tallies import chain_tallies


class LabPrompts(ProjectPrompts):
    """The project's prompts with the lab's user turn."""

    def user_turn(self, problem):
        return f"Lab question: {problem.question}"


class ContinuationLength(LengthMeasure):
    """A continuation's characters against its trace's original reasoning, in percent."""

    label = "lab"
    caption = "the continuation's characters against the original reasoning's (the lab's measure)"

    def whole_pct(self, lengths, index, text, project_pct):
        original = lengths.chains["original_reasoning_chars"][index]
        return 100.0 * (pc.utf8_length(text).to_numpy(zero_copy_only=False) - original) / original


class LabStyle(ProjectStyle):
    """The project's protocol with the lab's prompts and length measure."""

    name = "lab"

    def prompts(self, template):
        return LabPrompts(template)

    def length(self):
        return ContinuationLength()


CONFIG = """\
run_dir: runs/lab
protocol: lab
dataset: {name: toy, limit: 3}
models: [{name: tiny-reasoner, backend: hf}]
traces:
  sampling: {n: 1, max_new_tokens: 320}
  filters: {require_correct: false, require_closed: false, drop_longest_fraction: 0.0}
interventions: {names: [toy/random_characters], timesteps: [0.5]}
continuation: {n: 2, max_new_tokens: 48, seed: 3}
cpu_workers: 1
"""


@pytest.fixture
def lab_registered(restored):
    restored(STYLES)

    STYLES.register("lab", LabStyle())


def test_a_new_style_runs_the_toy_with_its_prompts_and_its_length(tmp_path, monkeypatch, hf_factory, lab_registered):
    monkeypatch.chdir(tmp_path)
    Path("config.yaml").write_text(CONFIG, encoding="utf-8")
    config = load_run_config("config.yaml")
    sent: list = []
    run_pipeline(config, make_generator=lambda m: Recording(hf_factory(m), sent), progress=False)

    assert sent and all(r.messages[-1].content.startswith("Lab question: ") for r in sent)
    assert all(isinstance(r.rendering, LabPrompts) for r in sent)
    run = open_run(config.run_dir)
    assert run.config.protocol == "lab" and isinstance(run.plan.length, ContinuationLength)

    # The tallies, and so the aggregates and the report, measure length the lab's way, chain by chain.
    original = {r["id"]: r["original_reasoning_chars"] for r in run.table(CHAINS_TABLE).iter_rows()}
    lengths: dict[str, list[int]] = {}
    for row in run.table(CONTINUATIONS_TABLE).iter_rows(["chain_id", "text"]):
        lengths.setdefault(row["chain_id"], []).append(len(row["text"] or ""))
    tallies = chain_tallies(run)
    assert len(tallies) > 0
    for i, chain_id in enumerate(tallies.ids.to_pylist()):
        mine = np.mean([100.0 * (n - original[chain_id]) / original[chain_id] for n in lengths[chain_id]])
        assert tallies.whole_pct[i] == pytest.approx(mine)
    (cell,) = run.aggregates()  # one model, domain, intervention and timestep
    assert cell["whole_pct_mean"] == pytest.approx(np.mean(tallies.whole_pct))
    assert ContinuationLength.caption in (tmp_path / "runs" / "lab" / "report" / "report.md").read_text()


def test_a_new_style_mixes_in_per_part(tmp_path, monkeypatch, lab_registered):
    monkeypatch.chdir(tmp_path)
    Path("config.yaml").write_text(CONFIG, encoding="utf-8")
    lab = load_run_config("config.yaml")
    plan = plan_for(load_run_config("config.yaml", {"protocol": "reference", "protocol_parts": {"length": "lab"}}))
    assert isinstance(plan.length, ContinuationLength) and plan.label.endswith("; length: lab)")
    assert not isinstance(plan.prompts, LabPrompts) and plan.max_total_tokens == 32768
    plan = plan_for(load_run_config("config.yaml", {"protocol_parts": {"length": "reference"}}))
    assert isinstance(plan.prompts, LabPrompts) and isinstance(plan.length, WholeResponseLength)
    assert plan_for(lab).label == "lab" and isinstance(plan_for(lab).length, ContinuationLength)
    # Its name reaches the interventions' registry too: the paper's seven built under it take its rules.
    assert create("random_characters", protocol="lab").rules is plan_for(lab).interventions


def test_a_misspelt_style_fails_in_one_line_naming_the_known_ones(tmp_path, monkeypatch, lab_registered):
    monkeypatch.chdir(tmp_path)
    Path("config.yaml").write_text(CONFIG.replace("protocol: lab", "protocol: labb"), encoding="utf-8")
    with pytest.raises(
        Exception, match=r"unknown protocol style 'labb'; known protocol styles: .*lab.*did you mean"
    ) as err:
        load_run_config("config.yaml")
    assert "\n" not in str(err.value)
