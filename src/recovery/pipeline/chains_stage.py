"""The chains stage: every intervention at every timestep of every kept trace.

Both paths run the one intervention loop (`recovery.interventions.intervene_traces`) with the run's
`ChainSettings` (`chain_settings`). Rule-based interventions run in worker processes
(`recovery.pipeline.chain_workers`); LLM-backed ones, and consecutive interventions with model-written
paragraphs in between, run here with the backends.

Under ``protocol: reference`` (part "interventions") the paper's seven are the authors' versions
(`recovery.interventions.reference`), and every trace gets its *batch position* (`batch_positions`): the
authors seed random characters, pick Wikipedia paragraphs and Unrelated-CoT topics by an item's index in
its batch of ``reference()["batch_size"]`` traces, so those repeat every batch. The default protocol keeps
its per-item seeds and passes no position.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

from recovery.generation import ChatTextGenerator, TextGenerator
from recovery.interventions import (
    ChainSettings,
    FailureReason,
    Produced,
    Skip,
    TextRules,
    TraceJob,
    get_spec,
    intervene_traces,
)
from recovery.interventions.reference_text import batch_positions, reasoning_of
from recovery.pipeline import chain_workers
from recovery.pipeline.between import BETWEEN_MODEL, make_between
from recovery.pipeline.context import Stage, StageContext
from recovery.pipeline.executors import Executor, InProcesses, InThreads, StageWork, run_work
from recovery.pipeline.stage_log import StageLog
from recovery.plan import RunPlan
from recovery.run_config import InterventionsConfig
from recovery.run_dir import records


def chain_settings(plan: RunPlan, generator: TextGenerator | None = None) -> ChainSettings:
    """The run's `ChainSettings`: ``interventions.names`` built with their ``options`` under the plan's text rules
    (`recovery.interventions.TextRules`), one that reads a paragraph pool given the ``pool`` of its options, else
    ``interventions.wikipedia_pool`` (read as those rules read a pool: the authors' `ReferencePool` under theirs),
    at the run's timesteps, seed, minimum steps, append-Wait and repeats. Setup mistakes fail here, before any
    work."""
    cfg = plan.config.interventions
    options = {}
    for name in cfg.names:
        own = dict(cfg.options.get(name, {}))
        if get_spec(name).needs_pool:
            own["pool"] = own.get("pool") or cfg.wikipedia_pool
            if not own["pool"]:
                raise ValueError(f"{name} needs interventions.wikipedia_pool (a paragraphs file)")
        options[name] = own
    return ChainSettings.from_config(cfg, options, style=plan.interventions, generator=generator)


def stage_chains(ctx: StageContext) -> int:
    """Apply every intervention at every timestep to every kept trace (skips counted, never retried).

    The work is declared once (`chain_work`): what is pending is read one way for both executors; rule-based
    interventions are pure string work and run in worker processes, an intervention that calls a model runs
    in threads, as many in flight as the model's backend takes.
    """
    cfg = ctx.config.interventions
    needs_llm = any(get_spec(name).needs_generator for name in cfg.names)
    between_model = cfg.between == BETWEEN_MODEL and cfg.repeats > 1
    if not needs_llm and not between_model:
        settings = chain_settings(ctx.plan)
        executor: Executor = InProcesses(
            chain_workers.cpu_workers(ctx.config),
            chain_workers.init_worker,
            (settings, ctx.run.think_tags, ctx.plan.reading),
            chain_workers.WORKER_MODULES,
        )
        return run_work(_chunk_work(ctx, PendingChains(ctx)), executor)
    text_generator = None
    if needs_llm:
        if cfg.llm is None:
            raise ValueError("LLM-backed interventions need interventions.llm (a model config)")
        text_generator = ChatTextGenerator(ctx.generator(cfg.llm))  # closed with the run's other backends
    settings = chain_settings(ctx.plan, text_generator)
    # On the Ray executor several traces are intervened on at once (one request each in flight per
    # replica); outcomes come back in trace order, so the tables hold the same rows in the same order.
    models = ([cfg.llm] if needs_llm else []) + (list(ctx.config.models) if between_model else [])
    return run_work(_trace_work(ctx, PendingChains(ctx), settings), InThreads(ctx.concurrency(models)))


class PendingChains:
    """What the chains stage still has to do, read once: the kept traces' (intervention, t) pairs with neither
    a stored chain nor a stored skip, the problems, and each trace's batch position under ``protocol:
    reference``. Traces are streamed in stored order, a chunk's worth at a time."""

    COLUMNS = ["id", "problem_id", "model", "text"]

    def __init__(self, ctx: StageContext) -> None:
        self.ctx = ctx
        self.kept = ctx.run.kept_ids()
        self.problem_rows = {r["id"]: r for r in ctx.run.problem_rows()}
        self.done = ctx.run.tables.chains.keys("key").union(ctx.run.tables.skips.keys("id"))
        stored = (r for r in ctx.run.trace_rows(self.COLUMNS) if r["id"] in self.kept)
        self.positions = positions_of(
            ctx.plan.interventions,
            ctx.config.interventions.min_steps,
            ((r["id"], r["model"], r["problem_id"], r["text"]) for r in stored),
            self.problem_rows,
        )

    def traces(self, on_finished: Callable[[], None] = lambda: None) -> Iterator[tuple[dict, tuple]]:
        """(trace row, pairs still to do) of every kept trace with something to do, in stored order;
        ``on_finished()`` for each kept trace with nothing left."""
        cfg = self.ctx.config.interventions
        for trace in self.ctx.run.trace_rows(self.COLUMNS, batch_size=chain_workers.CHUNK_TRACES):
            if trace["id"] not in self.kept:
                continue
            if todo := pending(cfg, trace["id"], self.done):
                yield trace, tuple(todo)
            else:
                on_finished()


def _chunk_work(ctx: StageContext, todo: PendingChains) -> StageWork:
    """Chunks of traces, each intervened on and committed (chains shard, then skips shard) by a worker."""
    bar = ctx.bar(total=len(todo.kept), desc="interventions", unit="trace")  # silent without progress

    def commit(result: tuple[int, int, Counter]) -> int:
        n_traces, written, reasons = result
        for reason, count in reasons.items():
            ctx.log.count("chains", reason, count)
        bar.update(n_traces)
        return written

    traces = todo.traces(on_finished=lambda: bar.update(1))
    return StageWork(
        batches=chain_workers.chunks_of(ctx.run, traces, todo.problem_rows, todo.positions),
        work=chain_workers.run_chunk,
        commit=commit,
        done=bar.close,
    )


def _trace_work(ctx: StageContext, todo: PendingChains, settings: ChainSettings) -> StageWork:
    """One trace at a time (its model calls made in the executor's thread), its outcomes written here; a
    shard is committed every ``flush_every`` chains."""
    rows = sorted(todo.traces(), key=lambda item: item[0]["id"])

    def jobs() -> Iterator[TraceJob]:
        for trace_row, pairs in ctx.bar(rows, desc="interventions", unit="trace"):
            problem = records.problem_from_row(todo.problem_rows[trace_row["problem_id"]])
            trace = ctx.run.parse_trace(trace_row)
            # None: the original next step (the repeats ablation), else the trace's own model writes it.
            between = make_between(ctx, problem, trace)
            position = todo.positions.get(trace.id) if todo.positions else None
            yield TraceJob(problem, trace, pairs, between, position)

    chain_writer = ctx.run.tables.chains.writer(records.CHAINS)
    skip_writer = ctx.run.tables.skips.writer(records.SKIPS)
    written = 0

    def commit(outcomes: list[Produced | Skip]) -> int:
        nonlocal written
        count = 0
        for outcome in outcomes:
            _count_request(ctx.log, outcome)
            if isinstance(outcome, Produced):
                chain_writer.add(records.chain_row(outcome.chain))
                written, count = written + 1, count + 1
                if written % ctx.config.flush_every == 0:
                    chain_writer.flush()
                    skip_writer.flush()
            else:
                ctx.log.count("chains", outcome.reason)
                skip_writer.add(chain_workers.skip_row(outcome))
        return count

    def done() -> None:  # on errors too: buffered rows are finished work
        skip_writer.flush()
        chain_writer.flush()

    return StageWork(
        batches=jobs(),
        work=lambda job: list(intervene_traces([job], settings)),
        commit=commit,
        done=done,
    )


def _count_request(log: StageLog, outcome: Produced | Skip) -> None:
    """Count an LLM-backed intervention's request in ``log``: failed (the generator's reason verbatim) when
    the intervention could not get a reply, else answered."""
    name = outcome.chain.intervention if isinstance(outcome, Produced) else outcome.intervention
    if not get_spec(name).needs_generator:
        return
    if isinstance(outcome, Skip) and outcome.reason == FailureReason.GENERATOR_ERROR:
        # The skip's message is "generator_error: <the generator's error>"; the line shows the error.
        log.requests.failed_one("chains", outcome.message.removeprefix(f"{outcome.reason}: "))
    else:
        log.requests.sent_one("chains")


def positions_of(rules: TextRules, min_steps: int, kept_traces, problem_order) -> dict[str, int] | None:
    """Each kept trace's batch position when the interventions' ``rules`` draw by position in a batch (the
    authors'), else None (per-item seeds).

    ``kept_traces`` are (id, model, problem id, response text); ``problem_order`` iterates the problem ids
    in problems-table order. Steps are counted in the reasoning as the authors extract it; a trace with fewer
    than ``min_steps`` takes no position (`batch_positions`).
    """
    if rules.batch_size is None:
        return None
    order = {problem_id: index for index, problem_id in enumerate(problem_order)}
    counted = ((tid, model, pid, reasoning_of(text).count("\n\n") + 1) for tid, model, pid, text in kept_traces)
    return batch_positions(counted, order, batch_size=rules.batch_size, min_steps=min_steps)


def pending(cfg: InterventionsConfig, trace_id: str, done: set[str]) -> list[tuple[str, float]]:
    """The (intervention, t) pairs of ``trace_id`` with neither a stored chain nor a stored skip."""
    todo = [(name, t) for name in cfg.names for t in cfg.timesteps]
    if not done:
        return todo
    return [
        (name, t)
        for name, t in todo
        if (key := records.chain_key(trace_id, name, t)) not in done
        and records.skip_row("chains", key, "")["id"] not in done
    ]


STAGE = Stage("chains", stage_chains, "intervened chains: every kept trace × intervention × timestep")
