"""A small, self-contained recovery measurement for the tiny reasoner (used by the benchmark and tests).

The paper's protocol at toy scale: the model answers each problem greedily (its own original trace; only
correctly answered problems are kept, as the paper starts from correct CoTs), the trace is intervened at
timestep *t* with `recovery.interventions.intervene`, and the model continues the intervened prefix
``N`` times with the paper's sampling. Per (intervention, t) it reports majority robustness (K ≥ ⌊N/2⌋+1),
per-sample accuracy, and the doubt rate (continuations with a doubt word before ``</think>``).

The full pipeline (`recovery.pipeline`) does the same at scale with stores and reports; this module
exists so a checkpoint can be probed in seconds without one.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from recovery.interventions import intervene
from recovery.metrics import majority_threshold
from recovery.segment import cut_at, join_steps, parse_trace, split_steps
from recovery.toy.generate import GREEDY, PAPER_SAMPLING, Sampling, generate
from recovery.toy.tokenizer import prompt_text
from recovery.toy.verify import grade_toy
from recovery.types import Problem, Trace

# Lexical doubt markers (the short expressions the paper's App. E finds most often).
DOUBT_RE = re.compile(r"\b(?:Wait|wait|Hmm|hmm|let me check|Let me check|Hold on)\b")
MODEL_NAME = "tiny-reasoner"
logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ProbeRow:
    """One (intervention, t) cell: ``chains`` intervened chains with ``n`` continuations each."""

    intervention: str
    t: float
    chains: int
    n: int
    majority: float  # fraction of chains with K ≥ ⌊N/2⌋+1 correct
    sample_accuracy: float  # fraction of all continuations that are correct
    doubt_rate: float  # fraction of continuations with a doubt expression in their reasoning
    recovered_with_doubt: float  # fraction of continuations that doubt and end correct


def has_doubt(continuation: str) -> bool:
    """True when the reasoning part of a continuation contains a doubt expression."""
    reasoning = continuation.split("</think>", 1)[0]
    return DOUBT_RE.search(reasoning) is not None


def original_traces(
    model, tokenizer, problems: Sequence[Problem], *, batch_size: int = 64
) -> list[tuple[Problem, Trace]]:
    """The model's greedy traces, kept only where the answer is correct (the paper's starting point)."""
    prompts = [prompt_text(tokenizer, p.question) for p in problems]
    outputs = generate(model, tokenizer, prompts, sampling=GREEDY, batch_size=batch_size)
    kept = []
    for problem, (response,) in zip(problems, outputs):
        if grade_toy(response, problem).correct:
            kept.append((problem, parse_trace(problem.id, MODEL_NAME, response)))
    return kept


def probe(
    model,
    tokenizer,
    traces: Sequence[tuple[Problem, Trace]],
    interventions: Iterable[str],
    timesteps: Iterable[float] = (0.3, 0.5, 0.7),
    *,
    n: int = 8,
    sampling: Sampling = PAPER_SAMPLING,
    seed: int = 0,
    batch_size: int = 128,
) -> list[ProbeRow]:
    """Intervene every trace with every (intervention, t), continue ``n`` times, grade; one row per cell.

    ``intervention="none"`` continues the un-intervened prefix cut at t (the baseline).
    """

    rows: list[ProbeRow] = []
    for name in interventions:
        for t in timesteps:
            items: list[tuple[Problem, str]] = []
            for problem, trace in traces:
                if name == "none":
                    steps = split_steps(trace.reasoning)
                    prefix = join_steps(steps[: cut_at(steps, t).index + 1])
                else:
                    prefix = intervene(problem, trace, name, t, seed=seed).prefix
                items.append((problem, prefix))
            prompts = [prompt_text(tokenizer, p.question) + prefix for p, prefix in items]
            outputs = generate(
                model, tokenizer, prompts, sampling=sampling, num_samples=n, seed=seed, batch_size=batch_size
            )
            stats = defaultdict(int)
            for (problem, prefix), conts in zip(items, outputs):
                k = 0
                for cont in conts:
                    ok = grade_toy(prefix + cont, problem).correct
                    doubt = has_doubt(cont)
                    k += ok
                    stats["doubt"] += doubt
                    stats["doubt_ok"] += doubt and ok
                stats["correct"] += k
                stats["majority"] += k >= majority_threshold(n)
            chains = len(items)
            total = max(chains * n, 1)
            rows.append(
                ProbeRow(
                    name,
                    t,
                    chains,
                    n,
                    stats["majority"] / max(chains, 1),
                    stats["correct"] / total,
                    stats["doubt"] / total,
                    stats["doubt_ok"] / total,
                )
            )
            logger.info("probe %s", rows[-1])
    return rows


def format_rows(rows: Sequence[ProbeRow]) -> str:
    """A Markdown table of probe rows."""
    lines = [
        "| intervention | t | chains | majority | per-sample acc | doubt rate | doubt & correct |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.intervention} | {r.t} | {r.chains} | {r.majority:.2f} | {r.sample_accuracy:.2f} | "
            f"{r.doubt_rate:.2f} | {r.recovered_with_doubt:.2f} |"
        )
    return "\n".join(lines)
