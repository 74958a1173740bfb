"""The paraphrase-quality check (paper App. D.4): reply parsing, rates with Wilson intervals, the seeded
per-domain sample, and a run on a real pipeline run directory (tiny reasoner, toy/paraphrase chains).

No LLM can run here, so the judge is a scripted generator: it answers from a fixed table keyed by the
chain it recognises in the prompt. Everything else — the run directory, the chains, the prefixes rebuilt
from the traces, the stored judgments and the report — is real.
"""

from __future__ import annotations

import json
import math
import shutil

import pytest

from recovery.analysis import paraphrase as pq
from recovery.analysis.paraphrase import (
    GENERATION_ERROR,
    NO,
    UNPARSEABLE,
    YES,
    ParaphraseCheckConfig,
    ParaphraseItem,
    equivalence_rates,
    parse_equivalence_reply,
    sample_per_domain,
)
from recovery.generation import GenerationResult, Sample
from recovery.model_config import ModelConfig

# ------------------------------------------------------------------------------------------ parsing


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ("Yes", YES),
        ("yes.", YES),
        ("No", NO),
        ("**No**, step 3 was changed.", NO),
        ("<think>The second version drops a step... no wait, it is there.</think>\nYes", YES),
        ("<think>Looks the same, yes.</think>\n\nNo", NO),
        ("Both versions compute 16 then 19.\nAnswer: Yes", YES),
        ("They differ in step C.\n\\boxed{No}", NO),
        ("The versions match.\nYes", YES),
        ("Both are similar.", UNPARSEABLE),
        ("", UNPARSEABLE),
        ("<think>comparing", UNPARSEABLE),
    ],
)
def test_parse_equivalence_reply(reply, verdict):
    got, detail = parse_equivalence_reply(reply)
    assert got == verdict, detail
    assert detail


def test_truncated_reasoning_judge_is_unparseable():
    verdict, detail = parse_equivalence_reply("<think>yes, the same", finish_reason="length")
    assert verdict == UNPARSEABLE and detail.startswith("truncated")
    assert parse_equivalence_reply(None)[0] == UNPARSEABLE


# ------------------------------------------------------------------------------------------ rates


def test_equivalence_rates_hand_computed():
    rows = [{"domain": "math", "verdict": v} for v in (YES, YES, NO, UNPARSEABLE)]
    rows += [{"domain": "logic", "verdict": YES}, {"domain": "logic", "verdict": GENERATION_ERROR}]
    rates = {r.group: r for r in equivalence_rates(rows)}
    assert list(rates) == ["logic", "math", "all"]
    math_ = rates["math"]
    assert (math_.n, math_.yes, math_.no, math_.unparseable, math_.errors) == (4, 2, 1, 1, 0)
    assert math_.rate == 0.5 and math_.rate_parsed == pytest.approx(2 / 3)  # unparseable is in n, not in Yes+No
    assert (math_.ci_low, math_.ci_high) == pytest.approx((0.1500, 0.8500), abs=1e-4)  # Wilson 2/4
    logic = rates["logic"]
    assert (logic.n, logic.yes, logic.errors, logic.rate, logic.rate_parsed) == (2, 1, 1, 0.5, 1.0)
    pooled = rates["all"]
    assert (pooled.n, pooled.yes) == (6, 3)
    assert equivalence_rates([{"domain": "d", "verdict": NO}])[0].rate_parsed == 0.0
    only_bad = equivalence_rates([{"domain": "d", "verdict": UNPARSEABLE}], pooled=False)[0]
    assert only_bad.rate == 0.0 and math.isnan(only_bad.rate_parsed)
    assert equivalence_rates([]) == []


# ------------------------------------------------------------------------------------------ sampling


def _items(domain: str, n: int) -> list[ParaphraseItem]:
    return [ParaphraseItem(f"{domain}-{i:02d}", domain, "m", "paraphrase", 0.5, "Q", "a", "b") for i in range(n)]


def test_sample_per_domain_is_capped_seeded_and_independent():
    math_items, logic_items = _items("math", 10), _items("logic", 3)
    chosen = sample_per_domain(math_items + logic_items, 4, seed=0)
    ids = [i.chain_id for i in chosen]
    assert [i.domain for i in chosen] == ["logic"] * 3 + ["math"] * 4  # capped at 4, logic has only 3
    assert ids == sorted(ids) and len(set(ids)) == 7
    assert sample_per_domain(list(reversed(math_items + logic_items)), 4, seed=0) == chosen  # order-free
    # One domain's draw does not depend on what the other domains hold.
    more_logic = sample_per_domain(math_items + _items("logic", 9), 4, seed=0)
    assert [i for i in more_logic if i.domain == "math"] == [i for i in chosen if i.domain == "math"]
    # A larger sample extends a smaller one, so stored judgments stay in use.
    assert set(sample_per_domain(math_items, 2, seed=0)) <= set(sample_per_domain(math_items, 4, seed=0))
    other_seed = sample_per_domain(math_items, 4, seed=1)
    assert [i.chain_id for i in other_seed] != [i.chain_id for i in chosen if i.domain == "math"]
    with pytest.raises(ValueError, match="per_domain"):
        sample_per_domain(math_items, 0, seed=0)


