"""recovery.data.bbh: the five logic subsets from ../shared/data/bbh and from a Hub-shaped dataset."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from recovery.data import PAPER_BBH_TASKS, HubCopy, Skips, load_bbh, load_problems
from recovery.data.bbh import BBH_HUB
from recovery.data.sources import DataError, RowError
from recovery.types import AnswerType

EXPECTED = {
    "causal_judgement": (187, AnswerType.YES_NO),
    "dyck_languages": (250, AnswerType.DYCK),
    "formal_fallacies": (250, AnswerType.VALID_INVALID),
    "logical_deduction_seven_objects": (250, AnswerType.MULTIPLE_CHOICE),
    "tracking_shuffled_objects_seven_objects": (250, AnswerType.MULTIPLE_CHOICE),
}


@pytest.fixture(scope="module")
def bbh_dir(shared_data: Path) -> Path:
    path = shared_data / "bbh"
    if not path.is_dir():
        pytest.skip(f"{path} missing")
    return path


def test_local_counts_types_and_ids(bbh_dir: Path) -> None:
    skips = Skips()
    problems = load_bbh(path=bbh_dir, skips=skips)
    assert not skips
    assert len(problems) == 1187 and len({p.id for p in problems}) == 1187
    counts = Counter((p.metadata["task"], p.answer_type) for p in problems)
    assert counts == {(task, kind): n for task, (n, kind) in EXPECTED.items()}
    assert all(p.domain == "logic" and p.source == f"bbh/{p.metadata['task']}" for p in problems)
    assert problems[0].id == "bbh/causal_judgement/0"
    assert [p.metadata["task"] for p in problems][::250][:2] == ["causal_judgement", "dyck_languages"]


def test_hand_checked_items(bbh_dir: Path) -> None:
    raw = json.loads((bbh_dir / "dyck_languages.json").read_text(encoding="utf-8"))["examples"]
    dyck = load_bbh("dyck_languages", path=bbh_dir)
    assert dyck[7].id == "bbh/dyck_languages/7"
    assert dyck[7].question == raw[7]["input"] and dyck[7].answer == raw[7]["target"].strip()
    causal = load_bbh("causal_judgement", path=bbh_dir)
    assert Counter(p.answer for p in causal) == {"Yes": 97, "No": 90}  # BBH README
    fallacies = load_bbh("formal_fallacies", path=bbh_dir)
    assert Counter(p.answer for p in fallacies) == {"valid": 133, "invalid": 117}
    deduction = load_bbh("logical_deduction_seven_objects", path=bbh_dir)
    assert {p.answer for p in deduction} <= {f"({c})" for c in "ABCDEFG"}
    assert "Options:" in deduction[0].question


def test_single_file_path(bbh_dir: Path) -> None:
    problems = load_bbh("formal_fallacies", path=bbh_dir / "formal_fallacies.json")
    assert len(problems) == 250
    with pytest.raises(DataError, match="single file"):
        load_bbh(path=bbh_dir / "formal_fallacies.json")


def test_registry_names(shared_data: Path, bbh_dir: Path) -> None:
    assert len(load_problems("bbh", path=shared_data)) == 1187
    assert len(load_problems("logic", path=shared_data)) == 1187
    assert len(load_problems("bbh/dyck_languages", path=bbh_dir)) == 250
    with pytest.raises(DataError, match="unknown BBH task"):
        load_problems("bbh/not_a_task", path=shared_data)


def test_hub_path_with_injected_loader() -> None:
    from datasets import Dataset

    calls = []

    def fake(repo, name, split, revision):  # noqa: ANN001, ANN202
        calls.append((repo, name, split, revision))
        return Dataset.from_list([{"input": f"{name} question {i}", "target": "(B)"} for i in range(3)])

    tasks = ["logical_deduction_seven_objects", "tracking_shuffled_objects_seven_objects"]
    problems = load_bbh(tasks, hub=replace(BBH_HUB, loader=fake))
    assert calls == [
        ("lukaemon/bbh", "logical_deduction_seven_objects", "test", None),
        ("lukaemon/bbh", "tracking_shuffled_objects_seven_objects", "test", None),
    ]
    assert [p.id for p in problems][2:4] == [
        "bbh/logical_deduction_seven_objects/2",
        "bbh/tracking_shuffled_objects_seven_objects/0",
    ]
    assert all(p.answer_type is AnswerType.MULTIPLE_CHOICE for p in problems)
    calls.clear()
    load_bbh("dyck_languages", hub=HubCopy("maveriq/bigbenchhard", revision="abc", loader=fake))
    assert calls == [("maveriq/bigbenchhard", "dyck_languages", "train", "abc")]  # that copy's split is train
    calls.clear()
    load_problems("bbh/dyck_languages", hub_id="maveriq/bigbenchhard", revision="abc", loader=fake)
    assert calls == [("maveriq/bigbenchhard", "dyck_languages", "train", "abc")]  # a config's flat options


def test_hub_failure_is_a_clear_error() -> None:
    def offline(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise ConnectionError("no network")

    with pytest.raises(DataError, match=r"cannot load 'lukaemon/bbh' config 'dyck_languages'.*pass path="):
        load_bbh("dyck_languages", hub=replace(BBH_HUB, loader=offline))


def test_bad_rows_are_counted_or_raise_when_strict(tmp_path: Path) -> None:
    examples = [
        {"input": "Is it? Options:\n- Yes\n- No", "target": "Yes"},
        {"input": "Missing target"},
        {"input": "", "target": "No"},
        {"input": "Bad target", "target": "Perhaps"},
        "not an object",
        {"input": "Fine", "target": "No"},
    ]
    path = tmp_path / "causal_judgement.json"
    path.write_text(json.dumps({"canary": "x", "examples": examples}), encoding="utf-8")
    skips = Skips()
    problems = load_bbh("causal_judgement", path=tmp_path, skips=skips)
    assert [p.id for p in problems] == ["bbh/causal_judgement/0", "bbh/causal_judgement/5"]  # ids keep positions
    assert skips.as_dict() == {
        "gold_not_yes_no": 1,
        "missing_field:input": 1,
        "missing_field:target": 1,
        "not_an_object": 1,
    }
    assert skips.examples["missing_field:target"] == ["causal_judgement.json row 1"]
    with pytest.raises(RowError, match=r"causal_judgement\.json row 1: missing_field:target"):
        load_bbh("causal_judgement", path=tmp_path, strict=True)


def test_paper_tasks_and_errors(tmp_path: Path) -> None:
    assert set(PAPER_BBH_TASKS) == set(EXPECTED)
    with pytest.raises(DataError, match="no dyck_languages.json"):
        load_bbh("dyck_languages", path=tmp_path)


def test_a_task_file_is_found_in_the_folder_or_its_bbh_subfolder_else_named(tmp_path: Path) -> None:
    example = {"examples": [{"input": "not ( True ) and ( True ) is", "target": "False"}]}
    (tmp_path / "bbh").mkdir()
    (tmp_path / "bbh" / "boolean_expressions.json").write_text(json.dumps(example))
    (problem,) = load_bbh("boolean_expressions", path=tmp_path)
    assert (problem.id, problem.answer) == ("bbh/boolean_expressions/0", "False")
    with pytest.raises(DataError, match=r"no formal_fallacies\.json for BBH task 'formal_fallacies'$"):
        load_bbh("formal_fallacies", path=tmp_path)
