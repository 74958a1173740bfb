"""Run the authors' segmentation and interventions on the shared inputs and store what they return.

    python tests/reference/make_interventions.py --authors /work/authors

``--authors`` is a checkout of github.com/ExplainableML/RLLM-CoT-Robustness at `inputs.AUTHORS_COMMIT`
(read-only; nothing of it is copied here). The script calls their functions as their
scripts/create_interventions.py does (rows in batches of eight, ``prepare_inputs_for_batch``, then
``apply_llm_intervention_batch`` or ``apply_neutral_intervention_batch``) and
scripts/append_marker_to_interventions.py (``append_marker_to_intervention_row`` with "Wait"), on the rows
of `intervention_rows.batch_rows`. The intervention LLM is a runner object in the authors' runner
interface that records each prompt and returns the fixed reply of `inputs.LLM_REPLIES`. Their Wikipedia
pool is their ``load_wikipedia_pool`` run on the first 1,000 WikiText-2 paragraphs of ``shared/data`` (a
stand-in ``datasets`` module serves those texts as the stream it reads).

It writes two pieces: ``data/segmentation.json`` (``extract_reasoning``, ``segment_trace`` and
``trace_prefix_at_timestep`` per row and timestep) and ``data/interventions.json`` (per row, intervention
and timestep: the texts they build and the prompts they send). CI never runs this: the tests read the JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import shlex
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the `reference` package

from reference.inputs import AUTHORS_NAMES, LLM_REPLIES, TIMESTEPS, store
from reference.intervention_rows import (
    BATCH_SIZE,
    EMPTY_REPLY,
    EMPTY_REPLY_T,
    EXTRA_TIMESTEPS,
    WIKIPEDIA_ARTICLES,
    batch_rows,
    item_key,
    wikipedia_texts,
)

OURS = {theirs: ours for ours, theirs in AUTHORS_NAMES.items()}


class RecordingRunner:
    """The authors' runner interface (rllm_robustness/inference.py ``MockRunner.generate``): one fixed
    reply per prompt, every (system prompt, prompt, decoding) kept in ``calls``."""

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.calls: list[dict] = []

    def generate(self, prompts, *, system_prompts="", reasoning_traces="", model_name=None, decoding=None, **_):
        for prompt in prompts:
            system = system_prompts if isinstance(system_prompts, str) else system_prompts[len(self.calls)]
            self.calls.append(
                {
                    "system": system,
                    "user": prompt,
                    "max_new_tokens": decoding.max_new_tokens,
                    "temperature": decoding.temperature,
                    "top_p": decoding.top_p,
                    "seed": decoding.seed,
                }
            )
        return [[self.reply] for _ in prompts]


def fake_datasets(texts: list[str]) -> types.ModuleType:
    """A ``datasets`` module whose ``load_dataset(...)`` streams ``texts`` as rows with a ``text`` column."""

    class Stream:
        def take(self, n: int):
            return [{"text": text} for text in texts[:n]]

    module = types.ModuleType("datasets")
    module.load_dataset = lambda *args, **kwargs: Stream()
    return module


def _appended(before: str, after: str) -> str:
    if not after.startswith(before):
        raise AssertionError("append_marker_to_intervention_row changed the prefix it appends to")
    return after[len(before) :]


def segmentation(authors) -> dict:
    """Their reasoning, segments and cut of every row at every timestep."""
    seg = authors.segmentation
    out = {}
    for row in batch_rows():
        reasoning = seg.extract_reasoning(row["answer_content"])
        segments, metadata = seg.segment_trace(reasoning)
        cuts = {}
        for t in TIMESTEPS + EXTRA_TIMESTEPS:
            prefix, index, actual = seg.trace_prefix_at_timestep(segments, t, min_steps=2)
            cuts[str(t)] = {"cutoff_index": index, "actual_timestep": actual, "prefix_len": len(prefix)}
        out[row["id"]] = {
            "reasoning": reasoning,
            "segments": segments,
            "metadata": metadata,
            "timesteps": seg.normalized_trace_timesteps(segments),
            "cuts": cuts,
        }
    return out


def interventions(authors, pool: list[str]) -> dict:
    """Their output rows, per item key, with the prompts they sent."""
    iv = authors.interventions
    rows = batch_rows()
    batches = list(authors.io.batched(rows, BATCH_SIZE))
    items: dict[str, dict] = {}

    def keep(out_rows, name: str, t: float, calls: list[dict] | None, empty_reply: bool = False) -> None:
        for index, out in enumerate(out_rows):
            waited = iv.append_marker_to_intervention_row(out, "Wait")
            item = {
                "mutated_answer_content": out["mutated_answer_content"],
                "intervention_text": out["intervention_text"],
                "cutoff_index": out["cutoff_index"],
                "actual_timestep": out["actual_timestep"],
                "original_num_segments": out["original_num_segments"],
                # "Wait" only appends: the part after the intervened prefix is stored.
                "wait_appended": _appended(out["mutated_answer_content"], waited["mutated_answer_content"]),
                "wait_intervention_text": waited["intervention_text"],
                "position": index,
            }
            for extra in ("unrelated_topic", "wikipedia_pool_index"):
                if extra in out:
                    item[extra] = out[extra]
            if calls is not None:
                item["prompt"] = calls[index]
            items[item_key(out["source_id"], name, t, empty_reply=empty_reply)] = item

    for t in TIMESTEPS + EXTRA_TIMESTEPS:
        for name, theirs in AUTHORS_NAMES.items():
            for batch in batches:
                inputs = iv.prepare_inputs_for_batch(batch, t, min_steps=2)
                if name in ("random_characters", "wikipedia_text"):
                    out = iv.apply_neutral_intervention_batch(
                        inputs, intervention=theirs, timestep=t, random_seed=42, wikipedia_pool=pool
                    )
                    keep(out, name, t, None)
                    continue
                runner = RecordingRunner(LLM_REPLIES[name])
                keep(
                    iv.apply_llm_intervention_batch(inputs, intervention=theirs, timestep=t, runner=runner),
                    name,
                    t,
                    runner.calls,
                )
                if t == EMPTY_REPLY_T:
                    runner = RecordingRunner(EMPTY_REPLY)
                    out = iv.apply_llm_intervention_batch(inputs, intervention=theirs, timestep=t, runner=runner)
                    keep(out, name, t, runner.calls, empty_reply=True)
    return items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--authors", required=True, type=Path, help="checkout of the authors' repository")
    args = parser.parse_args()
    sys.path.insert(0, str(args.authors.resolve()))
    sys.modules["datasets"] = fake_datasets(wikipedia_texts())
    import rllm_robustness.interventions
    import rllm_robustness.io
    import rllm_robustness.segmentation

    authors = types.SimpleNamespace(
        segmentation=rllm_robustness.segmentation, interventions=rllm_robustness.interventions, io=rllm_robustness.io
    )
    pool = rllm_robustness.interventions.load_wikipedia_pool(pool_size=WIKIPEDIA_ARTICLES, seed=42)
    command = "python " + " ".join(shlex.quote(a) for a in [f"tests/reference/{Path(__file__).name}", *sys.argv[1:]])
    store("segmentation", command, {"rows": segmentation(authors)})
    digest = hashlib.sha256("\x00".join(pool).encode("utf-8")).hexdigest()
    store(
        "interventions",
        command,
        {
            "batch_size": BATCH_SIZE,
            "wikipedia_pool": {"articles": WIKIPEDIA_ARTICLES, "paragraphs": len(pool), "sha256": digest},
            "items": interventions(authors, pool),
        },
    )


if __name__ == "__main__":
    main()