# ------------------------------------------------------------------------------------------ on a real run


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory, hf_factory):
    """A real run directory up to the chains stage: tiny-reasoner traces on 4 toy problems, toy/paraphrase
    and toy/random_characters at t = 0.5 and 0.9 (8 paraphrase chains)."""
    from recovery.pipeline import (
        DatasetConfig,
        FilterConfig,
        InterventionsConfig,
        RunConfig,
        SamplingConfig,
        TracesConfig,
        run_pipeline,
    )
    from recovery.run_config import GradingConfig

    run_dir = tmp_path_factory.mktemp("paraphrase") / "run"
    config = RunConfig(
        run_dir=str(run_dir),
        dataset=DatasetConfig(name="toy", limit=4, options={"seed": 1000}),
        models=[ModelConfig(name="tiny-reasoner")],
        traces=TracesConfig(
            sampling=SamplingConfig(n=1, temperature=0.0, top_p=1.0, max_new_tokens=200),
            filters=FilterConfig(
                require_correct=False, require_closed=False, drop_longest_fraction=0.0, intersect_models=False
            ),
        ),
        interventions=InterventionsConfig(names=["toy/paraphrase", "toy/random_characters"], timesteps=[0.5, 0.9]),
        continuation=SamplingConfig(n=2, max_new_tokens=16),
        grading=GradingConfig(workers=1),
    )
    run_pipeline(config, stages=["problems", "traces", "filter", "chains"], progress=False, make_generator=hf_factory)
    return run_dir


def _table(run_dir, name):
    from recovery.store import Table

    return list(Table(run_dir / name).iter_rows())


def _expected_prefixes(run_dir) -> dict[str, tuple[str, str]]:
    """chain id → (original prefix, paraphrase), rebuilt here from the raw tables, independently."""
    traces = {t["id"]: t["text"] for t in _table(run_dir, "traces")}
    out = {}
    for chain in _table(run_dir, "chains"):
        if chain["intervention"] != "toy/paraphrase":
            continue
        text = traces[chain["trace_id"]]
        reasoning = text.split("<think>", 1)[-1].split("</think>", 1)[0]
        original = "\n\n".join(reasoning.split("\n\n")[: chain["cut_index"] + 1])
        assert len(original) == chain["original_prefix_chars"]
        out[chain["id"]] = (original, chain["inserted_text"])
    return out


class ScriptedJudge:
    """A `Generator` that answers from ``replies`` (chain id → text, or an exception message to return as a
    generation error), recognising the chain by its exact paraphrase block in the prompt."""

    concurrency = 1  # the Generator protocol: one request in flight

    name = "scripted-judge"

    def __init__(self, expected: dict[str, tuple[str, str]], replies: dict[str, str], fail: set[str] = frozenset()):
        self.expected, self.replies, self.fail = expected, replies, set(fail)
        self.seen: list[str] = []

    def generate(self, requests):
        for request in requests:
            system, user = request.messages
            assert system.role == "system" and user.role == "user"
            assert request.sampling.temperature == 0.0  # greedy judge
            (chain_id,) = [
                c
                for c, (_, para) in self.expected.items()
                if f"Rewritten reasoning:\n<<<\n{para.strip()}\n>>>" in user.content
            ]
            original = self.expected[chain_id][0]
            assert f"Original reasoning:\n<<<\n{original.strip()}\n>>>" in user.content
            self.seen.append(chain_id)
            if chain_id in self.fail:
                yield GenerationResult(request.request_id, (), 0, error="RuntimeError: server went away")
            else:
                yield GenerationResult(request.request_id, (Sample(self.replies[chain_id], 3, "stop"),), 100)

    def close(self):
        pass


SCRIPT = ["Yes", "<think>Comparing the two.</think>\nNo", "Maybe?", "Answer: Yes"]
SCRIPT_VERDICT = [YES, NO, UNPARSEABLE, YES]  # read by hand


