"""The ``protocol: reference`` interventions beyond the differential tests (tests/reference): how a run selects
them, what they refuse, and that their chains never share an id with the default protocol's."""

from __future__ import annotations

import ast
import sys
import types
from pathlib import Path

import pytest

from conftest import FakeGenerator, make_trace
from recovery.interventions import (
    PAPER_INTERVENTIONS,
    ChainSettings,
    Produced,
    RandomCharacters,
    TraceJob,
    WikipediaPool,
    intervene_traces,
)
from recovery.interventions.reference import REFERENCE_RULES
from recovery.interventions.reference_text import ReferencePool, append_marker, batch_positions
from recovery.interventions.registry import create, get_spec
from recovery.pipeline.chains_stage import chain_settings
from recovery.plan import plan_for
from recovery.run_config import DatasetConfig, InterventionsConfig, RunConfig

STEPS = ("\nLet x = 2.", "Then y = x + 3 = 5.  ", "So 2y = 10.", "The answer is 10.\n")
PARAGRAPH = (
    "A paragraph of an encyclopedia article, long enough to be kept by the pool's filter of one hundred characters."
)


def _config(tmp_path, **interventions) -> RunConfig:
    pool = tmp_path / "pool.txt"
    pool.write_text(f"{PARAGRAPH}\n\nshort\n\n{PARAGRAPH} Again.", encoding="utf-8")
    cfg = InterventionsConfig(wikipedia_pool=str(pool), **interventions)
    return RunConfig(
        run_dir=str(tmp_path / "run"), dataset=DatasetConfig(name="toy"), protocol="reference", interventions=cfg
    )


def test_a_reference_run_builds_the_authors_versions_and_their_pool(tmp_path):
    settings = chain_settings(
        plan_for(_config(tmp_path, names=["random_characters", "wikipedia_text", "toy/paraphrase"]))
    )
    built = settings.interventions
    assert type(built["random_characters"]) is RandomCharacters  # one class, the authors' rules
    assert built["random_characters"].rules is REFERENCE_RULES
    pool = built["wikipedia_text"].pool
    assert isinstance(pool, ReferencePool) and len(pool) == 2  # unstripped blank-line pieces of ≥ 100 chars
    assert not hasattr(built["toy/paraphrase"], "rules")  # the toy world's keep their own
    mixed = _config(tmp_path, names=["random_characters"])
    mixed.protocol_parts = {"interventions": "default"}
    assert chain_settings(plan_for(mixed)).interventions["random_characters"].rules is not REFERENCE_RULES


def test_the_authors_rules_read_a_pool_path_their_way_and_refuse_another_pool(tmp_path):
    path = _config(tmp_path).interventions.wikipedia_pool
    built = create("wikipedia_text", protocol="reference", pool=path)
    assert isinstance(built.pool, ReferencePool) and len(built.pool) == 2
    with pytest.raises(TypeError, match="needs a ReferencePool"):
        create("wikipedia_text", protocol="reference", pool=WikipediaPool.from_path(path))


def test_options_and_repeats_that_have_no_reference_version_are_refused(tmp_path):
    with pytest.raises(ValueError, match="do not apply under protocol: reference"):
        chain_settings(
            plan_for(_config(tmp_path, names=["complete_step"], options={"complete_step": {"max_new_tokens": 9}}))
        )
    with pytest.raises(ValueError, match="repeats > 1 has no reference implementation"):
        ChainSettings({"random_characters": create("random_characters", protocol="reference")}, repeats=2)


def test_reference_chains_record_their_protocol_and_position_so_ids_differ():
    problem, trace = make_trace(STEPS)
    default = ChainSettings.from_names(["random_characters"], timesteps=(0.5,))
    ours = ChainSettings.from_names(["random_characters"], style="reference", timesteps=(0.5,))
    (a,) = intervene_traces([TraceJob(problem, trace, position=3)], default)
    (b,) = intervene_traces([TraceJob(problem, trace, position=3)], ours)
    assert isinstance(a, Produced) and isinstance(b, Produced)
    assert "protocol" not in a.chain.options and a.chain.id != b.chain.id
    assert (b.chain.options["protocol"], b.chain.options["position"]) == ("reference", 3)
    # The step's own whitespace comes back as spaces; the inserted text is the whole mutated step.
    assert b.chain.prefix.startswith(" Let") and b.chain.inserted_text in b.chain.prefix
    with pytest.raises(ValueError, match="batch position"):
        list(intervene_traces([TraceJob(problem, trace)], ours))


