"""`ContinuationBatch` builds a committed batch column-wise; its rows must be the per-sample rows."""

from __future__ import annotations

from recovery.backends.base import GenerationResult, Sample
from recovery.pipeline import records
from recovery.pipeline.continuations_stage import ContinuationBatch
from recovery.types import Continuation


def _result(chain_id: str, texts: list[str], prompt_tokens: int | None, prefilled: int | None) -> GenerationResult:
    samples = tuple(Sample(text=t, n_tokens=None if i == 1 else len(t), finish_reason="stop" if i else "length")
                    for i, t in enumerate(texts))  # fmt: skip
    return GenerationResult(request_id=chain_id, samples=samples, prompt_tokens=prompt_tokens, prefilled_tokens=prefilled)


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
            c = Continuation(chain_id=chain_id, sample_index=index, text=sample.text, n_tokens=sample.n_tokens,
                             finish_reason=sample.finish_reason, model="model-x")  # fmt: skip
            expected.append(records.continuation_row(c, problem_id, prompt, prefilled))
    assert got.to_pylist() == expected


def test_empty_batch_has_the_schema():
    got = ContinuationBatch("m").to_arrow()
    assert got.num_rows == 0 and got.schema == records.CONTINUATIONS
