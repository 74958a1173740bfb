"""Train the tiny reasoner with TRL's `SFTTrainer`, in two stages.

    python -m recovery.toy.train --config recipes/tiny-reasoner/base/sft.yaml           # stage 1, from scratch
    python -m recovery.toy.train --config recipes/tiny-reasoner/base/sft_layouts.yaml   # stage 2 [--max_steps 50 ...]

Stage 2 continues stage 1's model (``init_from``) on examples laid out anew (``layout_rate``,
`recovery.toy.layouts`) so that the model reads the question by content rather than by position.

The recipe is a flat YAML read by `trl.TrlParser` into three dataclasses: `ToyDataArguments` (the toy
data and tokenizer), `trl.SFTConfig` (the training run) and `TinyModelArguments` (the Llama's shape).
Command-line flags override the file. The run writes the model, tokenizer (with chat template) and
``metrics.json`` (time, held-out greedy and sampled accuracy) to ``output_dir``, and copies the
checkpoint files to ``export_dir`` when one is given (``src/recovery/toy/checkpoint`` ships it).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from recovery.toy.dataset import heldout_problems, tokenizer_corpus, training_examples, training_traces
from recovery.toy.generate import GREEDY, PAPER_SAMPLING, accuracy
from recovery.toy.interventions import intervention_corpus
from recovery.toy.model import (
    CHECKPOINT_FILES,
    TOKENIZER_FILES,
    TinyModelArguments,
    build_model,
    count_parameters,
    load_tiny_reasoner,
)
from recovery.toy.tasks import ToyTaskConfig
from recovery.toy.tokenizer import train_tokenizer

logger = logging.getLogger(__name__)


@dataclass
class ToyDataArguments:
    """Toy data, tokenizer and evaluation settings (recipe keys)."""

    task_seed: int = field(default=0, metadata={"help": "Seed of the training problems and traces."})
    num_train_problems: int = field(default=25600, metadata={"help": "Training traces to generate."})
    slip_rate: float = field(default=0.15, metadata={"help": "Fraction of traces with a slip and 'Wait'."})
    min_ops: int = field(default=3, metadata={"help": "Fewest arithmetic operations per problem."})
    max_ops: int = field(default=5, metadata={"help": "Most arithmetic operations per problem."})
    min_swaps: int = field(default=3, metadata={"help": "Fewest swaps per problem."})
    max_swaps: int = field(default=4, metadata={"help": "Most swaps per problem."})
    vocab_size: int = field(default=768, metadata={"help": "BPE vocabulary size."})
    tokenizer_traces: int = field(default=4000, metadata={"help": "Traces the BPE is trained on."})
    num_eval_problems: int = field(default=200, metadata={"help": "Held-out problems for the final eval."})
    num_threads: int = field(default=2, metadata={"help": "torch intra-op threads."})
    export_dir: str | None = field(default=None, metadata={"help": "Copy the checkpoint files here."})
    init_from: str | None = field(
        default=None,
        metadata={
            "help": "Continue from this checkpoint (its weights and tokenizer) instead of a new model and "
            "BPE; the model-shape keys are then ignored. Stage 2 of the recipe starts from stage 1."
        },
    )
    layout_rate: float = field(
        default=0.0,
        metadata={
            "help": "Share of examples laid out anew (instruction sentences after the question, longer "
            "openers; recovery.toy.layouts), so the model reads the question by content."
        },
    )
    checks: bool = field(
        default=False,
        metadata={
            "help": "Write the traces in the self-checking style: every operation step followed by its "
            "check (recovery.toy.traces), so that a wrong step of the model's own style is noticeable."
        },
    )
    mask_slips: bool = field(
        default=False,
        metadata={
            "help": "No loss on a slip's wrong step: the model learns to doubt and redo a wrong step "
            "without learning to write one."
        },
    )
    mask_reactions: bool = field(
        default=False,
        metadata={
            "help": "No loss on the doubt and corrected step that answer a slip: with checks, the model "
            "learns to check a wrong step honestly but not what to do when its check disagrees, which is "
            "left to recovery training."
        },
    )

    def task_config(self):

        return ToyTaskConfig(
            min_ops=self.min_ops, max_ops=self.max_ops, min_swaps=self.min_swaps, max_swaps=self.max_swaps
        )


def build_tokenizer(data_args: ToyDataArguments, traces):
    """Train the BPE on the first ``tokenizer_traces`` traces plus the intervention texts."""

    corpus = tokenizer_corpus(traces[: data_args.tokenizer_traces], extra=intervention_corpus())
    return train_tokenizer(corpus, vocab_size=data_args.vocab_size)


def export_checkpoint(source: str | Path, target: str | Path, metrics: dict | None = None) -> Path:
    """Copy only the files `load_tiny_reasoner` needs from a training output to ``target``, plus a short
    model card (``README.md``) with the run's metrics when given."""
    source, target = Path(source), Path(target)
    target.mkdir(parents=True, exist_ok=True)
    for name in CHECKPOINT_FILES + TOKENIZER_FILES:
        shutil.copyfile(source / name, target / name)
    if metrics is not None:
        write_model_card(target, metrics)
    return target


