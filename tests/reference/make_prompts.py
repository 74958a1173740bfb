"""Store the authors' continuation and trace prompts for the fixture inputs (run once; see inputs.py).

    python tests/reference/make_prompts.py --authors /path/to/RLLM-CoT-Robustness

Runs their ``prepare_intervention_input`` and intervention functions (the LLM ones through a runner that
returns the fixed replies of inputs.py) to get each chain's ``mutated_answer_content``, then their
``VllmRunner._format_prompts`` with the real DeepSeek-R1-Distill tokenizer (both template revisions) for
the continuation prompt, as ``scripts/continue_interventions.py`` calls it (no system prompt argument, so the
runner's default). Also the system prompt their trace script picks for each of their models.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1]))  # tests/, as pytest puts it

from reference.inputs import (  # noqa: E402
    AUTHORS_NAMES,
    LLM_REPLIES,
    SHARED,
    TIMESTEPS,
    store,
    trace_rows,
)

OPENER_TEMPLATE_FROM = "{{'<｜Assistant｜>'}}{% endif %}"
OPENER_TEMPLATE_TO = "{{'<｜Assistant｜><think>\\n'}}{% endif %}"


class FixedReplies:
    """The authors' runner interface, answering every prompt with the fixed reply of the intervention."""

    def __init__(self, reply: str) -> None:
        self.reply = reply

    def generate(self, prompts, **_):
        return [[self.reply.strip()] for _ in prompts]  # their VllmRunner strips every completion


def tokenizers():
    from transformers import AutoTokenizer

    path = SHARED / "tokenizers" / "DeepSeek-R1-Distill-Qwen"
    first = AutoTokenizer.from_pretrained(str(path))
    later = AutoTokenizer.from_pretrained(str(path))
    assert OPENER_TEMPLATE_FROM in later.chat_template
    later.chat_template = later.chat_template.replace(OPENER_TEMPLATE_FROM, OPENER_TEMPLATE_TO)
    return {"first_revision": first, "later_revision": later}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--authors", required=True, type=Path)
    args = parser.parse_args()
    sys.path.insert(0, str(args.authors.resolve()))
    from rllm_robustness import constants
    from rllm_robustness.inference import VllmRunner
    from rllm_robustness.interventions import (
        apply_llm_intervention_batch,
        apply_neutral_intervention_batch,
        prepare_inputs_for_batch,
    )

    rows = trace_rows()
    runners = {}
    for revision, tokenizer in tokenizers().items():
        runner = VllmRunner()
        runner.tokenizer = tokenizer
        runner.current_model_name = constants.DEEPSEEK_R1_DISTILL_QWEN_7B
        runners[revision] = runner
    chains = []
    for t in TIMESTEPS:
        items = prepare_inputs_for_batch(rows, t)
        for ours, theirs in AUTHORS_NAMES.items():
            if ours == "wikipedia_text":
                continue  # its prefix depends on the pool, not on the prompt code
            if ours in LLM_REPLIES:
                out = apply_llm_intervention_batch(
                    items, intervention=theirs, timestep=t, runner=FixedReplies(LLM_REPLIES[ours])
                )
            else:
                out = apply_neutral_intervention_batch(
                    items, intervention=theirs, timestep=t, random_seed=42, wikipedia_pool=None
                )
            for row in out:
                prompts = {
                    revision: runner._format_prompts(
                        [row["question"]], constants.DEFAULT_SYSTEM_PROMPT, [row["mutated_answer_content"]]
                    )[0]
                    for revision, runner in runners.items()
                }
                chains.append(
                    {
                        "problem_id": row["source_id"],
                        "intervention": ours,
                        "target_t": t,
                        "cutoff_index": row["cutoff_index"],
                        "mutated_answer_content": row["mutated_answer_content"],
                        "prompts": prompts,
                    }
                )
    trace_prompts = {
        revision: {row["id"]: runner._format_prompts([row["question"]], constants.DEFAULT_SYSTEM_PROMPT, "")[0]}
        for revision, runner in runners.items()
        for row in rows[:1]
    }
    system_prompts = {
        model: constants.MODEL_SYSTEM_PROMPTS.get(model, constants.DEFAULT_SYSTEM_PROMPT)
        for model in constants.EVALUATED_MODELS
    }
    # The continuation prompts of the rule-based chains their create_interventions loop wrote for the rows of
    # intervention_rows.py (stored by make_interventions.py): what a reference run of those rows must send.
    from reference.inputs import load
    from reference.intervention_rows import batch_rows

    questions = {row["id"]: row["question"] for row in batch_rows()}
    runner = runners["first_revision"]
    item_prompts = {
        key: runner._format_prompts(
            [questions[key.split("|")[0]]], constants.DEFAULT_SYSTEM_PROMPT, [item["mutated_answer_content"]]
        )[0]
        for key, item in load("interventions")["items"].items()
        if key.split("|")[1] in ("random_characters", "wikipedia_text") and "|empty_reply" not in key
    }
    command = "python tests/reference/make_prompts.py --authors " + shlex.quote(str(args.authors))
    path = store(
        "prompts",
        command,
        {
            "chains": chains,
            "trace_prompts": trace_prompts,
            "trace_system_prompts": system_prompts,
            "item_prompts": item_prompts,
        },
    )
    print(f"wrote {len(chains)} chains to {path}")


if __name__ == "__main__":
    main()
