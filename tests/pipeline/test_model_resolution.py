"""A model is where its config says (``path``, else ``name``); the shipped tiny reasoner only by its own name;
a model that cannot be found fails before any work, in one line naming it."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from recovery.backends.registry import BACKENDS, check_loadable, make_generator, model_location
from recovery.cli import app
from recovery.configs import ConfigError
from recovery.models import is_tiny_reasoner
from recovery.pipeline import DatasetConfig, ModelConfig, RunConfig, run_pipeline


@pytest.mark.parametrize("name", ["tiny-reasonr", "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"])
def test_a_name_that_is_not_the_tiny_reasoner_never_runs_it(tmp_path, name):
    """These two ran the 1M toy model under their names and exit 0 before; now they fail, before any work."""
    config = RunConfig(
        run_dir=str(tmp_path / "run"), dataset=DatasetConfig(name="toy", limit=2), models=[ModelConfig(name=name)]
    )
    assert not is_tiny_reasoner(model_location(config.models[0]))
    with pytest.raises(ConfigError, match=rf"models\[0\] '{name}': '{name}' is not a local folder"):
        run_pipeline(config, progress=False)
    assert not (tmp_path / "run").exists()
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"run_dir: {tmp_path / 'run'}\ndataset: {{name: toy, limit: 2}}\nmodels: [{{name: {name}}}]\n")
    result = CliRunner().invoke(app, ["run", str(cfg), "--no-progress"])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1 and name in result.output


def test_a_local_folder_by_name_loads_that_model(tmp_path, tiny_reasoner):
    """`{name: <folder>}` without a path loads the folder, as the vLLM and OpenAI backends always did."""
    model, tokenizer = tiny_reasoner
    folder = tmp_path / "my-model"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    config = ModelConfig(name=str(folder), spec="tiny-reasoner")
    assert model_location(config) == str(folder) and not is_tiny_reasoner(model_location(config))
    check_loadable(config)
    generator = make_generator(config)
    assert generator.model is not model and generator.model.config.hidden_size == model.config.hidden_size
    with pytest.raises(ConfigError, match="holds no config.json"):
        check_loadable(ModelConfig(name="m", path=str(tmp_path)))


def test_the_tiny_reasoner_by_its_own_name():
    assert is_tiny_reasoner(model_location(ModelConfig(name="tiny-reasoner")))
    assert is_tiny_reasoner(model_location(ModelConfig(name="anything", path="tiny-reasoner")))
    check_loadable(ModelConfig(name="tiny-reasoner"))


def test_real_traces_config_imports_and_segments_all_153_traces_byte_exactly(tmp_path, shared_data):
    """`eval/real_traces.yaml` on a CPU: importing traces loads no model, and all 153 re-join byte-exactly."""
    import os
    from pathlib import Path

    from recovery.pipeline import load_run_config
    from recovery.segment import join_steps, parse_trace, split_steps
    from recovery.store import Table

    root = Path(__file__).resolve().parents[2]
    cwd = os.getcwd()
    os.chdir(root)  # the config's paths are relative to the checkout (../shared)
    try:
        config = load_run_config(root / "eval" / "real_traces.yaml", {"run_dir": str(tmp_path / "real")})
        run_pipeline(config, stages=["problems", "traces", "filter"], progress=False)
    finally:
        os.chdir(cwd)
    rows = list(Table(tmp_path / "real" / "traces").iter_rows(["problem_id", "model", "text"]))
    assert len(rows) == 153
    for row in rows:
        trace = parse_trace(row["problem_id"], row["model"], row["text"])
        assert join_steps(split_steps(trace.reasoning)) == trace.reasoning


def test_every_registered_backend_is_one_a_config_may_name():
    from recovery.pipeline.validate import check_run_config
    from recovery.run_config import DatasetConfig, RunConfig

    assert {"hf", "vllm", "openai"} <= set(BACKENDS)
    for name in BACKENDS:
        settings = {"base_url": "http://localhost:8000/v1"} if name == "openai" else None
        models = [ModelConfig(name="x", backend=name, settings=settings)]
        check_run_config(RunConfig(run_dir="unused", dataset=DatasetConfig(name="toy"), models=models))
    with pytest.raises(ValueError, match="unknown backend 'tgi'"):
        make_generator(ModelConfig(name="x", backend="tgi"))  # type: ignore[arg-type]
