"""Does the paraphrase intervention keep the reasoning's meaning? An LLM judge says (paper App. D.4, Table 14).

The paper gave GPT-5.1 the problem, the original reasoning and the paraphrased one, asked whether both
contain logically equivalent reasoning steps, and reported the share judged equivalent on 100 random
traces per domain. Here, for a pipeline run directory:

* `paraphrase_items` collects the chains of the paraphrase intervention (``paraphrase``; the toy world's
  ``toy/paraphrase`` too) with the original prefix (the trace's steps up to the cut) and the paraphrased
  one (the chain's inserted text); chains that cannot be rebuilt are counted with a reason;
* `sample_per_domain` draws up to ``per_domain`` of them per domain, seeded;
* the judge (any `ModelConfig`, greedy) answers Yes/No to `judge_messages`; `parse_equivalence_reply`
  reads the reply (after ``</think>``), and an unreadable reply is counted, never guessed;
* `run_paraphrase_check` stores one row per judgment under ``RUN_DIR/analysis/paraphrase/judgments``
  (resumable), and the "Paraphrase quality" section with the equivalence rate per domain and its 95 %
  Wilson interval, then re-renders the run's report.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from tqdm.auto import tqdm

from recovery.analysis.bbm import final_answer_part, store_in_run, wilson_interval
from recovery.analysis.sections_store import analysis_dir, save_section
from recovery.backends.base import GenerationRequest, Generator, SamplingParams, batched
from recovery.configs import from_mapping, load_yaml
from recovery.data.skips import Skips
from recovery.ids import content_id, item_seed
from recovery.interventions.base import Message
from recovery.pipeline.config import ModelConfig
from recovery.report.data import Section, Table
from recovery.segment import STEP_SEPARATOR, SegmentationError, join_steps, parse_trace, split_steps
from recovery.store import RunDir
from recovery.store import Table as StoreTable

NAME = "paraphrase"
SECTION_TITLE = "Paraphrase quality"
#: Registry names of the whole-prefix rewrite: the paper's and the toy world's.
PARAPHRASE_INTERVENTIONS: tuple[str, ...] = ("paraphrase", "toy/paraphrase")
#: The paper's Table 14 (GPT-5.1 judge, 100 traces per domain), for comparison in the report.
PAPER_TABLE14: Mapping[str, float] = {"logic": 0.92, "science": 0.98, "math": 0.93}
JUDGE_PROMPT_VERSION = "paraphrase-judge-v1"  # part of every judgment's key

# The judge's instructions. The paper describes what the judge was asked (App. D.4) but does not print the
# prompt; this wording is ours.
JUDGE_SYSTEM = (
    "You compare two versions of the beginning of a solution to the same problem: the original reasoning and "
    "a rewritten one. Judge only their logical content, not their wording, style or formatting."
)
JUDGE_USER = (
    "Problem:\n{question}\n\n"
    "Original reasoning:\n<<<\n{original}\n>>>\n\n"
    "Rewritten reasoning:\n<<<\n{paraphrase}\n>>>\n\n"
    "Do both versions contain equivalent reasoning steps that are logically equivalent: the same claims, "
    "calculations, intermediate results and conclusions, with nothing essential added, dropped or changed? "
    "Answer with Yes or No only."
)

# Verdicts of one judgment. The rate counts YES over every sampled chain.
YES, NO, UNPARSEABLE, GENERATION_ERROR = "yes", "no", "unparseable", "generation_error"


# ------------------------------------------------------------------------------------------------ items


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
    run = RunDir(run_dir)
    if not run.table("chains").exists():
        raise ValueError(f"{run_dir}: no chains table (run the pipeline's chains stage first)")
    wanted = set(interventions)
    chains = [r for r in run.table("chains").iter_rows() if r["intervention"] in wanted]
    trace_ids = {c["trace_id"] for c in chains}
    traces = {r["id"]: r for r in run.table("traces").iter_rows(["id", "problem_id", "model", "text"]) if r["id"] in trace_ids}
    problems = {r["id"]: r for r in run.table("problems").iter_rows(["id", "domain", "question"])}
    items = []
    for chain in sorted(chains, key=lambda c: c["id"]):
        item = _item(chain, traces, problems, skips)
        if item is not None:
            items.append(item)
    return items


def _item(chain: Mapping[str, Any], traces: Mapping[str, Any], problems: Mapping[str, Any],
          skips: Skips | None) -> ParaphraseItem | None:  # fmt: skip
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
    return ParaphraseItem(chain["id"], problem["domain"], chain["model"], chain["intervention"],
                          float(chain["target_t"]), problem["question"], original, paraphrase)  # fmt: skip


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


# ------------------------------------------------------------------------------------------------ judge


def judge_messages(item: ParaphraseItem) -> tuple[Message, Message]:
    """The judge's (system, user) messages for ``item``."""
    user = JUDGE_USER.format(question=item.question.strip(), original=item.original.strip(),
                             paraphrase=item.paraphrase.strip())  # fmt: skip
    return Message("system", JUDGE_SYSTEM), Message("user", user)


