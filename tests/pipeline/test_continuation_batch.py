"""`ContinuationBatch` builds a committed batch column-wise; its rows must be the per-sample rows."""

from __future__ import annotations

from recovery.generation import GenerationResult, Sample
from recovery.pipeline.continuation_work import ContinuationBatch
from recovery.run_dir import records
from recovery.types import Continuation
from run_rows import continuation_row


def _result(chain_id: str, texts: list[str], prompt_tokens: int | None, prefilled: int | None) -> GenerationResult:
    samples = tuple(
        Sample(text=t, n_tokens=None if i == 1 else len(t), finish_reason="stop" if i else "length")
        for i, t in enumerate(texts)
    )
    return GenerationResult(
        request_id=chain_id, samples=samples, prompt_tokens=prompt_tokens, prefilled_tokens=prefilled
    )


def test_batch_rows_equal_the_per_sample_rows():
    chains = [("c1", "p1", ["a", "bb", "ccc"], 10, 4), ("c2", "p2", ["x"], None, None), ("c3", "p1", ["é", ""], 7, 7)]
    batch = ContinuationBatch("model-x")
    for chain_id, problem_id, texts, prompt, prefilled in chains:
        batch.add(_result(chain_id, texts, prompt, prefilled), problem_id, texts)
    got = batch.to_arrow()
    assert got.schema == records.CONTINUATIONS
    expected = []
    for chain_id, problem_id, texts, prompt, prefilled in chains:
        result = _result(chain_id, texts, prompt, prefilled)
        for index, sample in enumerate(result.samples):
            c = Continuation(
                chain_id=chain_id,
                sample_index=index,
                text=sample.text,
                n_tokens=sample.n_tokens,
                finish_reason=sample.finish_reason,
                model="model-x",
            )
            expected.append(continuation_row(c, problem_id, prompt, prefilled))
    assert got.to_pylist() == expected


def test_empty_batch_has_the_schema():
    got = ContinuationBatch("m").to_arrow()
    assert got.num_rows == 0 and got.schema == records.CONTINUATIONS


def _arrays(chain_id: str):
    batch = ContinuationBatch("m")
    batch.add(_result(chain_id, ["a", "b"], 3, 3), "p", ["a", "b"])
    return batch.to_arrow()


def test_background_commits_write_every_batch_in_order(tmp_path):
    from recovery.pipeline.continuation_work import BackgroundCommits
    from recovery.store import RunDir

    table = RunDir(tmp_path).table("continuations")
    with table.writer(records.CONTINUATIONS) as writer:
        committer = BackgroundCommits(writer, grading=None)
        for chain_id in ("c1", "c2", "c3"):
            committer.commit(_arrays(chain_id))
        committer.close()
    assert len(table.shards()) == 3  # one atomic shard per committed batch
    assert [r["chain_id"] for r in table.iter_rows(["chain_id"])] == ["c1", "c1", "c2", "c2", "c3", "c3"]


class _FailingWriter:
    """A writer whose disk fails on the second shard (a boundary these tests cannot break for real)."""

    def __init__(self):
        self.flushed = 0
        self.rows = 0

    def add_columns(self, columns):
        self.rows += len(columns["id"])

    def flush(self):
        self.flushed += 1
        if self.flushed == 2:
            raise OSError("disk full")


def test_a_failed_commit_is_raised_at_the_next_commit_or_close():
    import pytest

    from recovery.pipeline.continuation_work import BackgroundCommits

    committer = BackgroundCommits(_FailingWriter(), grading=None)
    committer.commit(_arrays("c1"))
    committer.commit(_arrays("c2"))  # fails in the background
    with pytest.raises(OSError, match="disk full"):
        committer.commit(_arrays("c3"))
    committer.close()  # nothing left in flight; the thread stops


def test_the_batch_in_flight_is_committed_when_the_caller_fails():
    from recovery.pipeline.continuation_work import BackgroundCommits

    writer = _FailingWriter()
    committer = BackgroundCommits(writer, grading=None)
    try:
        committer.commit(_arrays("c1"))
        raise RuntimeError("generation failed")
    except RuntimeError:
        pass
    finally:
        committer.close()
    assert writer.flushed == 1 and writer.rows == 2
