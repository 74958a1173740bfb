"""Two optimizer steps of a real `transformers.Trainer` on the tiny reasoner with the `RobustnessCallback`,
on as many processes as ``accelerate launch`` starts (test_training_callback_ranks.py runs it).

The callback measures at step 0 and after step 2. Every rank writes ``rank{i}.json`` (the request ids it
generated at each evaluation) into ``--out``; the main process also writes ``metrics.json`` (the
``robustness/*`` keys and the step of each record of ``state.log_history``, the wall time left out). Every training example is the
same sequence and each process takes one per step, so the weights after a step are those of a single
process (two identical gradients averaged are the gradient itself) and any difference in the metrics
comes from the callback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from recovery.run_config import InterventionsConfig, SamplingConfig

CALLBACK = {
    "n_problems": 2,
    "interventions": InterventionsConfig(
        names=["toy/wrong_continuation", "toy/random_characters"], timesteps=[0.3, 0.7]
    ),
    "continuation": SamplingConfig(n=2, max_new_tokens=16),
    "spec": "tiny-reasoner",
    "at_train_begin": True,
    "every_k_steps": 2,
    "on_evaluate": False,
    "n_boot": 20,
    "raise_errors": True,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for rank{i}.json and metrics.json")
    out = Path(parser.parse_args().out)

    import torch
    from transformers import Trainer, TrainingArguments

    from recovery.toy import load_tiny_reasoner
    from recovery.training import RobustnessCallback, RobustnessCallbackConfig
    from recovery.training.minibench_chains import toy_items

    torch.set_num_threads(1)
    model, tokenizer = load_tiny_reasoner()
    model.train()
    _, trace = toy_items(4)[3]  # a problem the benchmark (the first two) does not measure
    ids = tokenizer(trace.text)["input_ids"][:48]
    dataset = [{"input_ids": ids, "labels": ids}] * 8
    args = TrainingArguments(
        output_dir=str(out / "trainer"),
        use_cpu=True,
        max_steps=2,
        per_device_train_batch_size=1,
        learning_rate=1e-3,
        seed=0,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
        ddp_timeout=300,
    )
    trainer = Trainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
    callback = RobustnessCallback(RobustnessCallbackConfig(**CALLBACK)).attach(trainer)
    trainer.train()

    rank = trainer.accelerator.process_index
    (out / f"rank{rank}.json").write_text(json.dumps({"generated": callback.generated}))
    if trainer.accelerator.is_main_process:
        rows = [
            {k: v for k, v in row.items() if k == "step" or (k.startswith("robustness/") and k != "robustness/seconds")}
            for row in trainer.state.log_history
            if any(k.startswith("robustness/") for k in row)
        ]
        (out / "metrics.json").write_text(json.dumps(rows, sort_keys=True))
    # Both ranks leave the group together, as PyTorch asks of a script that ends: a rank whose peer already
    # exited can abort in the gloo group's destructor at interpreter exit (seen once, SIGABRT after the run).
    trainer.accelerator.wait_for_everyone()
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
    # Everything the test reads is written and the group is gone, so the process ends here, skipping the
    # interpreter's finalisation: there a rank aborted twice in CI ("terminate called without an active
    # exception", SIGABRT after a finished run, once even after the group was destroyed), a C++ object of
    # torch's being torn down with its thread still running. `os._exit` runs no destructors and no atexit.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