_FIRST_WORD = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)
_ANSWER_LINE = re.compile(r"^\W*(?:final\s+)?(?:answer|verdict)\s*\W*[:：]\W*(yes|no)\b", re.IGNORECASE | re.MULTILINE)
_BOXED = re.compile(r"\\boxed\s*\{\W*(?:\\text\s*\{)?\s*(yes|no)\b", re.IGNORECASE)


def parse_equivalence_reply(reply: Any, *, finish_reason: str | None = None) -> tuple[str, str]:
    """``(verdict, detail)``: verdict ``yes``/``no``, or ``unparseable`` with the reason in ``detail``.

    Read after the last ``</think>``: the first word, else an "Answer: Yes" line or ``\\boxed{Yes}``,
    else the first word of the last line.

    >>> parse_equivalence_reply("Yes."), parse_equivalence_reply("<think>hm</think>\\n**No**")[0]
    (('yes', 'first word'), 'no')
    >>> parse_equivalence_reply("Both are similar.")[0]
    'unparseable'
    """
    if not isinstance(reply, str):
        return UNPARSEABLE, f"reply is {type(reply).__name__}, not text"
    text, closed = final_answer_part(reply)
    if not closed and finish_reason == "length":
        return UNPARSEABLE, "truncated: hit max_new_tokens before finishing its reasoning"
    text = text.strip()
    if not text:
        return UNPARSEABLE, "empty reply"
    match = _FIRST_WORD.match(text)
    if match:
        return match.group(1).lower(), "first word"
    for pattern, where in ((_ANSWER_LINE, "answer line"), (_BOXED, "boxed")):
        found = list(pattern.finditer(text))
        if found:
            return found[-1].group(1).lower(), where
    match = _FIRST_WORD.match(text.splitlines()[-1])
    if match:
        return match.group(1).lower(), "last line"
    return UNPARSEABLE, f"neither Yes nor No: {text[:80]!r}"


@dataclass
class ParaphraseCheckConfig:
    """The judge and the sample. The judge decodes greedily (``temperature`` 0) by default."""

    judge: ModelConfig
    per_domain: int = 100  # paper App. D.4: 100 traces per domain
    seed: int = 0
    interventions: list[str] = field(default_factory=lambda: list(PARAPHRASE_INTERVENTIONS))
    temperature: float = 0.0
    max_new_tokens: int = 2048  # room for a reasoning judge; a plain judge stops after one word
    flush_every: int = 64

    def __post_init__(self) -> None:
        if self.per_domain < 1:
            raise ValueError("per_domain must be ≥ 1")
        if not self.interventions:
            raise ValueError("interventions must not be empty")


def load_paraphrase_config(path: str | Path, overrides: Mapping[str, Any] | None = None) -> ParaphraseCheckConfig:
    """A `ParaphraseCheckConfig` from YAML (``judge:`` is a model config as in the run configs)."""
    data = {**load_yaml(path), **(overrides or {})}
    return from_mapping(ParaphraseCheckConfig, data, where=str(path))


def judgment_key(item: ParaphraseItem, config: ParaphraseCheckConfig) -> str:
    """The resume key of one judgment: chain, judge, prompt version and decoding."""
    j = config.judge
    return content_id("paraphrase-judgment", item.chain_id, j.name, j.path, j.spec, JUDGE_PROMPT_VERSION,
                      config.temperature, config.max_new_tokens)  # fmt: skip


JUDGMENTS = pa.schema([
    ("id", pa.string()), ("chain_id", pa.string()), ("domain", pa.string()), ("model", pa.string()),
    ("intervention", pa.string()), ("target_t", pa.float64()), ("judge", pa.string()), ("verdict", pa.string()),
    ("detail", pa.string()), ("reply", pa.string()), ("n_tokens", pa.int64()), ("finish_reason", pa.string()),
])  # fmt: skip


def judgments_table(run_dir: str | Path) -> StoreTable:
    """``RUN_DIR/analysis/paraphrase/judgments``: one Parquet row per judged chain."""
    return StoreTable(analysis_dir(run_dir, NAME) / "judgments")


# ------------------------------------------------------------------------------------------------ rates


