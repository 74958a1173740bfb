"""The aggregate stage: chain lookup (vectorised for content-addressed ids, exact for any other ids) and
group-by-group aggregation from per-chain arrays (the same rows as aggregating every outcome at once)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from recovery.ids import content_id
from recovery.run_dir.chain_index import ChainIndex
from recovery.store import RunDir, hex16_keys


def test_hex_ids_decode_to_their_integer_value():
    ids = [content_id("chain", i) for i in range(50)]
    assert hex16_keys(pa.array(ids)).tolist() == [int(i, 16) for i in ids]
    assert hex16_keys(pa.array(["not-hex-at-all!!"])) is None
    assert hex16_keys(pa.array(["abc"])) is None and hex16_keys(pa.array([ids[0], None])) is None


def test_lookup_finds_chains_in_any_batch_slice_and_skips_unknown_ids():
    ids = [content_id("chain", i) for i in range(1000)]
    index = ChainIndex(ids)
    positions, found = index.find(pa.array([ids[5], "zz", ids[999], content_id("other"), ids[0]]))
    assert positions.tolist() == [5, 999, 0] and found.to_pylist() == [True, False, True, False, True]
    positions, found = index.find(pa.array(ids).slice(10, 5))  # an Arrow slice keeps its buffer offset
    assert positions.tolist() == list(range(10, 15)) and all(found.to_pylist())


def test_non_hex_chain_ids_fall_back_to_exact_lookup():
    positions, found = ChainIndex(["a", "b"]).find(pa.array(["b", "c", "a"]))
    assert positions.tolist() == [1, 0] and found.to_pylist() == [True, False, True]


def _random_tallies(n_chains: int, seed: int):
    """Tallies with mixed labels, timesteps, counts and missing lengths."""
    import numpy as np

    from recovery.run_dir.tallies import CODED, ChainTallies

    rng = np.random.default_rng(seed)
    values = {
        "model": ["m1", "m2"],
        "domain": ["math", "logic", "toy"],
        "intervention": ["a", "b", "c"],
        "category": ["benign", "neutral"],
        "problem": [f"p{i}" for i in range(max(1, n_chains // 20))],  # groups hold several chains of a problem
    }
    codes = {name: rng.integers(0, len(values[name]), n_chains).astype(np.int32) for name in CODED}
    n = rng.integers(1, 9, n_chains)
    whole = rng.normal(20, 30, n_chains)
    whole[rng.random(n_chains) < 0.2] = np.nan
    return ChainTallies(
        ids=pa.array([content_id("chain", i) for i in range(n_chains)]),
        codes=codes,
        values=values,
        target_t=rng.choice([0.1, 0.5, 0.9], n_chains),
        n=n,
        k=rng.integers(0, 9, n_chains) % (n + 1),
        whole_pct=whole,
        remaining_pct=np.where(np.isnan(whole), np.nan, whole * 2),
    )


def test_group_by_group_aggregation_equals_aggregating_all_outcomes_at_once():
    from recovery.metrics import aggregate
    from recovery.pipeline.aggregate import aggregate_tallies

    tallies = _random_tallies(3000, seed=1)
    grouped = aggregate_tallies(tallies, n_boot=200, seed=3)
    at_once = aggregate([tallies.outcome(i) for i in range(len(tallies))], n_boot=200, seed=3)
    assert len(grouped) == len(at_once) == 2 * 3 * 3 * 3
    assert [r.flat() for r in grouped] == [r.flat() for r in at_once]


def test_groups_partition_the_chains_by_model_domain_intervention_and_timestep():
    import numpy as np

    tallies = _random_tallies(500, seed=2)
    groups = list(tallies.groups())
    assert sorted(np.concatenate(groups).tolist()) == list(range(500))
    for members in groups:
        keys = {
            (
                tallies.codes["model"][i],
                tallies.codes["domain"][i],
                tallies.codes["intervention"][i],
                tallies.target_t[i],
            )
            for i in members
        }
        assert len(keys) == 1


def test_run_aggregate_equals_aggregating_its_chain_outcomes(toy_run_for):
    from recovery.metrics import aggregate
    from recovery.pipeline.aggregate import aggregate_tallies
    from recovery.run_dir import chain_outcomes, chain_tallies
    from recovery.store import RunDir
    from toy_runs import ToyRunSpec

    run = RunDir(toy_run_for(ToyRunSpec(interventions=("toy/wrong_continuation", "toy/paraphrase"))).path)
    outcomes = chain_outcomes(run)
    assert outcomes and all(o.n == 2 and o.k == 1 for o in outcomes)  # teacher + wrong-answer variants
    expected = [r.flat() for r in aggregate(outcomes, n_boot=100)]
    assert [r.flat() for r in aggregate_tallies(chain_tallies(run), n_boot=100)] == expected


def test_chains_stored_without_kept_chars_aggregate_the_same(toy_run_for, tmp_path):
    """A run directory from before ``kept_chars`` was stored: the aggregate recomputes it from the prefixes,
    with the same rows as from the stored column (which is what the prefixes say)."""
    import shutil

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from recovery.pipeline.aggregate import aggregate_tallies
    from recovery.run_dir import chain_tallies
    from recovery.store import RunDir
    from toy_runs import ToyRunSpec

    source = toy_run_for(ToyRunSpec(interventions=("toy/wrong_continuation", "toy/paraphrase"))).path
    old = tmp_path / "old"
    shutil.copytree(source, old)
    for shard in RunDir(old).table("chains").shards():
        table = pq.read_table(shard)
        kept = pc.subtract(pc.utf8_length(table["prefix"]), pc.utf8_length(table["inserted_text"]))
        assert table["kept_chars"].to_pylist() == kept.to_pylist()  # the stored column is the prefixes' count
        pq.write_table(table.drop_columns(["kept_chars"]), shard)
    assert RunDir(source).table("chains").has_column("kept_chars")
    assert not RunDir(old).table("chains").has_column("kept_chars")
    stored = [r.flat() for r in aggregate_tallies(chain_tallies(RunDir(source)), n_boot=100)]
    assert stored and [r.flat() for r in aggregate_tallies(chain_tallies(RunDir(old)), n_boot=100)] == stored


class ThoughtTags:
    """The tiny reasoner writing EXAONE-Deep's ``<thought>``/``</thought>`` instead of ``<think>``/``</think>``
    (EXAONE itself cannot run here): the same texts, other tags, so length overhead must not change."""

    concurrency = 1  # the Generator protocol: one request in flight

    def __init__(self, inner):
        from dataclasses import replace

        self.inner = inner
        self.name = inner.name
        self.spec = replace(inner.spec, think_open="<thought>", think_close="</thought>", think_opener="<thought>\n")

    def generate(self, requests):
        from dataclasses import replace

        from recovery.generation import Sample

        for result in self.inner.generate(requests):
            samples = tuple(
                Sample(s.text.replace("</think>", "</thought>"), s.n_tokens, s.finish_reason) for s in result.samples
            )
            yield replace(result, samples=samples)

    def close(self):
        self.inner.close()


def test_length_overhead_ends_reasoning_at_the_models_own_closing_tag(tmp_path, hf_factory):
    """EXAONE-Deep closes its reasoning with ``</thought>``: its final answer is not reasoning. A real run with
    those tags aggregates to the scalar definition (`recovery.metrics`) applied with the model's own tag."""
    import numpy as np

    from recovery.metrics import continuation_reasoning, length_change_from_counts
    from recovery.pipeline import (
        DatasetConfig,
        InterventionsConfig,
        ModelConfig,
        RunConfig,
        SamplingConfig,
        TracesConfig,
        run_pipeline,
    )
    from recovery.run_dir import read_aggregates

    config = RunConfig(
        run_dir=str(tmp_path / "thought"),
        dataset=DatasetConfig(name="toy", limit=4, options={"seed": 11}),
        models=[ModelConfig(name="tiny-reasoner", spec="EXAONE-Deep-32B")],
        traces=TracesConfig(sampling=SamplingConfig(n=1, temperature=0.0, top_p=1.0, max_new_tokens=200)),
        interventions=InterventionsConfig(names=["toy/random_characters"], timesteps=[0.5]),
        continuation=SamplingConfig(n=2, max_new_tokens=200),
        cpu_workers=1,
    )
    run_pipeline(config, make_generator=lambda m: ThoughtTags(hf_factory(m)), progress=False, n_boot=50)
    run = RunDir(tmp_path / "thought")
    chains = {
        r["id"]: r
        for r in run.table("chains").iter_rows(
            ["id", "kept_chars", "original_prefix_chars", "original_reasoning_chars"]
        )
    }
    per_chain: dict[str, list[float]] = {}
    answered = 0
    for row in run.table("continuations").iter_rows(["chain_id", "text"]):
        answered += bool(row["text"].partition("</thought>")[2])
        c = chains[row["chain_id"]]
        new = len(continuation_reasoning(row["text"], "</thought>"))
        change = length_change_from_counts(
            c["kept_chars"], c["original_prefix_chars"], c["original_reasoning_chars"], new
        )
        per_chain.setdefault(row["chain_id"], []).append(change.whole_pct)
    assert answered, "no continuation closed its reasoning and answered: the test would not tell the tags apart"
    (row,) = read_aggregates(run)
    assert row["n_chains"] == len(per_chain) > 0
    assert row["whole_pct_mean"] == pytest.approx(np.mean([np.mean(v) for v in per_chain.values()]))
