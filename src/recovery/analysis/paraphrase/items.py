"""The paraphrase chains of a run, rebuilt as (original prefix, paraphrased prefix) pairs, and the
seeded per-domain sample the judge sees."""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recovery.analysis.paraphrase.constants import PARAPHRASE_INTERVENTIONS
from recovery.data.skips import Skips
from recovery.ids import item_seed
from recovery.run_dir import open_run
from recovery.segment import (
    STEP_SEPARATOR,
    SegmentationError,
    join_steps,
    parse_trace,
    split_steps,
)


@dataclass(frozen=True)
class ParaphraseItem:
    """One paraphrase chain to judge: the problem, the original prefix and its rewrite."""

    chain_id: str
    domain: str
    model: str
    intervention: str
    target_t: float
    question: str
    original: str
    paraphrase: str


def paraphrase_items(
    run_dir: str | Path,
    interventions: Sequence[str] = PARAPHRASE_INTERVENTIONS,
    *,
    skips: Skips | None = None,
) -> list[ParaphraseItem]:
    """The run's paraphrase chains with both prefixes, sorted by chain id.

    The original prefix is the trace's reasoning steps ``0..cut_index`` (checked against the chain's stored
    ``original_prefix_chars``); the paraphrase is the chain's ``inserted_text`` (without a forced "Wait",
    App. ``append_wait``). Chains that cannot be rebuilt are counted in ``skips`` by reason.
    """
    run = open_run(run_dir)
    if not run.tables.chains.exists():
        raise ValueError(f"{run_dir}: no chains table (run the pipeline's chains stage first)")
    wanted = set(interventions)
    chains = [r for r in run.chain_rows() if r["intervention"] in wanted]
    trace_ids = {c["trace_id"] for c in chains}
    traces = {r["id"]: r for r in run.trace_rows(["id", "problem_id", "model", "text"]) if r["id"] in trace_ids}
    problems = {r["id"]: r for r in run.problem_rows(["id", "domain", "question"])}
    items = []
    for chain in sorted(chains, key=lambda c: c["id"]):
        item = _item(chain, traces, problems, skips)
        if item is not None:
            items.append(item)
    return items


def _item(
    chain: Mapping[str, Any], traces: Mapping[str, Any], problems: Mapping[str, Any], skips: Skips | None
) -> ParaphraseItem | None:
    def skip(reason: str) -> None:
        if skips is not None:
            skips.add(reason, f"chain {chain['id']}")

    options = json.loads(chain.get("options") or "{}")
    if int(options.get("repeats", 1)) > 1:
        skip("repeated_intervention")  # k rewrites interleaved with model text: no single original prefix
        return None
    trace_row = traces.get(chain["trace_id"])
    if trace_row is None:
        skip("trace_not_found")
        return None
    problem = problems.get(chain["problem_id"])
    if problem is None:
        skip("problem_not_found")
        return None
    try:
        trace = parse_trace(trace_row["problem_id"], trace_row["model"], trace_row["text"])
    except SegmentationError:
        skip("trace_unparseable")
        return None
    steps = split_steps(trace.reasoning)
    cut = int(chain["cut_index"])
    if not 0 <= cut < len(steps):
        skip("cut_outside_trace")
        return None
    original = join_steps(steps[: cut + 1])
    if len(original) != chain["original_prefix_chars"]:
        skip("original_prefix_mismatch")  # the trace is not the one the chain was cut from
        return None
    paraphrase = chain["inserted_text"] or ""
    if options.get("append_wait"):
        tail = STEP_SEPARATOR + str(options.get("wait_text", "Wait"))
        paraphrase = paraphrase.removesuffix(tail)
    if not paraphrase.strip():
        skip("empty_paraphrase")
        return None
    return ParaphraseItem(
        chain["id"],
        problem["domain"],
        chain["model"],
        chain["intervention"],
        float(chain["target_t"]),
        problem["question"],
        original,
        paraphrase,
    )


def sample_per_domain(items: Sequence[ParaphraseItem], per_domain: int, seed: int) -> list[ParaphraseItem]:
    """Up to ``per_domain`` items of each domain, drawn without replacement with a generator private to
    (seed, domain), so one domain's draw does not depend on the others; sorted by (domain, chain id).

    Each domain's items are shuffled once and the first ``per_domain`` taken, so a larger sample extends a
    smaller one (with the same seed) and the judgments already stored are reused."""
    if per_domain < 1:
        raise ValueError(f"per_domain must be ≥ 1, got {per_domain}")
    by_domain: dict[str, list[ParaphraseItem]] = defaultdict(list)
    for item in sorted(items, key=lambda i: i.chain_id):
        by_domain[item.domain].append(item)
    chosen = []
    for domain in sorted(by_domain):
        pool = by_domain[domain]
        random.Random(item_seed(seed, "paraphrase-check", domain)).shuffle(pool)
        chosen.extend(pool[:per_domain])
    return sorted(chosen, key=lambda i: (i.domain, i.chain_id))