def write_model_card(target: str | Path, metrics: dict) -> Path:
    """A README for a checkpoint directory: what it is, how it was trained, what it scored."""
    m = {k: v for k, v in metrics.items() if k != "data_args"}
    data_args = metrics.get("data_args", {})
    slip_rate = data_args.get("slip_rate")
    slips = f"About {slip_rate:.0%} of" if slip_rate is not None else "Some"
    style = []
    if data_args.get("checks"):
        style = [
            "Every operation step is followed by its check, the operation redone (`Check: 12 - 3 = 9.`);",
            "a slip's check disagrees with it, and the doubt and correction come after that check.",
        ]
    if data_args.get("mask_slips"):
        style.append("Slips carried no loss on their wrong step.")
    if data_args.get("mask_reactions"):
        style.append("The doubt and correction that answer a slip carried no loss (left to recovery training).")
    stage_two = []
    if data_args.get("init_from"):
        stage_two = [
            "",
            f"Stage 2 continued from a stage-1 checkpoint on fresh problems: {data_args.get('layout_rate', 0):.0%} of",
            "the examples laid out anew (instruction sentences after the question, longer openers;",
            "`recovery.toy.layouts`), so that the model reads the question by content.",
        ]
    lines = [
        "# tiny-reasoner (recovery toy world)",
        "",
        "A Llama-architecture causal LM trained from scratch by `recovery` on its toy reasoning world",
        "(chained arithmetic and ball-passing problems) with R1-style traces: the generation prompt opens",
        "`<think>`, steps are separated by blank lines, the answer follows `</think>` in `\\boxed{}`.",
        f"{slips} training traces contain a slip followed by a doubt phrase and a correction.",
        *style,
        *stage_two,
        "",
        "Load: `AutoModelForCausalLM.from_pretrained(dir)` / `AutoTokenizer.from_pretrained(dir)`, or",
        "`recovery.toy.load_tiny_reasoner()`. Retrain: `python -m recovery.toy.train --config",
        "recipes/tiny-reasoner/base/sft.yaml`, then `--config recipes/tiny-reasoner/base/sft_layouts.yaml` (TRL",
        "SFTTrainer, CPU).",
        "",
        "| metric | value |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in m.items()],
        "",
        "Accuracies are on the first held-out problems (`recovery.toy.heldout_problems`, seed 1000000),",
        "greedy and with T=0.6, top_p=0.95. Times depend on the machine and on what else runs on it.",
        "",
    ]
    path = Path(target) / "README.md"
    path.write_text("\n".join(lines))
    return path


