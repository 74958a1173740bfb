"""Activation probes (paper App. C): the probe itself on hand-made data, the hooks against transformers'
own hidden states, and a whole run on a toy run directory with the real tiny reasoner."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow.parquet as pq
import pytest

from recovery.analysis.activation_probes import (
    CLEAN,
    ProbeConfig,
    build_probe_dataset,
    find_decoder_layers,
    record_residuals,
    run_probes,
    split_indices,
    train_probe,
)

torch = pytest.importorskip("torch")


# ------------------------------------------------------------------------------------- probe on numbers


def test_probe_is_perfect_on_linearly_separable_activations():
    rng = np.random.default_rng(0)
    y = np.array([0, 1] * 200)
    X = rng.normal(size=(400, 8))
    # Feature 0 is +1..+2 for class 1 and −2..−1 for class 0: a margin of 2, so any fitted line separates it.
    X[:, 0] = np.where(y == 1, 1, -1) * (1 + rng.random(400))
    train, test = split_indices(y, 0.2, seed=0)
    score = train_probe(X, y, train, test)
    assert (score.n_train, score.n_test) == (320, 80)
    assert score.accuracy == 1.0 and score.train_accuracy == 1.0
    assert score.chance == 0.5 and score.converged


def test_probe_is_at_chance_when_labels_carry_no_signal():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(2000, 8))
    y = rng.permutation(np.array([0, 1] * 1000))  # shuffled labels, independent of X
    train, test = split_indices(y, 0.2, seed=0)
    score = train_probe(X, y, train, test)
    # 400 test points: the standard deviation of chance accuracy is 0.025, so ±0.075 is three of them.
    assert score.n_test == 400
    assert abs(score.accuracy - 0.5) < 0.075


def test_split_is_stratified_seeded_and_the_papers_size():
    labels = [0] * 600 + [1] * 600  # paper: 600 clean + 600 intervened → 960 train / 240 test
    train, test = split_indices(labels, 0.2, seed=3)
    assert (len(train), len(test)) == (960, 240)
    assert sum(labels[i] for i in test) == 120  # stratified: half of the test split is intervened
    assert not set(train) & set(test)
    again, _ = split_indices(labels, 0.2, seed=3)
    other, _ = split_indices(labels, 0.2, seed=4)
    assert np.array_equal(train, again) and not np.array_equal(train, other)


def test_an_intervention_too_small_to_split_is_skipped_and_counted():
    from collections import Counter

    from recovery.analysis.activation_probes import ProbeExample, probe_accuracies

    def ex(group, k):
        return ProbeExample(f"{group}{k}", group, int(group != CLEAN), "m", "t", "p", "", k, "x\n\n")

    examples = [ex(CLEAN, k) for k in range(10)] + [ex("big", k) for k in range(10)] + [ex("tiny", 0)]
    acts = np.random.default_rng(0).normal(size=(2, len(examples), 3))
    skips = Counter()
    rows = probe_accuracies(acts, examples, ProbeConfig(), skips)
    assert {r["intervention"] for r in rows} == {"big"} and len(rows) == 2
    assert skips == {"tiny/too_few_examples_for_a_split": 1}


def test_probe_refuses_a_training_split_with_one_class():
    X = np.zeros((4, 2))
    with pytest.raises(ValueError, match="one class"):
        train_probe(X, [0, 0, 1, 1], np.array([0, 1]), np.array([2, 3]))


# ------------------------------------------------------------------------------------------ the hooks


@pytest.fixture(scope="module")
def tiny():
    from recovery.models import get_spec
    from recovery.toy import has_checkpoint, load_tiny_reasoner

    if not has_checkpoint():
        pytest.skip("tiny reasoner checkpoint not shipped")
    model, tokenizer = load_tiny_reasoner()
    return model, tokenizer, get_spec("tiny-reasoner")


def _hidden_states(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids]), output_hidden_states=True).hidden_states


def test_hooks_capture_each_layers_input_residual(tiny):
    model, tokenizer, _ = tiny
    ids = tokenizer.encode("Start with 5. Step A: add 6. 5 + 6 = 11.", add_special_tokens=False)
    prompts = [ids[:3], ids[:8], ids]
    assert find_decoder_layers(model) is model.model.layers
    n_layers = len(model.model.layers)
    # One prompt per batch (no padding): transformers' hidden_states[l] is exactly the input of layer l.
    single = record_residuals(model, prompts, batch_size=1)
    assert single.shape == (n_layers, 3, model.config.hidden_size)
    for i, p in enumerate(prompts):
        hs = _hidden_states(model, p)
        for layer in range(n_layers):
            assert torch.equal(hs[layer][0, -1], torch.from_numpy(single[layer, i])), (i, layer)
        # ... and not the output: the next layer's input differs from this one's.
        assert not torch.equal(hs[1][0, -1], hs[0][0, -1])
    # Batched with left padding (prompts of 3, 8 and all tokens): the same values up to float rounding.
    padded = record_residuals(model, prompts, batch_size=3, pad_id=tokenizer.pad_token_id)
    np.testing.assert_allclose(padded, single, rtol=0, atol=1e-5)


def test_hooks_find_the_blocks_of_a_gpt2_style_model():
    from transformers import GPT2Config, GPT2LMHeadModel

    with torch.random.fork_rng():  # random init without touching the global RNG
        torch.manual_seed(0)
        model = GPT2LMHeadModel(
            GPT2Config(n_layer=3, n_embd=32, n_head=2, vocab_size=50, n_positions=64, bos_token_id=0, eos_token_id=0)
        ).eval()
    assert find_decoder_layers(model) is model.transformer.h
    acts = record_residuals(model, [[1, 2, 3], [4, 5, 6, 7, 8]], batch_size=2)
    for i, ids in enumerate([[1, 2, 3], [4, 5, 6, 7, 8]]):
        hs = _hidden_states(model, ids)
        for layer in range(3):
            np.testing.assert_allclose(acts[layer, i], hs[layer][0, -1].numpy(), rtol=0, atol=1e-5)


def test_layer_finder_and_recorder_reject_what_they_cannot_use(tiny):
    model, _, _ = tiny
    with pytest.raises(ValueError, match="cannot find the decoder layers"):
        find_decoder_layers(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="empty"):
        record_residuals(model, [[1, 2], []])


# ------------------------------------------------------------------------------------ on a toy run dir


INTERVENTIONS = ["toy/random_characters", "toy/wrong_continuation"]


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory, tiny):
    """A real toy run (problems → traces → filter → chains) generated by the tiny reasoner."""
    from recovery.backends.hf import HFGenerator
    from recovery.pipeline import (
        DatasetConfig,
        FilterConfig,
        InterventionsConfig,
        RunConfig,
        SamplingConfig,
        TracesConfig,
        run_pipeline,
    )

    model, tokenizer, spec = tiny
    run_dir = tmp_path_factory.mktemp("probes") / "run"
    config = RunConfig(
        run_dir=str(run_dir),
        dataset=DatasetConfig(name="toy", limit=8, options={"seed": 5}),
        traces=TracesConfig(
            sampling=SamplingConfig(n=1, temperature=0.0, top_p=1.0, max_new_tokens=200),
            filters=FilterConfig(require_correct=False, drop_longest_fraction=0.0),
        ),
        interventions=InterventionsConfig(names=INTERVENTIONS, timesteps=[0.3, 0.5, 0.7]),
    )
    run_pipeline(
        config,
        stages=["problems", "traces", "filter", "chains"],
        make_generator=lambda m: HFGenerator(model, tokenizer, spec=spec, seed=0),
        progress=False,
    )
    return run_dir


def _chains(run_dir):
    from recovery.store import Table

    return {r["id"]: r for r in Table(run_dir / "chains").iter_rows()}


def test_dataset_holds_clean_step_prefixes_and_the_stored_chains(toy_run):
    from recovery.run_dir import open_run

    examples, skips = build_probe_dataset(toy_run, ProbeConfig(n_clean=12, n_per_intervention=5, seed=1), min_steps=2)
    groups = [ex.group for ex in examples]
    assert groups.count(CLEAN) == 12 and all(groups.count(n) == 5 for n in INTERVENTIONS)
    assert not skips
    chains = _chains(toy_run)
    traces = open_run(toy_run).traces()
    for ex in examples:
        assert ex.prefix.endswith("\n\n") and not ex.prefix.endswith("\n\n\n\n")
        if ex.group == CLEAN:
            assert ex.label == 0 and ex.chain_id == ""
            reasoning = traces[ex.trace_id].reasoning
            # A step boundary that keeps ≥ 2 steps and is not the whole reasoning.
            body = ex.prefix[:-2]
            assert reasoning.startswith(body + "\n\n") and body.count("\n\n") == ex.cut_index >= 1
        else:
            assert ex.label == 1 and ex.prefix == chains[ex.chain_id]["prefix"] + "\n\n"
            assert chains[ex.chain_id]["intervention"] == ex.group
    # Clean prefixes are drawn trace by trace: 8 traces, so 12 prefixes touch every trace.
    assert len({ex.trace_id for ex in examples if ex.group == CLEAN}) == 8
    assert len({ex.id for ex in examples}) == len(examples)
    # Same seed, same dataset; another seed, another one.
    again, _ = build_probe_dataset(toy_run, ProbeConfig(n_clean=12, n_per_intervention=5, seed=1), min_steps=2)
    other, _ = build_probe_dataset(toy_run, ProbeConfig(n_clean=12, n_per_intervention=5, seed=2), min_steps=2)
    assert again == examples and other != examples


def test_dataset_counts_what_it_cannot_draw_and_names_bad_choices(toy_run):
    n_chains = sum(1 for c in _chains(toy_run).values() if c["intervention"] == INTERVENTIONS[0])
    examples, skips = build_probe_dataset(
        toy_run, ProbeConfig(n_per_intervention=n_chains + 7, interventions=INTERVENTIONS[:1])
    )
    assert sum(ex.group == INTERVENTIONS[0] for ex in examples) == n_chains
    assert skips[f"{INTERVENTIONS[0]}/fewer_chains_than_asked"] == 7
    with pytest.raises(ValueError, match="toy/paraphrase"):
        build_probe_dataset(toy_run, ProbeConfig(interventions=["toy/paraphrase"]))
    with pytest.raises(ValueError, match="'other-model'"):
        build_probe_dataset(toy_run, ProbeConfig(model="other-model"))


def test_probes_end_to_end_on_the_tiny_reasoner(toy_run, tiny):
    from recovery.analysis.cli_probes import rerender
    from recovery.report.sections_store import load_section

    cfg = ProbeConfig(n_clean=24, n_per_intervention=24, seed=0, batch_size=8, save_activations=True, progress=False)
    result = run_probes(toy_run, cfg, loaded=tiny)
    out = result.out_dir
    n_layers = len(tiny[0].model.layers)
    chains = _chains(toy_run)
    per = {n: min(24, sum(c["intervention"] == n for c in chains.values())) for n in INTERVENTIONS}
    assert result.counts == {CLEAN: 24, **per}

    rows = pq.read_table(out / "accuracies.parquet").to_pylist()
    assert rows == result.rows and len(rows) == n_layers * len(INTERVENTIONS)
    for r in rows:
        pairs = min(24, per[r["intervention"]])
        assert r["n_train"] + r["n_test"] == 2 * pairs and r["n_test"] == math.ceil(
            0.2 * 2 * pairs
        )  # sklearn rounds up
        assert 0.0 <= r["accuracy"] <= 1.0
    acts = np.load(out / "activations.npy")
    assert acts.shape == (n_layers, 24 + sum(per.values()), tiny[0].config.hidden_size)
    # Every prompt ends in the same blank-line token, so layer 0 (embeddings) cannot separate anything...
    assert np.all(acts[0] == acts[0, :1])
    assert all(r["accuracy"] <= 0.6 for r in rows if r["layer"] == 0)
    # ... while after attention the final token has seen the prefix: random characters are easy to spot.
    best = max(r["accuracy"] for r in rows if r["intervention"] == "toy/random_characters")
    assert best >= 0.8

    meta = json.loads((out / "probes.json").read_text())
    assert meta["n_layers"] == n_layers and meta["truncated_prompts"] == 0 and meta["max_prompt_tokens"] == 1024
    section = load_section(toy_run, "probes")
    assert section.title == "Activation probes" and section.figures[0].png_bytes.startswith(b"\x89PNG")
    assert [row[1] for row in section.tables[0].rows] == INTERVENTIONS

    # Same seed → the same bytes.
    before = (out / "accuracies.parquet").read_bytes(), (out / "examples.parquet").read_bytes()
    run_probes(toy_run, cfg, loaded=tiny)
    assert ((out / "accuracies.parquet").read_bytes(), (out / "examples.parquet").read_bytes()) == before

    html = rerender(toy_run)
    md = (html.parent / "report.md").read_text()
    assert "## Activation probes" in md and "probes_accuracy_by_layer" in md


def test_long_prompts_are_truncated_from_the_left_and_counted(toy_run, tiny):
    from recovery.analysis.activation_probes import probe_prompts
    from recovery.run_dir import open_run

    cfg = ProbeConfig(n_clean=6, n_per_intervention=3, max_prompt_tokens=40, progress=False)
    examples, _ = build_probe_dataset(toy_run, cfg, min_steps=2)
    run = open_run(toy_run)
    full = probe_prompts(examples, tiny[1], tiny[2], run.config, run.problems())
    result = run_probes(toy_run, cfg, loaded=tiny)
    stored = pq.read_table(result.out_dir / "examples.parquet").to_pylist()
    assert [e["prompt_tokens"] for e in stored] == [min(len(p), 40) for p in full]
    assert result.meta["truncated_prompts"] == sum(len(p) > 40 for p in full) > 0


def test_cli_runs_the_probes_and_names_bad_options(toy_run):
    from typer.testing import CliRunner

    from recovery.cli import app

    runner = CliRunner()
    ok = runner.invoke(
        app,
        [
            "analyze",
            "probes",
            str(toy_run),
            "--n-clean",
            "6",
            "--n-per-intervention",
            "3",
            "--no-progress",
            "--no-report",
        ],
    )
    assert ok.exit_code == 0, ok.output
    assert "toy/random_characters: accuracy by layer" in ok.output
    bad = runner.invoke(app, ["analyze", "probes", str(toy_run), "--interventions", "nope", "--no-progress"])
    assert bad.exit_code == 2 and "nope" in bad.output