@dataclass(frozen=True)
class EquivalenceRate:
    """Judgments of one group: ``rate`` = Yes over all ``n`` sampled (unparseable and errors count as not
    equivalent), with its Wilson interval; ``rate_parsed`` = Yes over Yes + No."""

    group: str
    n: int
    yes: int
    no: int
    unparseable: int
    errors: int
    ci_low: float
    ci_high: float

    @property
    def rate(self) -> float:
        return self.yes / self.n if self.n else math.nan

    @property
    def rate_parsed(self) -> float:
        return self.yes / (self.yes + self.no) if self.yes + self.no else math.nan


def equivalence_rates(rows: Iterable[Mapping[str, Any]], key: Callable[[Mapping[str, Any]], str] = lambda r: r["domain"],
                      *, pooled: bool = True) -> list[EquivalenceRate]:  # fmt: skip
    """Rates per ``key(row)`` (default: domain), sorted, plus an ``all`` group when ``pooled``."""
    groups: dict[str, Counter] = defaultdict(Counter)
    for row in rows:
        groups[key(row)][row["verdict"]] += 1
        if pooled:
            groups["all"][row["verdict"]] += 1
    out = []
    for name in sorted(groups, key=lambda g: (g == "all", g)):
        c = groups[name]
        n = sum(c.values())
        low, high = wilson_interval(c[YES], n)
        out.append(EquivalenceRate(name, n, c[YES], c[NO], c[UNPARSEABLE], c[GENERATION_ERROR], low, high))
    return out


# ------------------------------------------------------------------------------------------------ run


@dataclass
class ParaphraseResult:
    """What `run_paraphrase_check` did: judgments written now, the sample's judgments, rates, skips."""

    written: int
    rows: list[dict[str, Any]]
    rates: list[EquivalenceRate]
    skips: Skips
    section: Section
    report_html: Path | None


def run_paraphrase_check(
    run_dir: str | Path,
    config: ParaphraseCheckConfig,
    *,
    make_generator: Callable[[ModelConfig], Generator] | None = None,
    progress: bool = True,
    rerender: bool = True,
) -> ParaphraseResult:
    """Judge a seeded sample of the run's paraphrase chains, store the judgments and the section.

    Resumable: chains already judged under the same key are not asked again (generation errors are).
    ``make_generator`` builds the judge's backend (default `recovery.pipeline.backend.make_generator`).
    """
    skips = Skips()
    items = paraphrase_items(run_dir, config.interventions, skips=skips)
    sample = sample_per_domain(items, config.per_domain, config.seed) if items else []
    table = judgments_table(run_dir)
    table.clean_stale()
    keyed = [(judgment_key(item, config), item) for item in sample]
    done = {r["id"] for r in table.iter_rows(["id", "verdict"]) if r["verdict"] != GENERATION_ERROR}
    todo = [(k, item) for k, item in keyed if k not in done]
    written = 0
    if todo:
        if make_generator is None:
            from recovery.pipeline.backend import make_generator as default_factory

            def make_generator(model: ModelConfig) -> Generator:
                return default_factory(model, seed=config.seed)

        written = _judge(todo, config, make_generator(config.judge), progress, table)
    rows = _read_judgments(table, [k for k, _ in keyed])
    section = paraphrase_section(rows, config=config, n_available=Counter(i.domain for i in items), skips=skips)
    save_section(run_dir, NAME, section)
    html = store_in_run(run_dir, section, NAME) if rerender else None
    return ParaphraseResult(written, rows, equivalence_rates(rows), skips, section, html)


def _judge(todo: list[tuple[str, ParaphraseItem]], config: ParaphraseCheckConfig, generator: Generator,
           progress: bool, table: StoreTable) -> int:  # fmt: skip
    sampling = SamplingParams(n=1, temperature=config.temperature, top_p=1.0, top_k=None, seed=config.seed,
                              max_new_tokens=config.max_new_tokens)  # fmt: skip
    written = 0
    bar = tqdm(total=len(todo), desc=f"paraphrase judge [{config.judge.name}]", unit="chain", disable=not progress,
               dynamic_ncols=True)  # fmt: skip
    try:
        with table.writer(JUDGMENTS) as writer:
            for batch in batched(todo, config.flush_every):
                by_key = dict(batch)
                requests = [GenerationRequest(request_id=k, sampling=sampling, messages=judge_messages(item))
                            for k, item in batch]  # fmt: skip
                for result in generator.generate(requests):
                    item = by_key[result.request_id]
                    reply = n_tokens = finish = None
                    if result.error or not result.samples:
                        verdict, detail = GENERATION_ERROR, (result.error or "no samples returned")[:500]
                    else:
                        s = result.samples[0]
                        reply, n_tokens, finish = s.text, s.n_tokens, s.finish_reason
                        verdict, detail = parse_equivalence_reply(reply, finish_reason=finish)
                    writer.add({
                        "id": result.request_id, "chain_id": item.chain_id, "domain": item.domain,
                        "model": item.model, "intervention": item.intervention, "target_t": item.target_t,
                        "judge": config.judge.name, "verdict": verdict, "detail": detail, "reply": reply,
                        "n_tokens": n_tokens, "finish_reason": finish,
                    })  # fmt: skip
                    written += 1
                writer.flush()
                bar.update(len(batch))
    finally:
        bar.close()
        generator.close()
    return written


