"""A toy `recovery run` through ``backend: openai`` against ``transformers serve`` (started here on a free
127.0.0.1 port), end to end: the backend probes the server, sends text prompts and one seeded request per
sample, every chain gets its N continuations, and majority robustness agrees with the local HF run of the
same model within the paired interval. The run records the server's settings, and a resume against a
server that behaves differently is refused.

The server is real (`served.served`); the second one in the resume test is the project's test server.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("openai")

from served import served  # noqa: E402

N = 4


def toy_config(run_dir: Path, model: dict) -> str:
    """A small toy run: 8 problems, two interventions at one timestep, N continuations per chain."""
    config = {
        "run_dir": str(run_dir),
        "dataset": {"name": "toy", "limit": 8, "options": {"seed": 1000}},
        "models": [model],
        "traces": {"sampling": {"n": 1, "temperature": 0.6, "top_p": 0.95, "max_new_tokens": 320, "seed": 0}},
        "interventions": {"names": ["toy/complete_step", "toy/random_characters"], "timesteps": [0.5]},
        "continuation": {"n": N, "temperature": 0.6, "top_p": 0.95, "max_new_tokens": 320, "seed": 0},
        "grading": {"workers": 1, "alongside": False},
        "cpu_workers": 1,
    }
    path = run_dir.parent / f"{run_dir.name}.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    return str(path)


def recovery_run(config: str):
    from typer.testing import CliRunner

    from recovery.cli import app

    return CliRunner().invoke(app, ["run", config, "--no-progress"])


def test_toy_run_through_transformers_serve_matches_the_local_run(tmp_path) -> None:
    from recovery.models import tiny_reasoner_dir
    from recovery.report.compare import compute_comparison
    from recovery.store import Table

    model_dir = str(tiny_reasoner_dir())
    with served(model_dir, tmp_path / "serve.log") as url:
        served_model = {"name": "tiny-reasoner", "path": model_dir, "spec": "tiny-reasoner", "backend": "openai"}
        config = toy_config(tmp_path / "served", {**served_model, "base_url": url})
        result = recovery_run(config)
        assert result.exit_code == 0, result.output

    run = tmp_path / "served"
    servers = json.loads((run / "servers.json").read_text())
    assert servers["tiny-reasoner"]["settings"] == {
        "prompt_format": "text",
        "samples_per_request": "1",
        "strip_bos": False,
        "send_seed": True,
        "extra_body": {},
    }
    chains = Table(run / "chains").count()
    per_chain: dict[str, int] = {}
    for row in Table(run / "continuations").iter_rows(["chain_id"]):
        per_chain[row["chain_id"]] = per_chain.get(row["chain_id"], 0) + 1
    assert chains >= 8 and len(per_chain) == chains and set(per_chain.values()) == {N}, per_chain
    verdicts = [r["verdict"] for r in Table(run / "grades").iter_rows(["verdict"])]
    assert len(verdicts) == chains * N and verdicts.count("correct") > 0

    local = toy_config(tmp_path / "local", {"name": "tiny-reasoner", "backend": "hf"})
    assert recovery_run(local).exit_code == 0
    comparison = compute_comparison(tmp_path / "local", run, ("local", "served"))
    (overall,) = comparison.overall
    assert overall["majority_pairs"] >= 8
    assert overall["majority_ci_low"] <= 0 <= overall["majority_ci_high"], overall

    # The same run against a server that takes token ids and n samples per request: refused before any work.
    from completions_server import FakeCompletionsServer

    other = FakeCompletionsServer()
    try:
        resumed = recovery_run(toy_config(run, {**served_model, "base_url": other.url}))
    finally:
        other.close()
    assert resumed.exit_code == 2, resumed.output
    assert "behaves differently" in resumed.output and "prompt_format: 'text' → 'tokens'" in resumed.output
    assert not [b for b in other.bodies if b["max_tokens"] > 8]  # only the probe (short requests) reached it


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_smollm2_gguf_through_transformers_serve_matches_the_local_run(tmp_path, smollm2_config, smollm2_factory):
    """SmolLM2-135M-Instruct, a real GGUF chat model, served by ``transformers serve`` from its folder
    (``<folder>:<file>.gguf``). Its GGUF carries no generation config, so the server decodes greedily until
    told to sample (the probe finds that). The chains are the toy world's own traces, imported, so both
    runs continue the same chains; only the continuations come from the model."""
    from recovery.model_config import ModelConfig
    from recovery.pipeline import run_pipeline
    from recovery.report.compare import compute_comparison
    from recovery.store import Table
    from recovery.toy import generate_problems, write_trace

    problems = generate_problems(3, seed=1000)
    traces = tmp_path / "traces.jsonl"
    rows = [
        {
            "problem_id": p.id,
            "problem": p.question,
            "answer": p.answer,
            "response": "<think>\n" + write_trace(p, slip_rate=0.0).response,
        }
        for p in problems
    ]
    traces.write_text("".join(json.dumps(row) + "\n" for row in rows))

    def config(run: str, model: dict) -> str:
        path = Path(toy_config(tmp_path / run, model))
        mapping = json.loads(path.read_text())
        mapping["dataset"]["limit"] = 3
        mapping["traces"] = {"source": "import", "path": str(traces), "filters": {"drop_longest_fraction": 0.0}}
        mapping["interventions"] = {"names": ["toy/random_characters"], "timesteps": [0.5]}
        mapping["continuation"].update(n=2, max_new_tokens=24)
        path.write_text(json.dumps(mapping))
        return str(path)

    model = {"name": smollm2_config.name, "path": smollm2_config.path, "gguf_file": smollm2_config.gguf_file}
    with served(
        f"{smollm2_config.path}:{smollm2_config.gguf_file}", tmp_path / "serve.log", "--dtype", "float32"
    ) as url:
        result = recovery_run(config("served", {**model, "backend": "openai", "base_url": url}))
        assert result.exit_code == 0, result.output
    settings = json.loads((tmp_path / "served" / "servers.json").read_text())[smollm2_config.name]["settings"]
    assert settings["prompt_format"] == "text" and settings["samples_per_request"] == "1"
    assert settings["extra_body"] == {"generation_config": '{"do_sample": true}'}
    chains = Table(tmp_path / "served" / "chains").count()
    counts: dict[str, int] = {}
    for row in Table(tmp_path / "served" / "continuations").iter_rows(["chain_id"]):
        counts[row["chain_id"]] = counts.get(row["chain_id"], 0) + 1
    assert chains == 3 and set(counts.values()) == {2} and len(counts) == chains

    from recovery.configs import from_mapping, load_yaml
    from recovery.run_config import RunConfig

    local = from_mapping(RunConfig, load_yaml(config("local", {**model, "backend": "hf", "device": "cpu"})))
    assert isinstance(local.models[0], ModelConfig)
    run_pipeline(local, make_generator=smollm2_factory, progress=False, n_boot=100)
    (overall,) = compute_comparison(tmp_path / "local", tmp_path / "served", ("local", "served")).overall
    assert overall["majority_pairs"] == 3
    assert overall["majority_ci_low"] <= 0 <= overall["majority_ci_high"], overall
