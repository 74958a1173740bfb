"""The `recovery` command line: help with examples, clear errors for bad input, listing commands."""

from typer.testing import CliRunner

from recovery.cli import app

runner = CliRunner()


def test_help_lists_commands_with_examples():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("run", "report", "demo", "interventions", "continuations"):
        assert command in result.output
    run_help = runner.invoke(app, ["run", "--help"])
    assert "recovery run eval/logic.yaml" in run_help.output


def test_missing_config_is_a_clear_error(tmp_path):
    result = runner.invoke(app, ["run", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert "config file not found" in result.output


def test_unknown_key_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("run_dir: x\ndataset: {name: toy}\ninterventions: {nmaes: [paraphrase]}\n")
    result = runner.invoke(app, ["run", str(bad)])
    assert result.exit_code == 2
    assert "unknown key 'nmaes'" in result.output and "did you mean 'names'" in result.output


def test_report_on_a_non_run_directory(tmp_path):
    result = runner.invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 2 and "not a run directory" in result.output


def test_interventions_lists_paper_and_toy():
    result = runner.invoke(app, ["interventions"])
    assert result.exit_code == 0
    assert "wrong_continuation" in result.output and "toy/wrong_continuation" in result.output


def test_problems_stage_alone_on_toy(tmp_path):
    cfg = tmp_path / "toy.yaml"
    cfg.write_text(f"run_dir: {tmp_path / 'run'}\ndataset: {{name: toy, limit: 4}}\n")
    result = runner.invoke(app, ["problems", str(cfg), "--no-progress"])
    assert result.exit_code == 0, result.output
    from recovery.store import Table

    assert Table(tmp_path / "run" / "problems").count() == 4
