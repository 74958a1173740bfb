"""The paper's ablations (Tables 7–10): table arithmetic on hand-made rows, and the swap / between pipeline
options end to end on the tiny reasoner (real HF generation, real run directories, real reports)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from recovery.analysis import ablation_runs as ar
from recovery.analysis import ablations as ab
from recovery.configs import ConfigError
from recovery.metrics import ChainOutcome
from recovery.pipeline.validate import load_run_config
from recovery.run_dir import open_run
from recovery.store import Table

EVAL = Path(__file__).resolve().parents[2] / "eval" / "ablations"


def agg(model, intervention, t, majority, domain="logic", n_chains=10):
    return {
        "model": model,
        "domain": domain,
        "intervention": intervention,
        "target_t": t,
        "majority_mean": majority,
        "n_chains": n_chains,
    }


# ------------------------------------------------------------------------------------ table arithmetic


BASE = [
    agg("A", "wrong_continuation", 0.3, 0.5),
    agg("A", "complete_step", 0.3, 0.8),
    agg("B", "wrong_continuation", 0.3, 0.9),
    agg("B", "complete_step", 0.3, 1.0),
    agg("A", "wrong_continuation", 0.5, 0.6),
    agg("A", "wikipedia_text", 0.3, 0.7),
    agg("B", "complete_step", 0.5, 0.4),
]
WAIT = [
    agg("A", "wrong_continuation", 0.3, 0.625),
    agg("A", "complete_step", 0.3, 0.75),
    agg("B", "wrong_continuation", 0.3, 0.95),
    agg("B", "complete_step", 0.3, 1.0),
    agg("A", "wrong_continuation", 0.5, 0.65),
    agg("B", "wrong_continuation", 0.5, 0.9),
    agg("B", "complete_step", 0.5, None),
]


def test_wait_deltas_tables_7_and_8_by_hand():
    comp = ab.match_wait(BASE, WAIT)
    deltas = {(d.model, d.intervention, d.target_t): d.delta_pp for d in comp.deltas}
    assert deltas == pytest.approx(
        {
            ("A", "wrong_continuation", 0.3): 12.5,
            ("A", "complete_step", 0.3): -5.0,
            ("B", "wrong_continuation", 0.3): 5.0,
            ("B", "complete_step", 0.3): 0.0,
            ("A", "wrong_continuation", 0.5): 5.0,
        }
    )
    assert sorted((u.run, u.model, u.intervention, u.target_t, u.reason) for u in comp.unmatched) == [
        ("base", "A", "wikipedia_text", 0.3, "only in the base run"),
        ("wait", "B", "complete_step", 0.5, "no majority robustness value"),
        ("wait", "B", "wrong_continuation", 0.5, "only in the wait run"),
    ]
    t7 = ab.wait_by_model(comp, "logic")  # rows t, columns models, mean over interventions
    assert (t7.index, t7.columns) == ((0.3, 0.5), ("A", "B"))
    assert t7.cell(0.3, "A") == pytest.approx(3.75) and t7.cell(0.3, "B") == pytest.approx(2.5)
    assert t7.cell(0.5, "A") == pytest.approx(5.0) and math.isnan(t7.cell(0.5, "B"))
    t8 = ab.wait_by_intervention(comp, "logic")  # columns in the paper's category order: benign first
    assert t8.columns == ("complete_step", "wrong_continuation")
    assert t8.cell(0.3, "wrong_continuation") == pytest.approx(8.75)
    assert t8.cell(0.3, "complete_step") == pytest.approx(-2.5)
    assert t8.counts == ((2, 2), (0, 1))
    section = ab.wait_section(comp, base_label="base", wait_label="wait", figures=False)
    table7 = section.tables[0]
    assert [list(r) for r in table7.rows] == [["0.3", "+3.75", "+2.50"], ["0.5", "+5.00", "–"]]
    assert section.tables[-1].title == "Unmatched groups" and len(section.tables[-1].rows) == 3


def test_wait_refuses_repeated_groups():
    with pytest.raises(ValueError, match="base run aggregate rows repeat"):
        ab.match_wait([agg("A", "x", 0.3, 0.5), agg("A", "x", 0.3, 0.6)], [])


def test_swap_matrix_by_hand():
    run1 = [
        agg("A", "complete_step", 0.3, 0.5),
        agg("A", "wrong_continuation", 0.3, 0.7),
        agg("B→A", "complete_step", 0.3, 0.4),
        agg("B→A", "wrong_continuation", 0.3, 0.6),
        agg("A", "complete_step", 0.5, 0.1),
    ]
    run2 = [
        agg("B", "complete_step", 0.3, 0.9),
        agg("B", "wrong_continuation", 0.3, 1.0),
        agg("A→B", "complete_step", 0.3, 0.8),
        agg("A", "complete_step", 0.3, 0.3),
    ]
    result = ab.swap_cells([("r1", run1), ("r2", run2)], target_t=0.3)
    matrix = ab.swap_matrix(result, "logic")
    assert (matrix.index, matrix.columns) == (("A", "B"), ("A", "B"))
    assert [c for r in matrix.cells for c in r] == pytest.approx([60.0, 80.0, 50.0, 95.0])
    assert matrix.counts == ((2, 1), (2, 2))
    # The same group in a later run is a duplicate: the first run's value stands.
    assert [(d.original, d.swapped, d.run, d.majority) for d in result.duplicates] == [("A", "A", "r2", 0.3)]


def outcome(model, k, t=0.3, n=8, iv="wrong_continuation"):
    return ChainOutcome(f"{model}-{k}-{t}-{n}", model, "logic", iv, "adversarial", t, n, k)


def test_repeats_accuracy_by_hand():
    runs = [
        (1, "k1", [outcome("A", 8), outcome("A", 4), outcome("A", 5), outcome("A", 0, t=0.5), outcome("B", 2)]),
        (2, "k2", [outcome("A", 3), outcome("A", 3), outcome("B", 8)]),
        (2, "k2-again", [outcome("A", 0)]),
    ]
    result = ab.repeat_cells(runs, target_t=0.3)
    acc = ab.repeats_pivot(result, "logic", lambda c: 100 * c.accuracy)
    assert (acc.index, acc.columns) == (("A", "B"), (1, 2))
    assert [c for r in acc.cells for c in r] == pytest.approx([100 * 17 / 24, 37.5, 25.0, 100.0])
    maj = ab.repeats_pivot(result, "logic", lambda c: 100 * c.majority)
    assert [c for r in maj.cells for c in r] == pytest.approx([100 * 2 / 3, 0.0, 0.0, 100.0])
    assert [(d.model, d.k, d.run) for d in result.duplicates] == [("A", 2, "k2-again")]
    table = ab.repeats_section(result, ["k1", "k2"], figures=False).tables[0]
    assert list(table.columns) == ["Model", "k=1", "k=2"] and list(table.rows[0]) == ["A", "70.8", "37.5"]


# -------------------------------------------------------------------------------------------- configs


def test_ablation_configs_parse_and_fix_t():
    wait = load_run_config(EVAL / "logic_wait.yaml")
    base = load_run_config(EVAL.parent / "logic.yaml")
    assert ar.config_differences(base, wait) == ["interventions.append_wait"]
    swaps = sorted(EVAL.glob("logic_swap_*.yaml"))
    assert len(swaps) == 3
    targets = set()
    for path in swaps:
        cfg = load_run_config(path)
        assert cfg.interventions.timesteps == [0.3] and cfg.swap_to in [m.name for m in cfg.models]
        targets.add(cfg.swap_to)
    assert targets == {"DeepSeek-R1-Distill-Qwen-1.5B", "DeepSeek-R1-Distill-Llama-8B", "QwQ-32B"}
    rep = load_run_config(EVAL / "logic_repeats.yaml")
    assert (rep.interventions.names, rep.interventions.timesteps, rep.interventions.between) == (
        ["wrong_continuation"],
        [0.3],
        "model",
    )
    assert all(m.backend == "vllm" for c in (wait, rep) for m in c.models)


def write_config(tmp_path, **changes) -> Path:
    import yaml

    data = yaml.safe_load((EVAL / "toy_swap_to_greedy.yaml").read_text())
    for dotted, value in changes.items():
        node = data
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    return path


def test_bad_configs_give_clear_errors(tmp_path):
    with pytest.raises(
        ConfigError, match="swap_to 'QwQ' is not one of the run's models \\(tiny-sampled, tiny-greedy\\)"
    ):
        load_run_config(write_config(tmp_path, swap_to="QwQ"))
    with pytest.raises(ConfigError, match="interventions.between: 'paragraph' is not one of 'original', 'model'"):
        load_run_config(write_config(tmp_path, **{"interventions.between": "paragraph"}))
    with pytest.raises(ConfigError, match="between_max_new_tokens must be ≥ 1"):
        load_run_config(write_config(tmp_path, **{"interventions.between_max_new_tokens": 0}))
    with pytest.raises(ConfigError, match="must not contain '→'"):
        load_run_config(write_config(tmp_path, models=[{"name": "a→b"}, {"name": "tiny-greedy"}]))


# ------------------------------------------------------------------------- end to end on the tiny reasoner


@pytest.fixture(scope="module")
def runs(tmp_path_factory, hf_factory):
    """Small real runs of the toy ablation configs (4 problems, N=2), shared by the tests below."""
    from recovery.pipeline import run_pipeline
    from recovery.pipeline.stages import STAGES

    root = tmp_path_factory.mktemp("ablations")
    out = {}
    for name in ("toy_wait_base", "toy_wait", "toy_swap_to_greedy"):
        cfg = load_run_config(EVAL / f"{name}.yaml", {"run_dir": str(root / name)})
        if name == "toy_wait":
            ar.copy_originals(root / "toy_wait_base", cfg.run_dir)  # same original traces as the base run
        # No report stage: each analysis below writes the report of the runs it uses.
        run_pipeline(
            cfg, stages=[s for s in STAGES if s != "report"], make_generator=hf_factory, progress=False, n_boot=50
        )
        out[name] = Path(cfg.run_dir)
    rep = load_run_config(EVAL / "toy_repeats.yaml", {"run_dir": str(root / "repeats")})
    out["repeats_result"] = ar.run_repeats_sweep(rep, (1, 2), make_generator=hf_factory, progress=False, n_boot=50)
    out["repeats"] = root / "repeats"
    return out


def aggregates(run_dir: Path) -> list[dict]:
    return json.loads((run_dir / "aggregates.json").read_text())


def test_wait_end_to_end(runs):
    base, wait = runs["toy_wait_base"], runs["toy_wait"]
    assert all(r["prefix"].endswith("\n\nWait") for r in Table(wait / "chains").iter_rows(["prefix"]))
    comp = ar.analyze_wait(base, wait)
    expected = {(r["model"], r["intervention"], r["target_t"]): r["majority_mean"] for r in aggregates(base)}
    for r in aggregates(wait):
        key = (r["model"], r["intervention"], r["target_t"])
        assert 100 * (r["majority_mean"] - expected[key]) == pytest.approx(
            next(d.delta_pp for d in comp.deltas if (d.model, d.intervention, d.target_t) == key)
        )
    assert len(comp.deltas) == len(expected) == 4 and not comp.unmatched
    stored = json.loads((wait / "analysis" / "ablation_wait" / "results.json").read_text())
    assert stored["shared_traces"] == stored["base_traces"] > 0 and stored["config_differences"] == []
    for run in (base, wait):
        md = (run / "report" / "report.md").read_text()
        assert 'Ablation: appending "Wait"' in md and "averaged across interventions — toy" in md
    with pytest.raises(ValueError, match="has interventions.append_wait=true; pass the run without Wait first"):
        ar.analyze_wait(wait, base)


def test_swap_end_to_end(runs):
    swap = runs["toy_swap_to_greedy"]
    conts = list(Table(swap / "continuations").iter_rows(["chain_id", "model", "text"]))
    chains = {r["id"]: r["model"] for r in Table(swap / "chains").iter_rows(["id", "model"])}
    assert {chains[c["chain_id"]] for c in conts} == {"tiny-sampled", "tiny-greedy"}
    assert {c["model"] for c in conts} == {"tiny-greedy"}  # every chain continued by swap_to
    # Every model continues at the run's continuation decoding (Table 15), B included: N sampled texts.
    by_chain: dict[str, set] = {}
    for c in conts:
        by_chain.setdefault(c["chain_id"], set()).add(c["text"])
    assert any(len(texts) > 1 for texts in by_chain.values())
    rows = aggregates(swap)
    assert {r["model"] for r in rows} == {"tiny-greedy", "tiny-sampled→tiny-greedy"}
    result = ar.analyze_swap([swap], 0.3)
    matrix = ab.swap_matrix(result, "toy")
    for label, (orig, swapped) in (
        ("tiny-sampled→tiny-greedy", ("tiny-sampled", "tiny-greedy")),
        ("tiny-greedy", ("tiny-greedy", "tiny-greedy")),
    ):
        values = [100 * r["majority_mean"] for r in rows if r["model"] == label]
        assert len(values) == 2 and matrix.cell(orig, swapped) == pytest.approx(sum(values) / 2)
    assert math.isnan(matrix.cell("tiny-greedy", "tiny-sampled"))
    md = (swap / "report" / "report.md").read_text()
    assert "tiny-sampled→tiny-greedy" in md and "Majority robustness after swapping models (%) — toy" in md
    with pytest.raises(ValueError, match=r"no aggregate rows at t=0.9 .* timesteps present: \[0.3\]"):
        ar.analyze_swap([swap], 0.9)


def test_analysis_is_byte_deterministic(runs):
    folder = runs["toy_swap_to_greedy"] / "analysis" / "ablation_swap"
    ar.analyze_swap([runs["toy_swap_to_greedy"]], 0.3, render=False)
    first = {p.name: p.read_bytes() for p in folder.iterdir()}
    ar.analyze_swap([runs["toy_swap_to_greedy"]], 0.3, render=False)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == first
    assert any(name.endswith(".png") for name in first)


def test_between_paragraph_comes_from_the_chains_model(runs, hf_factory):
    from recovery.interventions import intervene
    from recovery.pipeline.between import ModelBetween
    from recovery.plan import plan_for
    from recovery.run_dir.records import chain_from_row, problem_from_row
    from recovery.segment import parse_trace

    k2 = runs["repeats"] / "k2"
    cfg = open_run(k2).config
    assert cfg.interventions.repeats == 2 and cfg.interventions.between == "model"
    problems = {r["id"]: problem_from_row(r) for r in Table(k2 / "problems").iter_rows()}
    traces = {r["id"]: parse_trace(r["problem_id"], r["model"], r["text"]) for r in Table(k2 / "traces").iter_rows()}
    stored = [chain_from_row(r) for r in Table(k2 / "chains").iter_rows()]
    assert stored and all(c.options["between"] == "model:tiny-reasoner" for c in stored)
    differs_from_original = 0
    for chain in stored:
        problem, trace = problems[chain.problem_id], traces[chain.trace_id]
        between = ModelBetween(
            hf_factory(cfg.models[0]),
            model=cfg.models[0],
            prompts=plan_for(cfg).prompts,
            problem=problem,
            sampling=cfg.continuation,
            max_new_tokens=cfg.interventions.between_max_new_tokens,
            seed=cfg.continuation.seed,
            think_close="</think>",
        )
        args = {"seed": cfg.interventions.seed, "min_steps": cfg.interventions.min_steps}
        first_round = intervene(problem, trace, "toy/wrong_continuation", 0.3, **args).prefix
        paragraph = between(first_round).strip()
        assert paragraph and "\n\n" not in paragraph
        # The stored chain = round 1, the model's paragraph, then round 2's wrong step after it.
        assert chain.prefix.startswith(f"{first_round}\n\n{paragraph}\n\n")
        again = intervene(problem, trace, "toy/wrong_continuation", 0.3, repeats=2, between=between, **args)
        assert (again.prefix, again.id) == (chain.prefix, chain.id)
        original = intervene(problem, trace, "toy/wrong_continuation", 0.3, repeats=2, **args)
        differs_from_original += original.prefix != chain.prefix
    assert differs_from_original >= 1


def test_repeats_table_end_to_end(runs):
    from recovery.types import Verdict

    result = runs["repeats_result"]
    assert sorted({c.k for c in result.cells}) == [1, 2]
    for k in (1, 2):
        run = runs["repeats"] / f"k{k}"
        verdicts = [g["verdict"] for g in Table(run / "grades").iter_rows(["verdict"])]
        cell = next(c for c in result.cells if c.k == k)
        assert (cell.n_samples, cell.correct) == (len(verdicts), verdicts.count(Verdict.CORRECT.value))
        md = (run / "report" / "report.md").read_text()
        assert "Accuracy (%) under k consecutive interventions — toy" in md
    # The k2 run intervened on the k1 run's original traces (copied, not regenerated).
    ids = [{r["id"] for r in Table(runs["repeats"] / f"k{k}" / "traces").iter_rows(["id"])} for k in (1, 2)]
    assert ids[0] == ids[1]
    with pytest.raises(ValueError, match="neither a run directory"):
        ar.expand_runs([runs["repeats"] / "k1" / "analysis"])


def test_between_needs_the_traces_model(runs, hf_factory, tmp_path):
    from recovery.pipeline.between import make_between
    from recovery.pipeline.context import StageContext
    from recovery.plan import plan_for
    from recovery.run_dir.records import problem_from_row
    from recovery.segment import parse_trace
    from recovery.store import RunDir

    k2 = runs["repeats"] / "k2"
    cfg = dataclasses.replace(open_run(k2).config, run_dir=str(tmp_path))
    problem = problem_from_row(next(Table(k2 / "problems").iter_rows()))
    trace = parse_trace(problem.id, "someone-else", "<think>a\n\nb\n\nc</think> x")
    ctx = StageContext(plan=plan_for(cfg), run=RunDir(tmp_path), make_generator=hf_factory, progress=False)
    with pytest.raises(ValueError, match="written by 'someone-else', which is not one of the run's models"):
        make_between(ctx, problem, trace)


def test_cli_commands(runs):
    from typer.testing import CliRunner

    from recovery.cli import app

    cli = CliRunner()
    ok = cli.invoke(app, ["analyze", "repeats", str(runs["repeats"])])
    assert ok.exit_code == 0, ok.output
    assert "| Model | k=1 | k=2 |" in ok.output
    bad = cli.invoke(app, ["analyze", "wait", str(runs["toy_wait"]), str(runs["toy_wait_base"])])
    assert bad.exit_code == 1 and "append_wait=true" in bad.output
