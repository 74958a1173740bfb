"""How often text tokenization would move the prompt/completion boundary of training rows built from the 153
real DeepSeek-R1-Distill traces, under the real R1-distill tokenizer, and what token budgets leave out.

The traces (``shared/data/real_traces``) are imported by the pipeline's own stages, cut by *random characters*
at t ∈ {0.1, 0.3, 0.5, 0.7, 0.9} and continued with what each trace wrote after the cut (graded like any
continuation). The SFT rows (own recoveries + as many clean cuts) and GRPO prompts are then built with the
tokenizer of ``shared/data/tokenizers/DeepSeek-R1-Distill-Qwen``. Printed: rows whose text prompt, tokenized
alone and with its completion as SFTTrainer does for text rows, ends on different tokens (the cut merged into
the completion's first token); GRPO prompts dropped because GRPOTrainer would tokenize them other than the
benchmark (both template revisions); rows dropped by the given budgets.

Usage: python bench/token_boundaries_real_traces.py [--max-prompt-tokens 4096] [--max-tokens 8192]
"""

from __future__ import annotations

import argparse
import copy
import tempfile
import time
from pathlib import Path

from recovery.generation import GenerationResult, Sample

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SPEC = "DeepSeek-R1-Distill-Qwen-7B"
LATER_REVISION = ("{{'<｜Assistant｜>'}}{% endif %}", "{{'<｜Assistant｜><think>\\n'}}{% endif %}")


class Remainders:
    """Continues each chain with its original trace's text after the cut."""

    name = "remainders"

    def __init__(self, remainder_of: dict[str, str]) -> None:
        self.remainder_of = remainder_of

    def generate(self, requests):
        for request in requests:
            text = self.remainder_of[request.request_id]
            yield GenerationResult(request.request_id, (Sample(text, len(text), "stop"),), prompt_tokens=0)

    def close(self) -> None:
        pass


def build_run(run_dir: Path) -> None:
    from recovery.pipeline import (
        DatasetConfig,
        InterventionsConfig,
        ModelConfig,
        RunConfig,
        SamplingConfig,
        TracesConfig,
        run_pipeline,
    )
    from recovery.run_dir.records import CHAINS_TABLE, TRACES_TABLE
    from recovery.segment import parse_trace
    from recovery.store import RunDir

    data = SHARED / "real_traces"
    config = RunConfig(
        run_dir=str(run_dir),
        dataset=DatasetConfig(name="real_traces", path=str(data)),
        models=[ModelConfig(name=SPEC, spec=SPEC)],
        traces=TracesConfig(
            source="import",
            path=str(data / "thought_anchors_math_cots.jsonl"),
            fields={
                "problem_id": "problem_id",
                "response": "solution",
                "question": "problem",
                "answer": "gt_answer",
                "id_prefix": "thought_anchors_math",
            },
        ),
        interventions=InterventionsConfig(names=["random_characters"], timesteps=[0.1, 0.3, 0.5, 0.7, 0.9]),
        continuation=SamplingConfig(n=1),
        cpu_workers=1,
    )
    run_pipeline(config, stages=["problems", "traces", "filter", "chains"], progress=False)
    run = RunDir(config.run_dir)
    traces = {r["id"]: r for r in run.table(TRACES_TABLE).iter_rows(["id", "problem_id", "model", "text"])}
    remainder_of = {}
    for chain in run.table(CHAINS_TABLE).iter_rows(["id", "trace_id", "original_prefix_chars"]):
        trace = traces[chain["trace_id"]]
        parsed = parse_trace(trace["problem_id"], trace["model"], trace["text"])
        cut = chain["original_prefix_chars"]
        remainder_of[chain["id"]] = parsed.reasoning[cut:] + parsed.think_close + parsed.answer_text
    run_pipeline(config, make_generator=lambda model: Remainders(remainder_of), progress=False, n_boot=10)


def moved_boundary(tokenizer, prompt: str, completion: str) -> bool:
    alone = tokenizer(text=prompt)["input_ids"]
    joint = tokenizer(text=prompt + completion)["input_ids"]
    return joint[: len(alone)] != alone


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-prompt-tokens", type=int, default=4096)
    parser.add_argument("--max-tokens", type=int, default=8192)
    args = parser.parse_args()

    from transformers import AutoTokenizer

    from recovery.models import get_spec
    from recovery.training_data import GRPOPromptConfig, PromptRenderer, SFTConfig, load_run
    from recovery.training_data.grpo import grpo_rows
    from recovery.training_data.sft import sft_rows

    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(str(SHARED / "tokenizers" / "DeepSeek-R1-Distill-Qwen"))
    later = copy.copy(tokenizer)
    later.chat_template = tokenizer.chat_template.replace(*LATER_REVISION)
    with tempfile.TemporaryDirectory() as tmp:
        build_run(Path(tmp) / "run")
        data = load_run(Path(tmp) / "run")
        spec = get_spec(SPEC)
        renderer = PromptRenderer.for_run(tokenizer, spec, data.config)
        rows, _, counts = sft_rows(data, renderer, SFTConfig(clean_fraction=0.5))
        moved = sum(moved_boundary(tokenizer, r["prompt"], r["completion"]) for r in rows)
        print(f"SFT rows: {len(rows)} ({counts['recovery_rows']} recoveries, {counts['clean_rows']} clean)")
        print(f"  boundary moved by text tokenization: {moved} ({100 * moved / len(rows):.1f} %)")
        lengths = sorted(len(r["input_ids"]) for r in rows)
        print(f"  tokens per row: median {lengths[len(lengths) // 2]}, max {lengths[-1]}")
        for name, tok in (("first revision", tokenizer), ("later revision (<think>\\n)", later)):
            built = grpo_rows(data, PromptRenderer.for_run(tok, spec, data.config), GRPOPromptConfig())
            print(f"GRPO prompts, {name}: {len(built.rows)} kept, dropped {built.drops.as_dict() or 'none'}")
        budget = SFTConfig(clean_fraction=0.5, max_prompt_tokens=args.max_prompt_tokens, max_tokens=args.max_tokens)
        kept, drops, _ = sft_rows(data, renderer, budget)
        print(f"SFT with max_prompt_tokens={args.max_prompt_tokens}, max_tokens={args.max_tokens}: {len(kept)} rows")
        print(f"  dropped: {drops.as_dict()}")
        grpo = grpo_rows(data, renderer, GRPOPromptConfig(max_prompt_tokens=args.max_prompt_tokens))
        print(f"GRPO with max_prompt_tokens={args.max_prompt_tokens}: {len(grpo.rows)} kept, {grpo.drops.as_dict()}")
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
