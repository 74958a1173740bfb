"""`recovery.run_dir.open`: the one door to a run directory (typed config, records, rows, tables by name)."""

from __future__ import annotations

import pytest

from recovery.configs import ConfigError
from recovery.run_dir import Run, open_run, read_manifest, records, run_config_from_manifest
from recovery.store import RunDir
from toy_runs import ToyRunSpec

SPEC = ToyRunSpec(interventions=("toy/random_characters",), n_problems=3)


@pytest.fixture(scope="module")
def toy(toy_run_for):
    return toy_run_for(SPEC)


def test_open_gives_one_run_for_a_path_a_run_dir_or_a_run(toy):
    import recovery.run_dir as run_dir

    run = run_dir.open(toy.path)
    assert isinstance(run, Run) and run.path == toy.path
    assert open_run(run) is run
    assert isinstance(open_run(RunDir(toy.path)), Run) and open_run(RunDir(toy.path)).path == toy.path


def test_config_and_manifest_are_read_once_from_the_manifest(toy):
    run = open_run(toy.path)
    assert run.config == run_config_from_manifest(read_manifest(toy.path))
    assert run.manifest == read_manifest(toy.path)
    assert run.config is run.config and run.manifest is run.manifest


def test_records_come_back_typed(toy):
    run = open_run(toy.path)
    assert run.problems() == {p.id: p for p in toy.problems}
    traces = run.traces()
    assert set(traces) == {t.id for t in toy.traces}
    assert all(traces[t.id].reasoning == t.reasoning and traces[t.id].model == t.model for t in toy.traces)
    some = {toy.traces[0].id}
    assert set(run.traces(some)) == some
    assert run.kept_ids() == {t.id for t in toy.traces}  # every toy trace is kept
    assert set(run.traces(kept=True)) == run.kept_ids()
    assert set(run.traces(some, kept=True)) == some


def test_rows_and_batches_with_selected_columns(toy):
    run = open_run(toy.path)
    chains = list(run.chain_rows(["id", "trace_id"]))
    assert len(chains) == len(toy.chains) and set(chains[0]) == {"id", "trace_id"}
    assert [records.chain_from_row(r) for r in run.chain_rows()] == [c for _, c in toy.chains]
    (batch,) = list(run.chain_batches(["id"]))
    assert batch.num_rows == len(toy.chains) and batch.schema.names == ["id"]
    n = len(toy.chains) * len(SPEC.variants)
    assert sum(b.num_rows for b in run.continuation_batches(["id", "text"], batch_size=2)) == n
    assert len(list(run.continuation_rows(["id"]))) == len(list(run.grade_rows(["id", "verdict"]))) == n
    assert sum(b.num_rows for b in run.grade_batches(["verdict"])) == n
    assert {r["kept"] for r in run.kept_rows(["kept"])} == {True}
    assert list(run.skip_rows()) == []
    assert len(list(run.problem_rows(["id"]))) == len(list(run.trace_rows(["id"], batch_size=1))) == 3


def test_writers_get_each_table_by_name(toy):
    run = open_run(toy.path)
    names = ("problems", "traces", "kept", "chains", "skips", "continuations", "grades", "judge_disagreements")
    assert [getattr(run.tables, name).path for name in names] == [toy.path / name for name in names]
    assert [t.path.name for t in run.tables.selection()] == ["problems", "traces", "kept"]
    assert run.tables.chains.count() == len(toy.chains)


def test_a_folder_without_a_manifest_opens_but_has_no_config(tmp_path):
    run = open_run(tmp_path / "new")
    assert run.problems() == {} and run.traces() == {} and run.kept_ids() == set()
    assert run.aggregates() == [] and run.clean_accuracy() == [] and run.summary() == {}
    with pytest.raises(ConfigError, match="not a run directory"):
        _ = run.config


def test_an_import_mapping_with_an_absent_column_reads_back(tmp_path):
    """``traces.fields`` names a column the file lacks with None (`recovery.data.traces.TraceFields`); the manifest
    of such a run must read back, since every reader of the run (its models' think tags among them) goes
    through it (issue 35: the filter and chains stages failed on such a run)."""
    from recovery.model_config import ModelConfig
    from recovery.run_config import DatasetConfig, RunConfig, TracesConfig
    from recovery.run_dir import open_run, write_manifest
    from recovery.store import RunDir

    fields = {"response": "solution", "model": None, "id_prefix": "x", "strip_prompt": True}
    config = RunConfig(
        run_dir=str(tmp_path / "run"),
        dataset=DatasetConfig(name="real_traces"),
        models=[ModelConfig(name="EXAONE-Deep-7.8B")],
        traces=TracesConfig(source="import", path="traces.jsonl", fields=fields),
    )
    write_manifest(RunDir(tmp_path / "run"), config)
    run = open_run(tmp_path / "run")
    assert run.config.traces.fields == fields
    assert run.think_tags("EXAONE-Deep-7.8B") == ("<thought>", "</thought>")