def test_paraphrase_check_on_a_real_run(toy_run, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(toy_run, run_dir)
    expected = _expected_prefixes(run_dir)
    assert len(expected) == 8
    order = sorted(expected)
    replies = {c: SCRIPT[i % 4] for i, c in enumerate(order)}
    verdict_of = {c: SCRIPT_VERDICT[i % 4] for i, c in enumerate(order)}

    # A chain whose trace is gone cannot be rebuilt: counted, not judged.
    from recovery.run_dir import records
    from recovery.store import Table

    orphan = dict(next(c for c in _table(run_dir, "chains") if c["intervention"] == "toy/paraphrase"))
    orphan.update(id="f" * 16, key="e" * 16, trace_id="0" * 16)
    with Table(run_dir / "chains").writer(records.CHAINS, writer_id="test") as writer:
        writer.add(orphan)

    config = ParaphraseCheckConfig(judge=ModelConfig(name="scripted-judge"), per_domain=5, seed=0, max_new_tokens=32)
    # The judge fails once on a chain of the sample (a server error): stored as such, retried next time.
    failing = pq.sample_per_domain(pq.paraphrase_items(run_dir), 5, seed=0)[1].chain_id
    judge = ScriptedJudge(expected, replies, fail={failing})
    result = pq.run_paraphrase_check(run_dir, config, make_generator=lambda m: judge, progress=False)

    assert dict(result.skips.counts) == {"trace_not_found": 1}
    sampled = [r["chain_id"] for r in result.rows]
    assert len(sampled) == 5 and set(sampled) <= set(expected) and sorted(judge.seen) == sorted(sampled)
    assert result.written == 5
    want = [GENERATION_ERROR if c == failing else verdict_of[c] for c in sampled]
    assert [r["verdict"] for r in result.rows] == want
    toy = next(r for r in result.rates if r.group == "toy")
    assert (toy.n, toy.yes, toy.no, toy.unparseable, toy.errors) == (
        5,
        want.count(YES),
        want.count(NO),
        want.count(UNPARSEABLE),
        want.count(GENERATION_ERROR),
    )
    assert toy.rate == want.count(YES) / 5

    stored = json.loads((run_dir / "analysis" / "paraphrase" / "section.json").read_text())
    assert stored["section"]["title"] == "Paraphrase quality"
    md = (run_dir / "report" / "report.md").read_text()
    assert "## Paraphrase quality" in md and "trace_not_found" in md

    # Resume: only the generation error is asked again; now it succeeds and replaces the error.
    judge2 = ScriptedJudge(expected, replies)
    again = pq.run_paraphrase_check(run_dir, config, make_generator=lambda m: judge2, progress=False)
    assert judge2.seen == [failing] and again.written == 1
    assert [r["chain_id"] for r in again.rows] == sampled
    assert [r["verdict"] for r in again.rows] == [verdict_of[c] for c in sampled]

    # Another seed draws another sample from the same chains.
    other = pq.run_paraphrase_check(
        run_dir,
        ParaphraseCheckConfig(judge=config.judge, per_domain=5, seed=3),
        make_generator=lambda m: ScriptedJudge(expected, replies),
        progress=False,
        rerender=False,
    )
    assert sorted(r["chain_id"] for r in other.rows) != sorted(sampled)


def test_run_without_paraphrase_chains_reports_nothing_judged(toy_run, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(toy_run, run_dir)
    config = ParaphraseCheckConfig(judge=ModelConfig(name="j"), interventions=["paraphrase"])  # the paper's name only

    def never(model):
        raise AssertionError("no judge is needed when there is nothing to judge")

    result = pq.run_paraphrase_check(run_dir, config, make_generator=never, progress=False)
    assert result.rows == [] and result.written == 0
    assert "No paraphrase chain was judged" in result.section.markdown
    with pytest.raises(ValueError, match="no chains table"):
        pq.paraphrase_items(tmp_path)


def test_judge_config_from_yaml_and_cli_options(tmp_path):
    from typer.testing import CliRunner

    from recovery.cli import app

    path = tmp_path / "judge.yaml"
    path.write_text("judge: {name: gpt-judge, backend: openai, base_url: 'http://localhost:8000/v1'}\nper_domain: 7\n")
    cfg = pq.load_paraphrase_config(path, {"seed": 4})
    assert (cfg.judge.name, cfg.judge.backend, cfg.per_domain, cfg.seed, cfg.temperature) == (
        "gpt-judge",
        "openai",
        7,
        4,
        0.0,
    )
    path.write_text("judge: {name: j}\nper_domian: 7\n")
    with pytest.raises(ValueError, match="did you mean 'per_domain'"):
        pq.load_paraphrase_config(path)
    runner = CliRunner()
    both = runner.invoke(app, ["analyze", "paraphrase", str(tmp_path), "--config", str(path), "--judge-path", "x"])
    assert both.exit_code == 2 and "not both" in both.output
    not_a_run = runner.invoke(app, ["analyze", "paraphrase", str(tmp_path), "--judge-path", "tiny-reasoner"])
    assert not_a_run.exit_code == 2 and "no chains table" in not_a_run.output
