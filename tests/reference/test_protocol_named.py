"""Every report and export names the protocol a run followed (issue 29): ``default``, or ``reference`` with
the authors' commit. A default run's tables and files keep their bytes; the report gains one metadata line.
"""

from __future__ import annotations

import json

import pytest

from recovery.pipeline.aggregate import aggregate_run
from recovery.plan import protocol_label
from recovery.plan.styles.authors import REFERENCE_LENGTH
from recovery.report.run_report import run_report_data, write_run_report
from recovery.run_dir import open_run
from recovery.training_data.export import ExportConfig, export_run
from reference.metrics_run import build_run

REFERENCE = protocol_label("reference")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("named")
    out = {}
    for style in ("reference", "default"):
        run = build_run(root / style, style)
        aggregate_run(run, n_boot=20, seed=0)
        out[style] = run
    return out


def test_the_report_names_the_protocol_and_the_length_measure(runs):
    assert REFERENCE.startswith("reference (ExplainableML/RLLM-CoT-Robustness@f3ec899")
    for style, label in (("reference", REFERENCE), ("default", "default")):
        run = runs[style]
        config = open_run(run.path).config
        data = run_report_data(run, config, [])
        assert data.meta["protocol"] == label and data.length.label == style
        html = write_run_report(run, config, [])
        markdown = (html.parent / "report.md").read_text(encoding="utf-8")
        assert label in markdown
        assert (REFERENCE_LENGTH in markdown) == (style == "reference")


def test_exports_and_their_cards_name_the_protocol(runs, tmp_path):
    for style, label in (("reference", REFERENCE), ("default", "default")):
        out = tmp_path / style
        result = export_run(runs[style].path, out, ExportConfig(kinds=["chains"], save_to_disk=False))
        assert result.protocol == label
        assert json.loads((out / "export.json").read_text(encoding="utf-8"))["protocol"] == label
        assert f"| protocol | {label} |" in (out / "chains" / "README.md").read_text(encoding="utf-8")