def test_llm_replies_are_stripped_and_inserted_whole():
    problem, trace = make_trace(STEPS)
    generator = FakeGenerator("\n  Step: one.\n\nAnd two.  \n")
    settings = ChainSettings.from_names(["complete_step"], style="reference", timesteps=(0.5,), generator=generator)
    (out,) = intervene_traces([TraceJob(problem, trace, position=0)], settings)
    assert out.chain.inserted_text == "Step: one.\n\nAnd two."
    assert out.chain.prefix == " Let x = 2.\n\nStep: one.\n\nAnd two.  "  # padded like the step it replaces
    (system, user), decoding = generator.calls[0]
    assert "person's" in system.content and decoding.max_new_tokens == 2048
    assert user.content.endswith("Reasoning so far:\n\nLet x = 2.\n\nNext step:")


def test_append_marker_follows_a_trailing_space_or_newline_directly():
    assert append_marker("", "", "Wait") == ("Wait", "Wait")
    assert append_marker("a\n", "x", "Wait") == ("a\nWait", "x\n\nWait")


def test_batch_positions_count_per_model_in_problem_order():
    traces = [("t3", "m", "p3", 5), ("t1", "m", "p1", 5), ("u1", "n", "p1", 5), ("t2", "m", "p2", 5)]
    positions = batch_positions(traces, {"p1": 0, "p2": 1, "p3": 2}, batch_size=2, min_steps=2)
    assert positions == {"t1": 0, "t2": 1, "t3": 0, "u1": 0}


def test_the_pool_from_the_hub_takes_the_first_articles(monkeypatch):
    articles = [{"text": f"{PARAGRAPH} {i}\n\nshort"} for i in range(5)]

    class Stream:
        def take(self, n):
            return articles[:n]

    calls = []
    fake = types.ModuleType("datasets")
    fake.load_dataset = lambda *args, **kwargs: calls.append((args, kwargs)) or Stream()
    monkeypatch.setitem(sys.modules, "datasets", fake)
    pool = ReferencePool.from_hub("wikimedia/wikipedia", "20231101.en", articles=3, seed=42, min_chars=100)
    assert sorted(pool.paragraphs) == [f"{PARAGRAPH} {i}" for i in range(3)]
    assert calls == [(("wikimedia/wikipedia", "20231101.en"), {"split": "train", "streaming": True})]


SOURCE = Path(__file__).resolve().parents[2] / "src" / "recovery"


def test_each_paper_intervention_is_one_class_under_both_protocols(tmp_path):
    pool = tmp_path / "pool.txt"
    pool.write_text(PARAGRAPH, encoding="utf-8")
    pools = {"default": WikipediaPool.from_path(pool), "reference": ReferencePool.from_path(pool, seed=0, min_chars=9)}
    for name in PAPER_INTERVENTIONS:
        built = {
            protocol: create(name, protocol=protocol, **({"pool": pools[protocol]} if name == "wikipedia_text" else {}))
            for protocol in pools
        }
        assert type(built["default"]) is type(built["reference"]) is get_spec(name).cls, name
        assert built["reference"].rules is REFERENCE_RULES and built["default"].rules is not REFERENCE_RULES, name
    # No twin left in the source: no intervention class (one with an ``apply``) named Reference*, no second
    # registry of them.
    twins = []
    for path in SOURCE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "REFERENCE_INTERVENTIONS" not in text, path
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.name.startswith(("Reference", "_Reference")):
                if any(isinstance(item, ast.FunctionDef) and item.name == "apply" for item in node.body):
                    twins.append(f"{path.relative_to(SOURCE)}:{node.name}")
    assert not twins