def _read_judgments(table: StoreTable, keys: Sequence[str]) -> list[dict[str, Any]]:
    wanted = set(keys)
    best: dict[str, dict[str, Any]] = {}
    for row in table.iter_rows():
        if row["id"] in wanted and (row["id"] not in best or best[row["id"]]["verdict"] == GENERATION_ERROR):
            best[row["id"]] = row
    return sorted(best.values(), key=lambda r: (r["domain"], r["chain_id"]))


# ------------------------------------------------------------------------------------------------ report


def _pct(value: float) -> str:
    return "–" if math.isnan(value) else f"{100 * value:.1f}"


def _rate_rows(rates: Sequence[EquivalenceRate], available: Mapping[str, int] | None = None) -> list[tuple]:
    out = []
    for r in rates:
        avail = (sum(available.values()) if r.group == "all" else available.get(r.group, 0)) if available else "–"
        out.append((r.group, avail, r.n, r.yes, r.no, r.unparseable, r.errors, _pct(r.rate),
                    f"[{_pct(r.ci_low)}, {_pct(r.ci_high)}]", _pct(r.rate_parsed)))  # fmt: skip
    return out


_RATE_COLUMNS = ["Chains available", "Judged", "Yes", "No", "Unparseable", "Gen. errors", "Equivalent (%)",
                 "95 % CI (%)", "Yes / (Yes + No) (%)"]  # fmt: skip


def paraphrase_section(rows: Sequence[Mapping[str, Any]], *, config: ParaphraseCheckConfig | None = None,
                       n_available: Mapping[str, int] | None = None, skips: Skips | None = None) -> Section:  # fmt: skip
    """The "Paraphrase quality" section: equivalence rate per domain (and per model), the paper's
    Table 14, chains that could not be checked and the judge's unreadable replies."""
    judge = config.judge.name if config else "the judge"
    per_domain = config.per_domain if config else "up to 100"
    prose = (
        f"An LLM judge ({judge}) saw the problem, the original reasoning prefix (the trace's steps up to the "
        "cut) and its paraphrase, and answered whether both contain logically equivalent reasoning steps "
        f"(paper App. D.4, Table 14; the prompt is ours, the paper does not print one). {per_domain} chains "
        "per domain were sampled (seeded). The rate counts Yes over every judged chain, so unparseable "
        "replies and generation errors count as not equivalent; the last column leaves them out."
    )
    if not rows:
        prose += "\n\n_No paraphrase chain was judged (none in this run, or none could be rebuilt)._"
    tables: list[Table] = [
        Table("Equivalence rate per domain", ["Domain", *_RATE_COLUMNS], _rate_rows(equivalence_rates(rows), n_available),
              align=["l", *["r"] * len(_RATE_COLUMNS)], caption="95 % Wilson intervals."),
    ]  # fmt: skip
    by_model = equivalence_rates(rows, key=lambda r: f"{r['domain']} / {r['model']}", pooled=False)
    if len({r["model"] for r in rows}) > 1:
        tables.append(Table("Per domain and model", ["Domain / model", *_RATE_COLUMNS[1:]],
                            [row[:1] + row[2:] for row in _rate_rows(by_model)],
                            align=["l", *["r"] * (len(_RATE_COLUMNS) - 1)]))  # fmt: skip
    tables.append(Table("The paper's Table 14 (GPT-5.1 judge, 100 traces per domain)", ["Domain", "Equivalent (%)"],
                        [(d.capitalize(), f"{100 * v:.0f}") for d, v in PAPER_TABLE14.items()], align=["l", "r"]))  # fmt: skip
    bad = [r for r in rows if r["verdict"] in (UNPARSEABLE, GENERATION_ERROR)]
    if bad:
        tables.append(Table("Replies not read as Yes or No", ["Chain", "Domain", "Verdict", "Detail"],
                            [(r["chain_id"], r["domain"], r["verdict"], r["detail"]) for r in bad[:50]],
                            caption=f"{len(bad)} in all (first 50 shown).", collapsed=True))  # fmt: skip
    if skips is not None and skips.total:
        tables.append(Table("Paraphrase chains that could not be checked", ["Reason", "Count", "Examples"],
                            [(r, c, "; ".join(skips.examples.get(r, []))) for r, c in sorted(skips.counts.items())]))  # fmt: skip
    return Section(SECTION_TITLE, prose, tables=tuple(tables))
