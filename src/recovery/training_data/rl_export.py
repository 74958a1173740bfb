"""A run's GRPO prompts in the dataset layouts of verl and OpenRLHF (``recovery export RUN --format verl|openrlhf``).

Both start from the GRPO rows (`recovery.training_data.grpo`: prompts whose trainer tokenization is checked to
be the benchmark's prompt ids, within the token budget) and differ in how a trainer turns a row into tokens:

* **verl** templates the row's chat messages itself and cannot carry the assistant prefill, so the row holds
  the benchmark's prompt ids (BOS included where the tokenizer adds one) and names the agent loop that rolls
  out from them (`recovery.integrations.verl_rows`: layout; `recovery.integrations.verl_agent_loop`: the loop).
  Written: ``verl/train.parquet``, ``verl/agent_loop.yaml`` (registers the loop) and ``verl/README.md``.
* **OpenRLHF** tokenizes the prompt text with ``add_special_tokens=False``, so the text carries the BOS string
  (a recovery GRPO prompt leaves it out for TRL, whose tokenizer call adds it back); a row is kept only when
  that tokenization is exactly the benchmark's ids (else dropped: ``tokens/prompt_ids_differ_from_benchmark``).
  Written: ``openrlhf/train.jsonl`` (``prompt``, ``label``: `recovery.integrations.openrlhf.openrlhf_label`).

Rows whose gold answer the reward cannot use are dropped (``reward/unusable_gold``) rather than handed to a
trainer that would have to score them somehow. Every drop is counted in ``<format>/export.json``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recovery.integrations.openrlhf import openrlhf_label
from recovery.integrations.verl_rows import AGENT_LOOP_YAML, verl_row
from recovery.rewards import unusable_gold
from recovery.store import atomic_write_text
from recovery.training_data.decontam import EvalSet
from recovery.training_data.drops import Drops
from recovery.training_data.grpo import GRPOPromptConfig, grpo_rows, renderer_for
from recovery.training_data.render import PromptRenderer
from recovery.training_data.source import RunData, load_run
from recovery.training_data.tokens import PROMPT_IDS_MISMATCH, trainer_prompt_ids

__all__ = ["FORMATS", "RLExport", "export_rl", "rl_rows"]

FORMATS: tuple[str, ...] = ("verl", "openrlhf")
_FILES = {"verl": "train.parquet", "openrlhf": "train.jsonl"}
_README = {
    "verl": """# recovery prompts for verl

`train.parquet` is verl's RL dataset layout (`recovery.integrations.verl_rows`). Each row names the agent loop
`recovery_prefill`, which rolls out from the row's `recovery_prompt_ids` (the benchmark's prompt ids: BOS,
template, think opener, intervened prefix) because verl's own chat templating cannot carry the prefill.

    python -m verl.trainer.main_ppo \\
      data.train_files=$PWD/train.parquet data.val_files=$PWD/train.parquet \\
      data.filter_overlong_prompts=False \\
      actor_rollout_ref.rollout.agent.agent_loop_config_path=$PWD/agent_loop.yaml \\
      actor_rollout_ref.rollout.prompt_length=<max prompt_tokens or more> \\
      reward.custom_reward_function.path=pkg://recovery.integrations.verl \\
      reward.custom_reward_function.name=compute_score ...

`recovery` must be importable in every verl worker (it is the reward and the agent loop).
See docs/training-frameworks.md.
""",
    "openrlhf": """# recovery prompts for OpenRLHF

`train.jsonl`: `prompt` (the text OpenRLHF tokenizes with add_special_tokens=False: BOS string included) and
`label` (JSON: the reward's columns). Train with `--data.input_key prompt --data.label_key label` and
`--remote_rm_url` set to `recovery/integrations/openrlhf.py` or to a `recovery serve-rewards` URL
(`http://HOST:PORT/openrlhf`). See docs/training-frameworks.md.
""",
}


@dataclass
class RLExport:
    """What `export_rl` wrote: the data file, its rows, and every row left out with the reason."""

    format: str
    dir: str
    data_file: str
    rows: int
    drops: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _prompt_text(renderer: PromptRenderer, prompt: str) -> str:
    """The prompt with the BOS string the renderer left out for TRL (whose tokenizer call adds BOS back)."""
    bos = getattr(renderer.tokenizer, "bos_token", None)
    return bos + prompt if renderer.strip_bos and bos else prompt


def rl_rows(
    run: str | Path | RunData,
    renderers: PromptRenderer | Mapping[str, PromptRenderer],
    fmt: str,
    config: GRPOPromptConfig | None = None,
    *,
    eval_set: EvalSet | None = None,
    split: str = "train",
) -> tuple[list[dict[str, Any]], Drops]:
    """The rows of ``fmt`` (``verl`` or ``openrlhf``) for a run's GRPO prompts, and what was dropped."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    data = load_run(run)
    built = grpo_rows(data, renderers, config, eval_set=eval_set)
    drops = built.drops
    out: list[dict[str, Any]] = []
    for row in built.rows:
        if unusable_gold(row["answer"], row["answer_type"]) is not None:
            drops.add("reward", "unusable_gold")
            continue
        renderer = renderer_for(renderers, row["model"])
        ids = trainer_prompt_ids(renderer.tokenizer, row["prompt"])  # the benchmark's ids (grpo_rows checked)
        text = _prompt_text(renderer, row["prompt"])
        if fmt == "openrlhf":
            if list(renderer.tokenizer(text=text, add_special_tokens=False)["input_ids"]) != ids:
                drops.add("tokens", PROMPT_IDS_MISMATCH)
                continue
            tok = renderer.tokenizer
            strip = [s for s in (tok.eos_token, tok.pad_token) if isinstance(s, str)]
            out.append({"prompt": text, "label": openrlhf_label(row, strip)})
            continue
        messages = [{"role": m.role, "content": m.content} for m in renderer.messages(data.problems[row["problem_id"]])]
        out.append(verl_row(row, index=len(out), split=split, prompt_ids=ids, prompt_text=text, messages=messages))
    return out, drops


def export_rl(
    run: str | Path | RunData,
    out_dir: str | Path,
    fmt: str,
    renderers: PromptRenderer | Mapping[str, PromptRenderer],
    config: GRPOPromptConfig | None = None,
    *,
    eval_set: EvalSet | None = None,
) -> RLExport:
    """Write ``out_dir/<fmt>/`` (module doc) and return what was written."""
    rows, drops = rl_rows(run, renderers, fmt, config, eval_set=eval_set)
    folder = Path(out_dir) / fmt
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / _FILES[fmt]
    if fmt == "verl":
        import pyarrow as pa
        import pyarrow.parquet as pq

        tmp = path.with_name(f".{path.name}.tmp")
        pq.write_table(pa.Table.from_pylist(rows), tmp)
        tmp.replace(path)
        atomic_write_text(folder / "agent_loop.yaml", AGENT_LOOP_YAML)
    else:
        atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    atomic_write_text(folder / "README.md", _README[fmt])
    result = RLExport(fmt, str(folder), str(path), len(rows), drops.as_dict())
    atomic_write_text(folder / "export.json", json.dumps(result.as_dict(), indent=2, sort_keys=True))
    return result
