"""recovery.data.registry and the shared pieces (sources, Skips); every local gold answer grades itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from recovery.data import DATASETS, HubCopy, Skips, dataset_names, load_problems
from recovery.data.sources import DataError, RowError, read_file_rows
from recovery.grading import grade_response

LOCAL = {"bbh": 1187, "scibench": 692, "jeebench": 515, "jeebench/numeric": 219, "real_traces": 153}


@pytest.mark.parametrize(("name", "count"), sorted(LOCAL.items()))
def test_every_local_problem_set(shared_data: Path, name: str, count: int) -> None:
    skips = Skips()
    problems = load_problems(name, path=shared_data, skips=skips)
    assert len(problems) == count and len({p.id for p in problems}) == count and not skips
    # The gold of each problem grades correct against itself (all of them: it takes well under a second).
    wrong = [(p.id, p.answer) for p in problems if not grade_response(f"\\boxed{{{p.answer}}}", p).correct]
    assert wrong == []


def test_names_and_errors(shared_data: Path) -> None:
    names = dataset_names()
    expected = {"bbh", "bbh/dyck_languages", "scibench/atkins", "jeebench/numeric", "numina_olympiads", "real_traces"}
    assert expected <= set(names)
    assert set(DATASETS) <= set(names)
    with pytest.raises(DataError, match="unknown dataset 'gsm8k'"):
        load_problems("gsm8k")
    with pytest.raises(DataError, match="real_traces has no Hub copy"):
        load_problems("real_traces")
    with pytest.raises(DataError, match="no subsets"):
        load_problems("numina_olympiads/amc")
    with pytest.raises(DataError, match="SciBench only"):
        load_problems("science", path=shared_data, tolerance="official")


def test_hub_is_the_default_and_loader_is_injectable() -> None:
    from datasets import Dataset

    seen = []

    def fake(repo, name, split, revision):  # noqa: ANN001, ANN202
        seen.append((repo, name, split))
        return Dataset.from_list([{"input": "Q", "target": "valid"}])

    problems = load_problems("bbh/formal_fallacies", loader=fake)
    assert seen == [("lukaemon/bbh", "formal_fallacies", "test")] and problems[0].answer == "valid"


def test_a_hub_copy_without_a_split_is_refused_before_the_hub_is_asked() -> None:
    asked = []
    copy = HubCopy("someone/problems", loader=lambda *args, **kwargs: asked.append(args))
    with pytest.raises(DataError, match="'someone/problems': no split given"):
        copy.rows()
    assert asked == []
    assert copy.with_options({"split": "test"}).rows() is None and len(asked) == 1


def test_datasets_is_imported_lazily() -> None:
    code = "import sys, recovery.data; assert 'datasets' not in sys.modules and 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_read_file_rows_formats(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps({"data": [{"x": 1}, 2, {"x": 3}]}), encoding="utf-8")
    skips = Skips()
    assert [(i, row["x"]) for i, _, row in read_file_rows(tmp_path / "a.json", skips=skips)] == [(0, 1), (2, 3)]
    assert skips.as_dict() == {"not_an_object": 1} and skips.examples["not_an_object"] == ["a.json row 1"]
    with pytest.raises(RowError, match=r"a\.json row 1: not_an_object"):
        list(read_file_rows(tmp_path / "a.json", strict=True))
    (tmp_path / "b.jsonl").write_text('{"x": 1}\n\n{bad\n{"x": 2}\n', encoding="utf-8")
    positions = [(i, where) for i, where, _ in read_file_rows(tmp_path / "b.jsonl")]
    assert positions == [(0, "b.jsonl line 1"), (2, "b.jsonl line 4")]  # the bad line keeps its position
    (tmp_path / "c.json").write_text('{"nothing": "here"}', encoding="utf-8")
    with pytest.raises(DataError, match="expected a JSON list"):
        list(read_file_rows(tmp_path / "c.json"))
    (tmp_path / "d.json").write_text("{broken", encoding="utf-8")
    with pytest.raises(DataError, match=r"d\.json: cannot read JSON"):
        list(read_file_rows(tmp_path / "d.json"))
    (tmp_path / "e.parquet").write_text("not parquet", encoding="utf-8")
    with pytest.raises(DataError, match=r"e\.parquet: cannot read Parquet"):
        list(read_file_rows(tmp_path / "e.parquet"))


def test_skips_bookkeeping() -> None:
    a, b = Skips(max_examples=2), Skips()
    for i in range(3):
        a.add("bad_json", f"f line {i}")
    b.add("bad_json", "g line 9")
    b.add("no_think_tag", "g line 1", count=2)
    b.add("ignored", count=0)
    merged = Skips.merged([a, b])
    assert merged.as_dict() == {"bad_json": 4, "no_think_tag": 2} and merged.total == len(merged) == 6
    assert merged.examples["bad_json"] == ["f line 0", "f line 1", "g line 9"]
    merged.update({"unknown_problem": 5})
    assert merged.summary().splitlines()[0] == "unknown_problem: 5"
    assert Skips().summary() == "no skips" and not Skips()


def test_the_toy_world_is_a_dataset_like_the_others() -> None:
    from recovery.toy import ToyTaskConfig, generate_problems

    assert {"toy", "toy/arith", "toy/swap"} <= set(dataset_names())
    assert load_problems("toy", limit=4, seed=3) == generate_problems(4, seed=3)
    assert len(load_problems("toy")) == 50  # no limit: the default size
    one_family = load_problems("toy/swap", limit=3, seed=3, max_swaps=3)
    assert one_family == generate_problems(3, seed=3, config=ToyTaskConfig(families=("swap",), max_swaps=3))
    with pytest.raises(ValueError, match="families"):
        load_problems("toy/chess", limit=1)


def test_every_dataset_is_listed_with_its_sub_names() -> None:
    for name, spec in DATASETS.items():
        assert spec.description and name in dataset_names()
        assert all(f"{name}/{sub}" in dataset_names() for sub in spec.subsets)
