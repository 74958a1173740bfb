"""The chains stage: every intervention at every timestep of every kept trace.

Rule-based interventions run in worker processes (`recovery.pipeline.chain_workers`); LLM-backed ones,
and consecutive interventions with model-written paragraphs in between, run here with the backends.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from recovery.pipeline import records
from recovery.pipeline.between import make_between
from recovery.pipeline.context import StageContext, load_problems_table, load_traces_table
from recovery.run_config import RunConfig


def intervention_instances(config: RunConfig) -> dict[str, Any]:
    """The configured interventions, built (name → instance); unknown names fail before any work."""
    from recovery.interventions import WikipediaPool, create, get_spec

    cfg = config.interventions
    if any(name.startswith("toy/") for name in cfg.names):
        import recovery.toy  # noqa: F401 — registers the toy interventions
    instances = {}
    for name in cfg.names:
        options = dict(cfg.options.get(name, {}))
        if name == "wikipedia_text" and "pool" not in options:
            if not cfg.wikipedia_pool:
                raise ValueError("wikipedia_text needs interventions.wikipedia_pool (a paragraphs file)")
            options["pool"] = WikipediaPool.from_path(cfg.wikipedia_pool)
        get_spec(name)  # clear error for unknown names before any work
        instances[name] = create(name, **options)
    return instances


def stage_chains(ctx: StageContext) -> int:
    """Apply every intervention at every timestep to every kept trace (skips counted, never retried)."""
    from recovery.generation import ChatTextGenerator
    from recovery.interventions import InterventionFailed, intervene
    from recovery.segment import TooFewSteps, split_steps

    cfg = ctx.config.interventions
    instances = intervention_instances(ctx.config)
    needs_llm = any(getattr(i, "needs_generator", False) for i in instances.values())
    if not needs_llm and not (cfg.between == "model" and cfg.repeats > 1):
        return _rule_based_chains(ctx)  # pure string work: spread over worker processes
    text_generator = None
    if needs_llm:
        if cfg.llm is None:
            raise ValueError("LLM-backed interventions need interventions.llm (a model config)")
        text_generator = ChatTextGenerator(ctx.generator(cfg.llm))  # closed with the run's other backends
    kept = {r["id"] for r in ctx.run.table("kept").iter_rows(["id", "kept"]) if r["kept"]}
    problems = load_problems_table(ctx.run)
    traces = load_traces_table(ctx.run, kept)
    chains, skips = ctx.run.table("chains"), ctx.run.table("skips")
    done = chains.keys("key").union(skips.keys("id"))
    written = 0
    with chains.writer(records.CHAINS) as chain_writer, skips.writer(records.SKIPS) as skip_writer:
        for trace in ctx.bar(sorted(traces.values(), key=lambda t: t.id), desc="interventions", unit="trace"):
            steps = split_steps(trace.reasoning)
            problem = problems[trace.problem_id]
            between = make_between(ctx, problem, trace)  # None: the original next step (repeats ablation)
            for name, instance in instances.items():
                for t in cfg.timesteps:
                    key = records.chain_key(trace.id, name, t)
                    if done and (key in done or records.skip_row("chains", key, "")["id"] in done):
                        continue
                    try:
                        chain = intervene(
                            problem,
                            trace,
                            instance,
                            t,
                            seed=cfg.seed,
                            generator=text_generator,
                            min_steps=cfg.min_steps,
                            append_wait=cfg.append_wait,
                            repeats=cfg.repeats,
                            steps=steps,
                            between=between,
                        )
                    except TooFewSteps as err:
                        _skip(ctx, skip_writer, "chains", key, "too_few_steps", str(err))
                        continue
                    except InterventionFailed as err:
                        _skip(ctx, skip_writer, "chains", key, err.reason, str(err))
                        continue
                    chain_writer.add(records.chain_row(chain))
                    written += 1
            if written and written % ctx.config.flush_every == 0:
                chain_writer.flush()
                skip_writer.flush()
    return written


def _rule_based_chains(ctx: StageContext) -> int:
    """`stage_chains` when no intervention needs a model: chunks of traces in worker processes.

    Traces are streamed in stored order (never all held at once: the paper's scale is ~325k traces of
    ~6k characters), each with the (intervention, t) pairs it still lacks.
    """
    from recovery.pipeline import chain_workers

    cfg = ctx.config.interventions
    kept = {r["id"] for r in ctx.run.table("kept").iter_rows(["id", "kept"]) if r["kept"]}
    problems = {r["id"]: r for r in ctx.run.table("problems").iter_rows()}
    chains, skips = ctx.run.table("chains"), ctx.run.table("skips")
    done = chains.keys("key").union(skips.keys("id"))

    def pending_traces():
        # Read a chunk's worth at a time: the workers start on the first chunk, not after the first 8k traces.
        columns = ["id", "problem_id", "model", "text"]
        for trace in ctx.run.table("traces").iter_rows(columns, batch_size=chain_workers.CHUNK_TRACES):
            if trace["id"] not in kept:
                continue
            todo = [(name, t) for name in cfg.names for t in cfg.timesteps]
            if done:
                todo = [
                    (name, t)
                    for name, t in todo
                    if (key := records.chain_key(trace["id"], name, t)) not in done
                    and records.skip_row("chains", key, "")["id"] not in done
                ]
            if todo:
                yield trace, tuple(todo)
            elif bar is not None:
                bar.update(1)

    bar = ctx.bar(total=len(kept), desc="interventions", unit="trace") if ctx.progress else None

    def on_done(n_traces: int, reasons: Counter) -> None:
        for reason, count in reasons.items():
            ctx.counts[("chains", reason)] += count
        if bar is not None:
            bar.update(n_traces)

    try:
        return chain_workers.run_chunks(
            chain_workers.chunks_of(ctx.run, pending_traces(), problems), ctx.config, on_done
        )
    finally:
        if bar is not None:
            bar.close()


def _skip(ctx: StageContext, writer, stage: str, item: str, reason: str, detail: str) -> None:
    ctx.counts[(stage, reason)] += 1
    writer.add(records.skip_row(stage, item, reason, detail))
