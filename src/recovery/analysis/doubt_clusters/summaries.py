"""One-line cluster summaries written by an LLM in a single greedy call (paper App. E.1)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from recovery.analysis.doubt_clusters.clustering import Cluster
from recovery.analysis.doubt_clusters.sentences import DoubtSentence
from recovery.generation import Decoding, Message

if TYPE_CHECKING:
    from recovery.generation import TextGenerator

SUMMARY_SYSTEM = (
    "You label clusters of sentences. The sentences come from language models' step-by-step reasoning, right "
    "after someone tampered with that reasoning."
)
SUMMARY_USER = (
    "Below are {k} clusters of sentences, largest first; each shows up to {n} distinct example sentences.\n"
    "For every cluster write one short phrase (at most 12 words) saying what its sentences have in common.\n"
    "Reply with exactly one line per cluster, formatted as `Cluster <number>: <summary>`, and nothing else.\n\n"
    "{clusters}"
)
_SUMMARY_LINE = re.compile(r"^\W*cluster\s+(\d+)\s*\**\s*[:.)\-\u2013\u2014]\s*(.+?)\s*$", re.IGNORECASE)


def summary_messages(
    clusters: Sequence[Cluster], sentences: Sequence[DoubtSentence], *, samples: int = 10, seed: int = 0
):
    """The single summarisation prompt of App. E.1: per cluster (by size), ``samples`` distinct sentences
    drawn with ``seed`` from the deduplicated cluster, shown in sorted order."""

    blocks = []
    for c in clusters:
        distinct = sorted({sentences[i].sentence for i in c.members})
        rng = np.random.default_rng([seed, c.rank])
        shown = (
            distinct if len(distinct) <= samples else sorted(rng.choice(distinct, size=samples, replace=False).tolist())
        )
        lines = "\n".join(f"- {s}" for s in shown)
        blocks.append(f"Cluster {c.rank} ({c.size} sentences):\n{lines}")
    user = SUMMARY_USER.format(k=len(clusters), n=samples, clusters="\n\n".join(blocks))
    return [Message("system", SUMMARY_SYSTEM), Message("user", user)]


def parse_summaries(reply: str, ranks: Sequence[int]) -> dict[int, str]:
    """``{rank: summary}`` from lines ``Cluster <rank>: <summary>``; unknown ranks and other lines are ignored.

    >>> parse_summaries("Cluster 1: Abrupt negation.\\n**Cluster 2** - Back on track", [1, 2])
    {1: 'Abrupt negation.', 2: 'Back on track'}
    """
    wanted = set(ranks)
    out: dict[int, str] = {}
    for line in reply.splitlines():
        m = _SUMMARY_LINE.match(line)
        if m and int(m.group(1)) in wanted and int(m.group(1)) not in out:
            out[int(m.group(1))] = m.group(2).strip("* ")
    return out


def summarize_clusters(
    clusters: Sequence[Cluster],
    sentences: Sequence[DoubtSentence],
    generator: TextGenerator,
    *,
    samples: int = 10,
    seed: int = 0,
) -> dict[int, str]:
    """One greedy LLM call summarising all ``clusters`` (paper App. E.1); ``{rank: summary}``."""

    if not clusters:
        return {}
    messages = summary_messages(clusters, sentences, samples=samples, seed=seed)
    reply = generator(messages, Decoding(temperature=0.0, max_new_tokens=48 * len(clusters) + 64))
    if not isinstance(reply, str):
        raise TypeError(f"the summariser replied with {type(reply).__name__}, not text")
    return parse_summaries(reply, [c.rank for c in clusters])
