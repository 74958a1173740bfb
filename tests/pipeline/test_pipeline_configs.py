"""Every shipped config loads strictly, names real interventions and model conventions."""

from pathlib import Path

import pytest

from recovery.configs import ConfigError
from recovery.interventions import INTERVENTIONS
from recovery.models import PAPER_MODELS, get_spec
from recovery.pipeline import load_run_config
from recovery.plan import plan_for

EVAL = Path(__file__).resolve().parents[2] / "eval"


@pytest.mark.parametrize("path", sorted(EVAL.glob("*.yaml")), ids=lambda p: p.name)
def test_eval_configs_load(path):
    config = load_run_config(path)
    assert all(name in INTERVENTIONS for name in config.interventions.names)
    for model in config.models:
        if model.spec:
            get_spec(model.spec)


@pytest.mark.parametrize("domain", ["math", "science", "logic"])
def test_paper_configs_cover_the_nine_models_and_seven_interventions(domain):
    config = load_run_config(EVAL / f"{domain}.yaml")
    assert sorted(m.spec for m in config.models) == sorted(PAPER_MODELS)
    assert len(config.interventions.names) == 7
    assert config.continuation.n == 8 and config.continuation.temperature == 0.6 and config.continuation.top_p == 0.95
    # Phi-4-reasoning-plus's own recommended decoding (T=0.8, top_k=50) is for its original traces (§3.2) ...
    phi = next(m for m in config.models if m.spec == "Phi-4-reasoning-plus")
    assert (phi.temperature, phi.top_k) == (0.8, 50)


@pytest.mark.parametrize("domain", ["math", "science", "logic"])
def test_every_model_continues_at_the_papers_decoding(domain):
    """Table 15: *all* evaluated models sample their 8 continuations at T=0.6, top_p=0.95 (no top-k), Phi's
    T=0.8/top_k=50 exception included; its own decoding applies only to generating its original traces."""
    from recovery.plan import ContinuationRequests, sampling_params
    from recovery.types import Problem

    config = load_run_config(EVAL / f"{domain}.yaml")
    problem = Problem(domain=domain, question="What is 1 + 1?", answer="2", answer_type="numeric", source="test")
    for model in config.models:
        request = ContinuationRequests(plan_for(config), model)(problem, {"id": "c1", "prefix": "Okay."})
        sampling = request.sampling
        assert (sampling.n, sampling.temperature, sampling.top_p, sampling.top_k) == (8, 0.6, 0.95, None), model.name
    phi = next(m for m in config.models if m.spec == "Phi-4-reasoning-plus")
    trace = sampling_params(config.traces.sampling, n=1, model=phi)
    assert (trace.temperature, trace.top_p, trace.top_k) == (0.8, 0.95, 50)


def test_bad_config_gives_key_path(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("run_dir: x\ndataset: {name: toy}\ncontinuation: {n: 8, temprature: 0.6}\n")
    with pytest.raises(ConfigError, match=r"continuation: unknown key 'temprature'; did you mean 'temperature'\?"):
        load_run_config(bad)


def _max_model_lens(node) -> list:
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == "max_model_len"] + [
            x for v in node.values() for x in _max_model_lens(v)
        ]
    if isinstance(node, list):
        return [x for v in node for x in _max_model_lens(v)]
    return []


@pytest.mark.parametrize("path", sorted(EVAL.rglob("*.yaml")), ids=lambda p: str(p.relative_to(EVAL)))
def test_max_model_len_is_the_authors_prompt_and_output_budget(path):
    """``max_model_len`` bounds prompt + output (the vLLM backend caps each request's new tokens to what the
    prompt leaves): the authors' 32,768, which also fits the 32k native context of Phi-4-reasoning(-plus) and
    EXAONE-Deep-32B."""
    import yaml

    assert all(n == 32768 for n in _max_model_lens(yaml.safe_load(path.read_text())))


@pytest.mark.parametrize("domain", ["math", "science", "logic"])
def test_paper_configs_select_as_the_paper(domain):
    """§3.2 under the authors' protocol: Math — R1-solved problems, the intersection, per model closed and the
    longest 2 % dropped, ≤ 20 per answer, 600 drawn; Science and Logic — the intersection (231 and 326)."""
    config = load_run_config(EVAL / f"{domain}.yaml")
    filters = config.traces.filters
    assert config.protocol == "reference" and plan_for(config).selection.authors_order
    assert filters.require_correct and filters.require_closed and filters.intersect_models
    if domain == "math":
        assert (filters.drop_longest_fraction, filters.max_per_answer, filters.draw) == (0.02, 20, 600)
        assert filters.reference_solved is not None and filters.reference_solved.model == "DeepSeek-R1"
        assert "per_answer_cap" not in config.dataset.options
    else:
        assert (filters.drop_longest_fraction, filters.max_per_answer, filters.draw) == (0.0, None, None)
        assert filters.reference_solved is None


@pytest.mark.parametrize("path", sorted((EVAL / "ablations").glob("logic_swap_to_*.yaml")), ids=lambda p: p.name)
def test_swap_configs_reuse_the_logic_runs_problems_and_traces(path):
    """Table 9: the swaps intervene on the Logic run's traces (of the problems all nine models solved), not on
    a selection of their own three models."""
    swap, logic = load_run_config(path), load_run_config(EVAL / "logic.yaml")
    assert swap.traces.source == "run" and swap.traces.path == logic.run_dir
    by_name = {m.name: m for m in logic.models}
    assert len(swap.models) == 3 and all(by_name[m.name] == m for m in swap.models)
    assert swap.protocol == "reference" and swap.interventions.timesteps == [0.3]
