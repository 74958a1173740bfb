"""Every shipped config loads strictly, names real interventions and model conventions."""

from pathlib import Path

import pytest

from recovery.configs import ConfigError
from recovery.interventions.base import REGISTRY
from recovery.models import PAPER_MODELS, get_spec
from recovery.pipeline import load_run_config

EVAL = Path(__file__).resolve().parents[2] / "eval"


@pytest.mark.parametrize("path", sorted(EVAL.glob("*.yaml")), ids=lambda p: p.name)
def test_eval_configs_load(path):
    import recovery.toy  # noqa: F401 — registers toy/* interventions

    config = load_run_config(path)
    assert all(name in REGISTRY for name in config.interventions.names)
    for model in config.models:
        if model.spec:
            get_spec(model.spec)


@pytest.mark.parametrize("domain", ["math", "science", "logic"])
def test_paper_configs_cover_the_nine_models_and_seven_interventions(domain):
    config = load_run_config(EVAL / f"{domain}.yaml")
    assert sorted(m.spec for m in config.models) == sorted(PAPER_MODELS)
    assert len(config.interventions.names) == 7
    assert config.continuation.n == 8 and config.continuation.temperature == 0.6 and config.continuation.top_p == 0.95
    phi = next(m for m in config.models if m.spec == "Phi-4-reasoning-plus")
    assert (phi.temperature, phi.top_k) == (0.8, 50)


def test_bad_config_gives_key_path(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("run_dir: x\ndataset: {name: toy}\ncontinuation: {n: 8, temprature: 0.6}\n")
    with pytest.raises(ConfigError, match=r"continuation: unknown key 'temprature'; did you mean 'temperature'\?"):
        load_run_config(bad)
