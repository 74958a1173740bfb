"""A config the run cannot honour fails before any work, in one line naming its key; settings that cannot
change results never make a run directory unresumable."""

from __future__ import annotations

import copy

import pytest
import yaml
from typer.testing import CliRunner

from recovery.cli import app
from recovery.configs import ConfigError, to_mapping
from recovery.pipeline import load_run_config

BASE = {"dataset": {"name": "toy", "limit": 2}, "interventions": {"names": ["toy/random_characters"]}}


def write(tmp_path, **changes) -> str:
    data = {"run_dir": str(tmp_path / "run"), **copy.deepcopy(BASE)}
    for dotted, value in changes.items():
        node = data
        *parents, leaf = dotted.split("__")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"interventions__names": ["toy/paraphase"]},
            r"interventions\.names\[0\]: unknown intervention 'toy/paraphase'; did you mean 'toy/paraphrase'\?",
        ),
        ({"continuation__n": 0}, r"\.continuation: n must be ≥ 1"),
        ({"continuation__max_new_tokens": -5}, r"\.continuation: max_new_tokens must be ≥ 1"),
        ({"continuation__temperature": -0.1}, r"\.continuation: temperature must be ≥ 0"),
        ({"continuation__top_p": 1.5}, r"\.continuation: top_p must lie in \(0, 1\]"),
        ({"grading__timeout_s": 0}, r"\.grading: timeout_s must be > 0"),
        (
            {"dataset__options": {"seed": 1, "max_opz": 4}},
            r"dataset\.options: unknown toy option 'max_opz'; did you mean 'max_ops'\?",
        ),
        (
            {"dataset__name": "scibench", "dataset__options": {"revison": "abc"}},
            r"dataset\.options: unknown option 'revison'; did you mean 'revision'\?",
        ),
        (  # the Science domain passes its options to SciBench and JEEBench: both must take them
            {"dataset__name": "science", "dataset__options": {"books": ["atkins"]}},
            r"dataset\.options: jeebench, part of the Science domain: unknown option 'books'; options: dataset, hub",
        ),
        (  # the options a Python caller gives as objects: a config's text cannot make them
            {"dataset__name": "bbh", "dataset__options": {"hub": "maveriq/bigbenchhard"}},
            r"dataset\.options: option 'hub' takes a HubCopy, not str \(give hub_id, split, revision\)",
        ),
        (
            {"dataset__name": "science", "dataset__options": {"loader": "datasets.load_dataset"}},
            r"dataset\.options: scibench, part of the Science domain: option 'loader' takes a function",
        ),
        ({"dataset__name": "numina_olympiads", "dataset__options": {"skips": 0}}, r"option 'skips' takes a Skips"),
        ({"dataset__name": "jeebench", "dataset__options": {"revision": 20240101}}, r"option 'revision' takes text"),
        (
            {"dataset__name": "logic", "dataset__options": {"per_answer_cap": 3}},
            r"dataset\.options: unknown option 'per_answer_cap'; options: hub, hub_id, loader, revision, skips, split",
        ),
        (
            {"dataset__name": "toy/arithmetic"},
            r"dataset\.name: unknown dataset 'toy/arithmetic'; did you mean 'toy/arith'\?",
        ),
        (
            {"dataset__name": "bbh/dyck_language"},
            r"dataset\.name: unknown dataset 'bbh/dyck_language'; did you mean 'bbh/dyck_languages'\?",
        ),
        ({"interventions__timesteps": []}, r"\.interventions: timesteps must not be empty"),
        ({"traces__sampling__n": -1}, r"\.traces\.sampling: n must be ≥ 1"),
        ({"traces__sampling__n": 2}, r"\.traces: sampling\.n: one original trace per \(model, problem\)"),
        ({"cpu_workers": -2}, r"cpu_workers must be ≥ 0"),
        ({"flush_every": 0}, r"flush_every must be ≥ 1"),
        ({"models": [{"name": "m", "top_k": 0}]}, r"models\[0\]: model 'm': top_k must be ≥ 1"),
        (
            {"models": [{"name": "m", "backend": "vlm"}]},
            r"models\[0\]\.backend: unknown backend 'vlm'; did you mean 'vllm'\?",
        ),
        (
            {"interventions__options": {"paraphrase": {}}},
            r"interventions\.options: 'paraphrase' is not one of interventions\.names",
        ),
    ],
)
def test_invalid_values_fail_at_load_naming_the_key(tmp_path, changes, message):
    path = write(tmp_path, **changes)
    with pytest.raises(ConfigError, match=message):
        load_run_config(path)
    result = CliRunner().invoke(app, ["run", path, "--no-progress"])
    assert result.exit_code != 0 and len(result.output.strip().splitlines()) == 1, result.output
    assert "Traceback" not in result.output and not (tmp_path / "run").exists()  # no work started


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"interventions__names": ["paraphrase"]}, r"interventions\.llm: paraphrase need an intervention LLM"),
        (
            {"interventions__names": ["wikipedia_text"], "interventions__wikipedia_pool": "nope.jsonl"},
            r"interventions\.wikipedia_pool: no such file: nope\.jsonl",
        ),
        ({"traces__source": "import", "traces__path": "missing.jsonl"}, r"traces\.path: no such file: missing\.jsonl"),
    ],
)
def test_what_the_stages_need_is_checked_before_the_first_stage(tmp_path, changes, message):
    path = write(tmp_path, **changes)
    load_run_config(path)  # a config may name files of another machine: loading it is fine
    result = CliRunner().invoke(app, ["run", path, "--no-progress"])
    assert result.exit_code != 0 and len(result.output.strip().splitlines()) == 1, result.output
    assert not (tmp_path / "run").exists()


