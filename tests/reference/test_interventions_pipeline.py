"""A run with ``protocol: reference`` writes the authors' prefixes into its chains table (issue 29).

The rows of `intervention_rows.batch_rows` (four real R1-distill traces among hand-written ones) are
imported as one model's traces, as ``eval/real_traces.yaml`` imports ``shared/data/real_traces``; the
chains stage then runs the interventions, giving each trace its batch position itself: the two rule-based
ones in worker processes, and all seven with an intervention LLM (a stand-in backend that answers the fixed
replies of `inputs.LLM_REPLIES`) on the stage's other path. Every chain's prefix, inserted text and cut must
equal what the authors' scripts/create_interventions.py loop wrote for the same file
(``data/interventions.json``, see ``make_interventions.py``), and the LLM must be sent their prompts.
"""

from __future__ import annotations

import json
from collections import Counter

from recovery.generation import GenerationResult, Sample
from recovery.interventions.reference import template
from recovery.model_config import ModelConfig
from recovery.pipeline import run_pipeline
from recovery.run_config import DatasetConfig, FilterConfig, InterventionsConfig, RunConfig, TracesConfig
from recovery.run_dir.records import CHAINS_TABLE
from recovery.store import RunDir
from reference.inputs import AUTHORS_NAMES, LLM_REPLIES, load
from reference.intervention_rows import ALL_TIMESTEPS, item_key, wikipedia_texts, write_import_file

ITEMS = load("interventions")["items"]
RULE = ("random_characters", "wikipedia_text")
PREFIX = "thought_anchors_math"


class FixedReplies:
    """The intervention LLM: replies by the system prompt it is sent, and keeps each (system, user) pair."""

    concurrency = 1  # the Generator protocol: one request in flight

    def __init__(self) -> None:
        self.by_system = {template(name).system: reply for name, reply in LLM_REPLIES.items()}
        self.sent: list[tuple[str, str]] = []

    def generate(self, requests):
        for request in requests:
            system, user = (m.content for m in request.messages)
            self.sent.append((system, user))
            text = self.by_system[system]
            yield GenerationResult(request.request_id, (Sample(text, len(text), "stop"),), prompt_tokens=0)

    def close(self) -> None:
        pass


def reference_run(
    tmp_path, names, llm: ModelConfig | None = None, make_generator=None, *, rows=None, protocol: str = "reference"
) -> dict:
    """Import the rows (default: `batch_rows`), run up to the chains stage with ``protocol`` (the authors' by
    default); the chains by item key."""
    traces = write_import_file(tmp_path / "traces.jsonl", rows)
    pool = tmp_path / "pool.jsonl"  # the authors' pool source: the first 1,000 texts
    pool.write_text("".join(json.dumps({"text": text}) + "\n" for text in wikipedia_texts()), encoding="utf-8")
    config = RunConfig(
        run_dir=str(tmp_path / "run"),
        # Selection stays the project's here: every row of the file must reach the chains stage, as every row
        # of the authors' (already filtered) file reached theirs.
        protocol=protocol,
        protocol_parts={"selection": "default"},
        dataset=DatasetConfig(name="real_traces", path=str(traces)),
        models=[ModelConfig(name="DeepSeek-R1-Distill-Qwen-7B", spec="DeepSeek-R1-Distill-Qwen-7B")],
        traces=TracesConfig(
            source="import",
            path=str(traces),
            fields={
                "problem_id": "problem_id",
                "response": "solution",
                "question": "problem",
                "answer": "gt_answer",
                "id_prefix": PREFIX,
            },
            filters=FilterConfig(require_correct=False, drop_longest_fraction=0.0),
        ),
        interventions=InterventionsConfig(
            names=list(names), timesteps=list(ALL_TIMESTEPS), wikipedia_pool=str(pool), llm=llm
        ),
        cpu_workers=1,
    )
    stages = ["problems", "traces", "filter", "chains"]
    run_pipeline(config, stages=stages, make_generator=make_generator, progress=False)
    columns = ["problem_id", "intervention", "target_t", "prefix", "inserted_text", "cut_index", "options"]
    return {
        item_key(row["problem_id"].removeprefix(f"{PREFIX}/"), row["intervention"], row["target_t"]): row
        for row in RunDir(config.run_dir).table(CHAINS_TABLE).iter_rows(columns)
    }


def assert_authors_chains(chains: dict, names) -> None:
    theirs = {key: item for key, item in ITEMS.items() if key.split("|")[1] in names and "|empty_reply" not in key}
    assert set(chains) == set(theirs)  # the one-step trace is skipped by both
    for key, item in theirs.items():
        row = chains[key]
        assert row["prefix"] == item["mutated_answer_content"], key
        assert row["inserted_text"] == item["intervention_text"], key
        assert row["cut_index"] == item["cutoff_index"], key
        options = json.loads(row["options"])
        assert (options["protocol"], options["position"]) == ("reference", item["position"]), key


def test_a_reference_run_writes_the_authors_rule_based_chains(tmp_path, shared_data):
    assert_authors_chains(reference_run(tmp_path, RULE), RULE)


def test_a_reference_run_with_an_intervention_llm_writes_the_authors_chains_and_sends_their_prompts(
    tmp_path, shared_data
):
    names = tuple(AUTHORS_NAMES)
    backend = FixedReplies()
    chains = reference_run(tmp_path, names, ModelConfig(name="intervener"), lambda model: backend)
    assert_authors_chains(chains, names)
    theirs = Counter(
        (item["prompt"]["system"], item["prompt"]["user"])
        for key, item in ITEMS.items()
        if "prompt" in item and "|empty_reply" not in key
    )
    assert Counter(backend.sent) == theirs  # the unrelated topics too: each trace's batch position
