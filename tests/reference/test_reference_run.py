"""``recovery run`` with ``protocol: reference`` on real R1-distill traces and the real DeepSeek-R1-Distill
tokenizer: the prompt each chain is continued from is the authors', byte for byte (issue 29, "Checked by").

The model is a one-layer Llama with random weights around the real tokenizer and chat template
(its continuations mean nothing; its prompts are what is checked). The traces of `intervention_rows` (four
real ones among hand-written edge cases) are imported, the two rule-based interventions applied at every
timestep, and one continuation sampled per chain. For every chain, the text of the prompt the HF backend
feeds the model must equal what the authors' runner built for the same trace and cut (``item_prompts`` in
``data/prompts.json``, from their ``VllmRunner._format_prompts``), after the second BOS that vLLM's text
tokenization adds; and the run's stored prompt length must be that prompt's.
"""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from recovery.cli import app
from recovery.plan import continuation_request, plan_for
from recovery.run_dir import open_run
from reference.inputs import load
from reference.intervention_rows import ALL_TIMESTEPS, item_key, wikipedia_texts, write_import_file

PREFIX = "thought_anchors_math"
AUTHORS_PROMPTS = load("prompts")["item_prompts"]


@pytest.fixture(scope="module")
def tiny_r1(tmp_path_factory, r1_tokenizer, r1_random_model):
    """A folder holding a random one-layer model around the real R1-distill tokenizer and chat template."""
    folder = tmp_path_factory.mktemp("tiny-r1")
    r1_random_model().save_pretrained(folder)
    r1_tokenizer.save_pretrained(folder)
    return folder


def test_reference_run_continues_every_chain_from_the_authors_prompt(tmp_path, tiny_r1, shared_data):
    traces = write_import_file(tmp_path / "traces.jsonl")
    pool = tmp_path / "pool.jsonl"
    pool.write_text("".join(json.dumps({"text": text}) + "\n" for text in wikipedia_texts()), encoding="utf-8")
    config = {
        "run_dir": str(tmp_path / "run"),
        "protocol": "reference",
        # Every row of the file reaches the chains, as every row of the authors' (already filtered) file did.
        "protocol_parts": {"selection": "default"},
        "dataset": {"name": "real_traces", "path": str(traces)},
        "models": [{"name": "r1-tiny", "path": str(tiny_r1), "backend": "hf", "spec": "DeepSeek-R1-Distill-Qwen-7B"}],
        "traces": {
            "source": "import",
            "path": str(traces),
            "fields": {
                "problem_id": "problem_id",
                "response": "solution",
                "question": "problem",
                "answer": "gt_answer",
                "id_prefix": PREFIX,
            },
            "filters": {"require_correct": False, "drop_longest_fraction": 0.0},
        },
        "interventions": {
            "names": ["random_characters", "wikipedia_text"],
            "timesteps": list(ALL_TIMESTEPS),
            "wikipedia_pool": str(pool),
        },
        "continuation": {"n": 1, "max_new_tokens": 2, "seed": 0},
        "grading": {"workers": 1, "alongside": False},
        "cpu_workers": 1,
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    stages = "problems,traces,filter,chains,continuations"
    result = CliRunner().invoke(app, ["run", str(path), "--stages", stages, "--no-progress"])
    assert result.exit_code == 0, result.output

    run = open_run(config["run_dir"])
    stored = run.config
    problems = run.problems()
    prompt_tokens = {row["chain_id"]: row["prompt_tokens"] for row in run.continuation_rows()}
    from recovery.backends.hf import HFGenerator
    from recovery.models import get_spec

    backend = HFGenerator(str(tiny_r1), spec=get_spec("DeepSeek-R1-Distill-Qwen-7B"), device="cpu")
    tokenizer = backend.tokenizer
    checked = 0
    for chain in run.chain_rows():
        key = item_key(chain["problem_id"].removeprefix(f"{PREFIX}/"), chain["intervention"], chain["target_t"])
        request = continuation_request(plan_for(stored), problems[chain["problem_id"]], chain)
        ids = backend.prompt_ids(request)
        assert ids[0] == ids[1] == tokenizer.bos_token_id, key  # vLLM's BOS before the template's
        assert tokenizer.decode(ids[1:]) == AUTHORS_PROMPTS[key], key
        assert prompt_tokens[chain["id"]] == len(ids), key
        checked += 1
    assert checked == len(AUTHORS_PROMPTS) == 120
