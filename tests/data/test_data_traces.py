"""recovery.data.traces: importing existing traces (JSONL / Parquet / Hub / rows), prompt stripping, skips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recovery.data import Skips, TraceFields, import_traces, load_problems, load_real_traces
from recovery.data.sources import DataError, RowError
from recovery.data.traces import REAL_TRACES_MODEL
from recovery.plan import TraceReading
from recovery.segment import THINK, parse_trace
from recovery.types import AnswerType, Problem

FIELDS = TraceFields(problem_id="qid", response="output", model="model", question="question", answer="gold")


@pytest.fixture(scope="module")
def real_file(shared_data: Path) -> Path:
    path = shared_data / "real_traces" / "thought_anchors_math_cots.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} missing")
    return path


@pytest.fixture(scope="module")
def real(real_file: Path):  # noqa: ANN201
    return load_real_traces(real_file.parent)


def write_jsonl(path: Path, rows: list) -> Path:
    lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def good_row(i: int, model: str = "m1", gold: str = "4") -> dict:
    return {
        "qid": f"q{i}",
        "question": f"What is {i}+{i}?",
        "gold": gold,
        "model": model,
        "output": f"<think>\nstep one\n\nstep two\n</think>\nSo \\boxed{{{gold}}}.",
    }


def test_real_traces(real, real_file: Path) -> None:  # noqa: ANN001
    assert len(real) == 153 and not real.skips
    assert sum(t.closed for t in real.traces) == 144  # README: 9 truncated traces lack </think>
    assert len(real.problems) == 153 and len({p.id for p in real.problems}) == 153
    assert all(t.text.startswith("<think>") and t.model == REAL_TRACES_MODEL for t in real.traces)
    rows = [json.loads(line) for line in real_file.read_text(encoding="utf-8").splitlines()]
    first_problem, first_trace = real.pairs[0]
    assert first_problem.id == "thought_anchors_math/problem_53" == first_trace.problem_id
    assert (first_problem.answer, first_problem.answer_type) == ("66", AnswerType.NUMERIC)
    assert first_problem.question == rows[0]["problem"] and first_problem.metadata["level"] == "Level 3"
    # Stripping the prompt changes the text, not the reasoning or the answer part.
    unstripped = parse_trace(first_problem.id, REAL_TRACES_MODEL, rows[0]["solution"])
    assert first_trace.reasoning == unstripped.reasoning and first_trace.answer_text == unstripped.answer_text
    assert rows[0]["solution"].endswith(first_trace.text) and not first_trace.text.startswith("Solve")
    kinds = {p.answer: p.answer_type for p in real.problems}
    assert kinds["\\frac{41}{49}"] is AnswerType.NUMERIC and kinds["5225 \\text{ cubic inches}"] is AnswerType.NUMERIC
    assert kinds["4x^3+4x^2"] is AnswerType.EXPRESSION and kinds["r=6.2"] is AnswerType.EXPRESSION
    assert len(load_problems("real_traces", path=real_file.parents[1])) == 153


def test_real_traces_without_stripping(real_file: Path) -> None:
    raw = load_real_traces(real_file, strip_prompt=False, model="r1-distill")
    assert raw.traces[0].text.startswith("Solve this math problem step by step.")
    assert raw.traces[0].model == "r1-distill"


def test_jsonl_bad_rows_are_counted(tmp_path: Path) -> None:
    rows = [
        good_row(0),
        {**good_row(1), "output": None},  # missing response
        "{not json",
        '["a list"]',
        {k: v for k, v in good_row(2).items() if k != "qid"},  # missing problem id
        {**good_row(3), "output": "no tags here at all"},
        {**good_row(4), "model": 7},  # wrong type
        {**good_row(0)},  # the same trace again
        {**good_row(0, gold="5")},  # same problem id, another gold
        good_row(0, model="m2"),
        {**good_row(5), "question": ""},  # empty question
    ]
    path = write_jsonl(tmp_path / "dump.jsonl", rows)
    result = import_traces(path, fields=FIELDS)
    assert [(p.id, t.model) for p, t in result.pairs] == [("q0", "m1"), ("q0", "m2")]
    assert result.skips.as_dict() == {
        "bad_json": 1,
        "bad_type:model": 1,
        "conflicting_problem": 1,
        "duplicate_trace": 1,
        "missing_field:output": 1,
        "missing_field:qid": 1,
        "missing_field:question": 1,
        "no_think_tag": 1,
        "not_an_object": 1,
    }
    assert result.skips.examples["missing_field:qid"] == ["dump.jsonl line 5"]
    assert len(result.problems) == 1 and result.problems[0].answer_type is AnswerType.NUMERIC


def test_strict_names_file_and_row(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "dump.jsonl", [good_row(0), {**good_row(1), "output": None}])
    with pytest.raises(RowError, match=r"dump\.jsonl line 2: missing_field:output"):
        import_traces(path, fields=FIELDS, strict=True)
    bad_json = write_jsonl(tmp_path / "bad.jsonl", [good_row(0), "{oops"])
    with pytest.raises(RowError, match=r"bad\.jsonl line 2: bad_json"):
        import_traces(bad_json, fields=FIELDS, strict=True)


def test_strip_prompt_and_open_tag_absent(tmp_path: Path) -> None:
    without_prompt = TraceReading().without_prompt  # what strip_prompt=True cuts a response with
    assert without_prompt("prompt <thought>r</thought>a", ("<thought>", "</thought>")) == "<thought>r</thought>a"
    assert without_prompt("prompt <thought>r</thought>a", THINK) is None  # another family's opener is text
    assert without_prompt("no tag", THINK) is None
    rows = [
        {**good_row(0), "output": "PROMPT: think hard. Solution:\n<think>\na\n\nb</think>\\boxed{4}"},
        {**good_row(1), "output": "a\n\nb</think>\\boxed{4}"},  # template opened <think>: no opening tag
    ]
    path = write_jsonl(tmp_path / "t.jsonl", rows)
    stripped = import_traces(path, fields=FIELDS, strip_prompt=True)
    assert [t.text for t in stripped.traces] == ["<think>\na\n\nb</think>\\boxed{4}"]
    assert stripped.skips.as_dict() == {"no_think_tag": 1}
    plain = import_traces(path, fields=FIELDS)  # without stripping, the second one is a valid trace
    assert len(plain) == 2 and plain.traces[1].reasoning == "a\n\nb" and plain.traces[1].closed


def test_parquet_hub_and_rows_agree(tmp_path: Path) -> None:
    from datasets import Dataset

    rows = [good_row(i, model=m) for i in range(3) for m in ("m1", "m2")]
    dataset = Dataset.from_list(rows)
    parquet = tmp_path / "traces.parquet"
    dataset.to_parquet(str(parquet))
    calls = []

    def fake(repo, name, split, revision):  # noqa: ANN001, ANN202
        calls.append((repo, name, split, revision))
        return dataset

    from_parquet = import_traces(parquet, fields=FIELDS)
    from_hub = import_traces("someone/traces", fields=FIELDS, loader=fake, split="test", name="r1")
    from_rows = import_traces(rows, fields=FIELDS)
    assert calls == [("someone/traces", "r1", "test", None)]
    ids = [t.id for t in from_rows.traces]
    assert len(ids) == 6 and [t.id for t in from_parquet.traces] == ids == [t.id for t in from_hub.traces]


def test_join_with_existing_problems(tmp_path: Path) -> None:
    problems = [Problem("logic", "Is it?", "Yes", "yes_no", "bbh/causal_judgement", id="bbh/causal_judgement/0")]
    rows = [
        {"id": "0", "text": "<think>hm\n\nyes</think>Yes", "who": "m1"},
        {"id": "9", "text": "<think>hm</think>No", "who": "m1"},
    ]
    fields = TraceFields(problem_id="id", response="text", model="who", question=None, answer=None)
    result = import_traces(rows, fields=fields, problems=problems, id_prefix="bbh/causal_judgement")
    assert [(p.id, t.problem_id) for p, t in result.pairs] == [("bbh/causal_judgement/0", "bbh/causal_judgement/0")]
    assert result.skips.as_dict() == {"unknown_problem": 1}


def test_configuration_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="model"):
        import_traces([], fields=TraceFields(model=None))
    with pytest.raises(ValueError, match="fields.question"):
        import_traces([], fields=TraceFields(question=None))
    with pytest.raises(DataError, match="no such file"):
        import_traces(tmp_path / "missing.jsonl", fields=FIELDS)
    with pytest.raises(DataError, match="neither an existing file nor a Hub dataset id"):
        import_traces("not-a-hub-id", fields=FIELDS)
    with pytest.raises(DataError, match="is a folder"):
        import_traces(tmp_path, fields=FIELDS)
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(DataError, match="unsupported file type"):
        import_traces(tmp_path / "x.csv", fields=FIELDS)


def test_fixed_answer_type_and_metadata(tmp_path: Path) -> None:
    rows = [{**good_row(0, gold="\\frac{1}{2}"), "level": 3}]
    fields = TraceFields(**{**FIELDS.__dict__, "metadata": ("level",)})
    auto = import_traces(rows, fields=fields)
    assert auto.problems[0].answer_type is AnswerType.NUMERIC and auto.problems[0].metadata == {"level": 3}
    forced = import_traces(rows, fields=fields, answer_type="expression", domain="science", problem_source="x")
    assert forced.problems[0].answer_type is AnswerType.EXPRESSION and forced.problems[0].domain == "science"
    skips = Skips()
    skips.update(auto.skips)
    assert not skips


def test_a_non_utf8_byte_costs_one_row_named_by_file_and_line(tmp_path: Path, real_file: Path) -> None:
    """One 0xff byte in the real traces costs that line, a counted skip naming file and line, not the import."""
    lines = real_file.read_bytes().splitlines(keepends=True)
    lines[4] = lines[4][:200] + b"\xff" + lines[4][200:]
    broken = tmp_path / real_file.name
    broken.write_bytes(b"".join(lines))
    result = load_real_traces(broken)
    assert len(result) == 152
    assert result.skips.counts == {"bad_utf8": 1}
    assert result.skips.examples["bad_utf8"] == [f"{real_file.name} line 5"]
    with pytest.raises(RowError, match=rf"{real_file.name} line 5.*bad_utf8 \(byte 0xff at column 201\)"):
        load_real_traces(broken, strict=True)
