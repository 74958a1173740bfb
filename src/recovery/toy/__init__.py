"""The embedded default: a toy reasoning world and a tiny reasoner trained in it, all on a CPU.

* Problems: `generate_problem` / `generate_problems` (families ``arith`` and ``swap``, item ``idx`` from
  ``random.Random(seed + idx)``), `heldout_problems`, graded by `grade_toy` (or the core grader).
* Traces: `write_trace` — R1-style responses with a configurable fraction of natural slips + "Wait", in
  the self-checking style of the shipped model (``checks=True``: a check after every operation step).
* Model: `load_tiny_reasoner()` → ``(model, tokenizer)`` from the checkpoint shipped in the package;
  retrain with ``python -m recovery.toy.train --config recipes/tiny-reasoner/base/sft.yaml`` (stage 1, from
  scratch), then ``--config recipes/tiny-reasoner/base/sft_layouts.yaml`` (stage 2, varied layouts).
* Interventions: the paper's seven for this world, named ``toy/<name>`` in
  `recovery.interventions.registry`.
* Teacher: `recovery_continuation` — a correct recovery continuation for any intervened prefix.

Nothing here imports torch until a model is loaded or trained.
"""

from recovery.toy.dataset import HELDOUT_SEED, heldout_problems
from recovery.toy.interventions import TOY_NAMES
from recovery.toy.model import checkpoint_dir, has_checkpoint, load_tiny_reasoner
from recovery.toy.tasks import (
    FAMILIES,
    ToyTaskConfig,
    generate_problem,
    generate_problems,
    is_toy_problem,
    parse_question,
    spec_of,
)
from recovery.toy.teacher import Recovery, recovery_continuation, teach
from recovery.toy.traces import ToyTrace, write_trace
from recovery.toy.verify import grade_toy

__all__ = [
    "FAMILIES",
    "HELDOUT_SEED",
    "TOY_NAMES",
    "Recovery",
    "ToyTaskConfig",
    "ToyTrace",
    "checkpoint_dir",
    "generate_problem",
    "generate_problems",
    "grade_toy",
    "has_checkpoint",
    "heldout_problems",
    "is_toy_problem",
    "load_tiny_reasoner",
    "parse_question",
    "recovery_continuation",
    "spec_of",
    "teach",
    "write_trace",
]