def test_throughput_settings_keep_a_run_resumable(tmp_path):
    from recovery.pipeline import run_pipeline

    first = load_run_config(write(tmp_path, models=[{"name": "tiny-reasoner", "batch_size": 4}]))
    run_pipeline(first, stages=["problems"], progress=False)
    changed = load_run_config(
        write(
            tmp_path,
            models=[{"name": "tiny-reasoner", "batch_size": 32}],
            grading={"workers": 1, "alongside": False},
            cpu_workers=1,
            flush_every=7,
        )
    )
    run_pipeline(changed, stages=["problems"], progress=False)  # resumes
    other = load_run_config(write(tmp_path, continuation={"n": 4}))
    with pytest.raises(ConfigError, match="changed: continuation"):
        run_pipeline(other, stages=["problems"], progress=False)
    # dtype is declared as a setting that changes results (recovery.backends.settings.HFSettings)
    float16 = load_run_config(write(tmp_path, models=[{"name": "tiny-reasoner", "dtype": "float16"}]))
    with pytest.raises(ConfigError, match="changed: models"):
        run_pipeline(float16, stages=["problems"], progress=False)


def test_a_setting_of_another_backend_is_refused_with_its_path(tmp_path):
    path = write(tmp_path, models=[{"name": "tiny-reasoner", "batch_size": 4, "max_concurrency": 2}])
    with pytest.raises(ConfigError, match=r"models\[0\]: unknown key 'max_concurrency' for backend 'hf'"):
        load_run_config(path)
    typo = write(tmp_path, models=[{"name": "m", "backend": "vllm", "tensor_paralel_size": 2}])
    with pytest.raises(ConfigError, match="did you mean 'tensor_parallel_size'"):
        load_run_config(typo)


def test_a_manifest_written_before_backends_owned_their_settings_reads_back(tmp_path):
    from recovery.run_dir.files import run_config_from_manifest

    config = load_run_config(write(tmp_path, models=[{"name": "m", "backend": "vllm", "tensor_parallel_size": 2}]))
    manifest = to_mapping(config)
    manifest["models"][0]["batch_size"] = 16  # every model carried every backend's keys; vLLM never read this one
    read = run_config_from_manifest(manifest)
    assert read.models[0].settings.tensor_parallel_size == 2
    assert to_mapping(read) == to_mapping(config)


@pytest.mark.parametrize("content", ["", '{"problem": "q", "solution": "no think tag here", "gt_answer": "1"}\n'])
def test_an_empty_or_all_bad_import_is_an_error_not_an_empty_run(tmp_path, content):
    traces = tmp_path / "traces.jsonl"
    traces.write_text(content)
    path = write(
        tmp_path,
        traces={
            "source": "import",
            "path": str(traces),
            "fields": {
                "problem_id": "problem",
                "response": "solution",
                "question": "problem",
                "answer": "gt_answer",
                "model_name": "r1",
            },
        },
    )
    result = CliRunner().invoke(app, ["run", path, "--no-progress"])
    assert result.exit_code != 0 and "holds no usable trace" in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1