def evaluate(model, tokenizer, n: int, config=None) -> dict[str, float]:
    """Greedy and paper-sampling accuracy on the first ``n`` held-out problems."""

    problems = heldout_problems(n, config=config)
    model.eval()
    t0 = time.perf_counter()
    greedy = accuracy(model, tokenizer, problems, sampling=GREEDY)
    sampled = accuracy(model, tokenizer, problems, sampling=PAPER_SAMPLING, seed=0)
    return {
        "greedy_accuracy": greedy,
        "sampled_accuracy": sampled,
        "eval_problems": n,
        "eval_seconds": round(time.perf_counter() - t0, 1),
    }


def main(data_args: ToyDataArguments, training_args, model_args: TinyModelArguments) -> dict:
    """Generate data, train tokenizer and model, save, evaluate; returns the metrics."""
    import torch
    from datasets import Dataset
    from transformers import set_seed
    from trl import SFTTrainer

    torch.set_num_threads(data_args.num_threads)
    set_seed(training_args.seed)
    t_start = time.perf_counter()
    config = data_args.task_config()
    traces = training_traces(
        data_args.num_train_problems,
        seed=data_args.task_seed,
        slip_rate=data_args.slip_rate,
        config=config,
        checks=data_args.checks,
    )
    model, tokenizer = _starting_point(data_args, model_args, traces, training_args.seed)
    logger.info("tiny reasoner: %d parameters, vocabulary %d", count_parameters(model), len(tokenizer))
    dataset = Dataset.from_list(
        training_examples(
            traces,
            tokenizer,
            layout_rate=data_args.layout_rate,
            mask_slips=data_args.mask_slips,
            mask_reactions=data_args.mask_reactions,
            seed=data_args.task_seed,
        )
    )
    t_data = time.perf_counter() - t_start

    trainer = SFTTrainer(model=model, args=training_args, train_dataset=dataset, processing_class=tokenizer)
    t_train0 = time.perf_counter()
    result = trainer.train()
    t_train = time.perf_counter() - t_train0

    output_dir = Path(training_args.output_dir)
    model.config.use_cache = True  # training turns the KV cache off; generation wants it back
    trainer.save_model(str(output_dir))
    tokenizer.save_pretrained(str(output_dir))
    model.generation_config.save_pretrained(str(output_dir))

    metrics = {
        "parameters": count_parameters(model),
        "vocab_size": len(tokenizer),
        "train_steps": result.global_step,
        "train_loss": round(result.training_loss, 4),
        "data_seconds": round(t_data, 1),
        "train_seconds": round(t_train, 1),
    }
    if data_args.num_eval_problems > 0:
        metrics.update(evaluate(model, tokenizer, data_args.num_eval_problems, config))
    metrics["total_seconds"] = round(time.perf_counter() - t_start, 1)
    metrics["data_args"] = asdict(data_args)
    (output_dir / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    if data_args.export_dir:
        export_checkpoint(output_dir, data_args.export_dir, metrics)
    logger.info("metrics: %s", json.dumps(metrics))
    print(json.dumps(metrics, indent=2))
    return metrics


def _starting_point(data_args: ToyDataArguments, model_args: TinyModelArguments, traces, seed: int):
    """``(model, tokenizer)``: loaded from ``init_from`` (in training mode), or new ones."""

    if data_args.init_from:
        model, tokenizer = load_tiny_reasoner(data_args.init_from)
        model.train()
        return model, tokenizer
    tokenizer = build_tokenizer(data_args, traces)
    return build_model(tokenizer, model_args, seed=seed), tokenizer


def make_parser():
    """The `TrlParser` for the three argument dataclasses (a `RecipeParser`: checkpointing keys under the
    installed transformers' names)."""
    from recovery.recipe_parser import RecipeParser, import_transformers_quietly  # lazy: loads trl

    import_transformers_quietly()  # before trl imports it
    from trl import SFTConfig

    return RecipeParser((ToyDataArguments, SFTConfig, TinyModelArguments))


if __name__ == "__main__":
    # Before torch is imported: idle OpenMP threads sleep instead of spinning, so a busy machine (other
    # processes on the same 2 cores) slows training down in proportion instead of by an order of magnitude.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    main(*make_parser().parse_args_and_config())
