"""The benchmark's stages, each a function of a `StageContext` that reads and writes the run directory.

problems → traces → kept (filter) → chains (interventions) → continuations → grades → aggregates → report

Every generation stage skips what is already stored (resume), commits its output in shards of
``flush_every`` items (a kill loses at most one shard of work) and counts what it skipped, with reasons.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from tqdm.auto import tqdm

from recovery.backends.base import GenerationRequest, Generator, SamplingParams, batched
from recovery.ids import continuation_id, item_seed
from recovery.interventions.base import Message
from recovery.pipeline import records
from recovery.pipeline.between import make_between
from recovery.pipeline.config import ModelConfig, RunConfig
from recovery.pipeline.swap import continuation_model
from recovery.store import RunDir
from recovery.types import Problem, Trace

GeneratorFactory = Callable[[ModelConfig], Generator]

DEFAULT_PROMPT = "{question}\n\nPlease reason step by step, and put your final answer within \\boxed{}."


@dataclass
class StageContext:
    """What every stage needs: the config, the run directory, a backend factory and the skip counter."""

    config: RunConfig
    run: RunDir
    make_generator: GeneratorFactory
    progress: bool = True
    counts: Counter = field(default_factory=Counter)  # (stage, reason) → count, for the summary
    _generators: dict[str, Generator] = field(default_factory=dict)

    def generator(self, model: ModelConfig) -> Generator:
        """One backend per model, created on first use and reused by later stages."""
        if model.name not in self._generators:
            self._generators[model.name] = self.make_generator(model)
        return self._generators[model.name]

    def close(self) -> None:
        for gen in self._generators.values():
            try:
                gen.close()
            except Exception:  # noqa: BLE001 — closing must not hide the run's real outcome
                pass
        self._generators.clear()

    def bar(self, iterable: Iterable | None = None, **kw: Any) -> tqdm:
        """A progress bar over ``iterable`` (or a manual one with ``total=``), silent without progress."""
        return tqdm(iterable, disable=not self.progress, dynamic_ncols=True, **kw)


# --------------------------------------------------------------------------------------------- helpers


def user_prompt(config: RunConfig, problem: Problem) -> str:
    """The user turn for ``problem`` (see `DatasetConfig.prompt_template`)."""
    template = config.dataset.prompt_template
    if template is None:
        template = "{question}" if problem.domain == "toy" else DEFAULT_PROMPT
    return template.replace("{question}", problem.question)


def load_problems_table(run: RunDir) -> dict[str, Problem]:
    return {row["id"]: records.problem_from_row(row) for row in run.table("problems").iter_rows()}


def load_traces_table(run: RunDir, ids: set[str] | None = None) -> dict[str, Trace]:
    from recovery.segment import parse_trace

    traces = {}
    for row in run.table("traces").iter_rows(["id", "problem_id", "model", "text"]):
        if ids is None or row["id"] in ids:
            trace = parse_trace(row["problem_id"], row["model"], row["text"])
            traces[trace.id] = trace
    return traces


def _sampling(cfg, *, n: int | None = None, seed: int | None = None, model: ModelConfig | None = None) -> SamplingParams:
    """Sampling parameters from a `SamplingConfig`, with the model's own decoding exceptions applied."""

    def pick(name: str):
        override = getattr(model, name, None) if model is not None else None
        return getattr(cfg, name) if override is None else override

    return SamplingParams(
        n=n or cfg.n, temperature=pick("temperature"), top_p=pick("top_p"), top_k=pick("top_k"), seed=seed,
        max_new_tokens=cfg.max_new_tokens,
    )  # fmt: skip


def _request_seed(base: int, *key: Any) -> int:
    # 31 bits: every backend (torch, vLLM, OpenAI servers) accepts it.
    return item_seed(base, *key) & 0x7FFFFFFF


# -------------------------------------------------------------------------------------------- problems


def stage_problems(ctx: StageContext) -> int:
    """Load the dataset once; later runs reuse the stored table (so the problem set cannot drift)."""
    table = ctx.run.table("problems")
    if table.exists():
        return 0
    ds = ctx.config.dataset
    if ds.name == "toy" or ds.name.startswith("toy/"):
        from recovery.toy import ToyTaskConfig, generate_problems

        options = dict(ds.options)
        seed = int(options.pop("seed", 0))
        family = ds.name.partition("/")[2]
        if family:
            options["families"] = (family,)
        task_config = ToyTaskConfig(**options) if options else None
        problems = generate_problems(ds.limit or 50, seed=seed, config=task_config)
    else:
        from recovery.data import load_problems

        problems = load_problems(ds.name, path=ds.path, **ds.options)
        if ds.limit is not None:
            problems = problems[: ds.limit]
    with table.writer(records.PROBLEMS) as writer:
        writer.add_many(records.problem_row(p) for p in problems)
    return len(problems)


# ---------------------------------------------------------------------------------------------- traces


def stage_traces(ctx: StageContext) -> int:
    """Original traces: imported from a file, or generated by each model for each problem."""
    if ctx.config.traces.source == "import":
        return _import_traces(ctx)
    problems = load_problems_table(ctx.run)
    table = ctx.run.table("traces")
    done = {(r["model"], r["problem_id"]) for r in table.iter_rows(["model", "problem_id"])}
    sampling_cfg = ctx.config.traces.sampling
    written = 0
    with table.writer(records.TRACES) as writer:
        for model in ctx.config.models:
            todo = [p for pid, p in sorted(problems.items()) if (model.name, pid) not in done]
            if not todo:
                continue
            generator = ctx.generator(model)
            think_open = getattr(getattr(generator, "spec", None), "think_open", "<think>")
            bar = ctx.bar(total=len(todo), desc=f"traces [{model.name}]", unit="problem") if ctx.progress else None
            for batch in batched(todo, ctx.config.flush_every):
                requests = [
                    GenerationRequest(
                        request_id=p.id,
                        sampling=_sampling(sampling_cfg, n=1, seed=_request_seed(sampling_cfg.seed, "trace", model.name, p.id),
                                           model=model),
                        messages=(Message("user", user_prompt(ctx.config, p)),),
                    )
                    for p in batch
                ]
                by_id = {p.id: p for p in batch}
                for result in generator.generate(requests):
                    if result.error or not result.samples:
                        ctx.counts[("traces", "generation_error")] += 1
                        continue
                    sample = result.samples[0]
                    # The backend opened the think block (template or prefill); store the full response.
                    text = sample.text if think_open in sample.text[: len(think_open) + 8] else think_open + sample.text
                    trace = _parse(by_id[result.request_id].id, model.name, text, ctx)
                    if trace is None:
                        continue
                    writer.add(records.trace_row(trace, sample.n_tokens, sample.finish_reason))
                    written += 1
                writer.flush()
                if bar is not None:
                    bar.update(len(batch))
            if bar is not None:
                bar.close()
    return written


def _parse(problem_id: str, model: str, text: str, ctx: StageContext) -> Trace | None:
    from recovery.segment import SegmentationError, parse_trace

    try:
        return parse_trace(problem_id, model, text)
    except SegmentationError:
        ctx.counts[("traces", "no_think_tag")] += 1
        return None


def _import_traces(ctx: StageContext) -> int:
    from recovery.data.traces import TraceFields, import_traces

    table = ctx.run.table("traces")
    if table.exists():
        return 0
    cfg = ctx.config.traces
    problems = load_problems_table(ctx.run)
    options = dict(cfg.fields)
    strip_prompt = bool(options.pop("strip_prompt", True))
    id_prefix = str(options.pop("id_prefix", ""))
    # "model_name" names the generating model for every row; "model" would be the column holding it.
    model = options.pop("model_name", None) or (ctx.config.models[0].name if len(ctx.config.models) == 1 else None)
    if "metadata" in options:
        options["metadata"] = tuple(options["metadata"])
    imported = import_traces(
        cfg.path, fields=TraceFields(**options), model=model, strip_prompt=strip_prompt,
        problems=problems or None, id_prefix=id_prefix,
    )  # fmt: skip
    for reason, count in imported.skips.counts.items():
        ctx.counts[("traces", reason)] += count
    if not problems:
        with ctx.run.table("problems").writer(records.PROBLEMS) as writer:
            writer.add_many(records.problem_row(p) for p in imported.problems)
    with table.writer(records.TRACES) as writer:
        writer.add_many(records.trace_row(t) for t in imported.traces)
    return len(imported.traces)


# ---------------------------------------------------------------------------------------------- filter


def stage_filter(ctx: StageContext, grader) -> int:
    """Decide which original traces enter the benchmark (paper §3.2); record the reason for each drop."""
    from recovery.data.filters import drop_longest, filter_closed, filter_correct, keep_solved_by_all

    table = ctx.run.table("kept")
    if table.exists():
        return 0
    problems = load_problems_table(ctx.run)
    traces = load_traces_table(ctx.run)
    pairs = [(problems[t.problem_id], t) for t in traces.values() if t.problem_id in problems]
    cfg = ctx.config.traces.filters
    reasons: dict[str, str] = {}

    def step(current: list, result, reason: str) -> list:
        """Apply one filter's result, remembering why each dropped trace left."""
        kept_ids = {trace.id for _, trace in result.kept}
        for _, trace in current:
            if trace.id not in kept_ids:
                reasons[trace.id] = reason
        return list(result.kept)

    current = pairs
    if cfg.require_closed:
        current = step(current, filter_closed(current), "no_closing_think_tag")
    # Correctness is measured for every closed trace — it is the model's clean accuracy — and filtered on
    # only if asked.
    clean = filter_correct(current, grader=grader)
    correct_ids = {trace.id for _, trace in clean.kept}
    if cfg.require_correct:
        current = step(current, clean, "not_correct")
    if cfg.drop_longest_fraction > 0:
        current = step(current, drop_longest(current, cfg.drop_longest_fraction), "longest_fraction")
    if cfg.intersect_models and len(ctx.config.models) > 1:
        current = step(current, keep_solved_by_all(current, [m.name for m in ctx.config.models]), "not_solved_by_all")
    kept_ids = {trace.id for _, trace in current}
    rows = []
    for problem, trace in pairs:
        kept = trace.id in kept_ids
        reason = "kept" if kept else reasons.get(trace.id, "dropped")
        if not kept:
            ctx.counts[("filter", reason)] += 1
        rows.append({"id": trace.id, "model": trace.model, "problem_id": problem.id, "kept": kept, "reason": reason})
    with table.writer(records.KEPT) as writer:
        writer.add_many(rows)
    _write_clean_accuracy(ctx, pairs, correct_ids)
    return len(kept_ids)


def _write_clean_accuracy(ctx: StageContext, pairs, correct_ids: set[str]) -> None:
    from recovery.store import atomic_write_text

    per_model: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for problem, trace in pairs:
        cell = per_model[(trace.model, problem.domain)]
        cell[0] += 1
        cell[1] += trace.id in correct_ids
    rows = [
        {"model": m, "domain": d, "n": n, "accuracy": (c / n if n else float("nan"))}
        for (m, d), (n, c) in sorted(per_model.items())
    ]
    atomic_write_text(ctx.run.file("clean_accuracy.json"), json.dumps(rows, indent=2))


# ---------------------------------------------------------------------------------------------- chains


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
    from recovery.backends.base import ChatTextGenerator
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
        text_generator = ChatTextGenerator(ctx.make_generator(cfg.llm))
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
                            problem, trace, instance, t, seed=cfg.seed, generator=text_generator,
                            min_steps=cfg.min_steps, append_wait=cfg.append_wait, repeats=cfg.repeats, steps=steps,
                            between=between,
                        )  # fmt: skip
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
        for trace in ctx.run.table("traces").iter_rows(["id", "problem_id", "model", "text"]):
            if trace["id"] not in kept:
                continue
            todo = [(name, t) for name in cfg.names for t in cfg.timesteps]
            if done:
                todo = [(name, t) for name, t in todo
                        if (key := records.chain_key(trace["id"], name, t)) not in done
                        and records.skip_row("chains", key, "")["id"] not in done]  # fmt: skip
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
        return chain_workers.run_chunks(chain_workers.chunks_of(ctx.run, pending_traces(), problems), ctx.config, on_done)
    finally:
        if bar is not None:
            bar.close()


def _skip(ctx: StageContext, writer, stage: str, item: str, reason: str, detail: str) -> None:
    ctx.counts[(stage, reason)] += 1
    writer.add(records.skip_row(stage, item, reason, detail))


# ------------------------------------------------------------------------------------------ continuations


def stage_continuations(ctx: StageContext, window: int = 4096) -> int:
    """Sample N continuations per chain. Chains of one trace are scheduled together (shared prefixes hit
    the prefix cache); a chain's N samples are committed together, so a chain is never half-done.

    The chains table is streamed (``window`` rows at a time, one model at a time), so memory does not grow
    with the number of chains.
    """
    chains_table = ctx.run.table("chains")
    table = ctx.run.table("continuations")
    done = table.keys("chain_id")
    problems = load_problems_table(ctx.run)
    models = {m.name: m for m in ctx.config.models}
    pending: Counter = Counter()
    for batch in chains_table.iter_batches(["id", "model"]):
        for chain_id, model in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
            if chain_id not in done:
                pending[model] += 1
    for model_name in sorted(set(pending) - set(models)):
        ctx.counts[("continuations", "unknown_model")] += pending.pop(model_name)
    cols = ["id", "trace_id", "problem_id", "model", "cut_index", "intervention", "prefix"]
    written = 0
    with table.writer(records.CONTINUATIONS) as writer:
        for model_name in sorted(pending):
            # With swap_to (Table 9) another model continues this model's chains and is recorded as such.
            continuing = continuation_model(ctx.config, model_name)
            generator = ctx.generator(continuing)
            bar = ctx.bar(total=pending[model_name], desc=f"continuations [{model_name}]", unit="chain") if ctx.progress else None
            for rows in _windows(chains_table, cols, model_name, done, window):
                for batch in batched(rows, ctx.config.flush_every):
                    requests = [
                        continuation_request(ctx.config, problems[r["problem_id"]], r, continuing) for r in batch
                    ]
                    problem_of = {r["id"]: r["problem_id"] for r in batch}
                    columns = _continuation_columns()
                    for result in generator.generate(requests):
                        written += _add_samples(ctx, columns, result, continuing.name, problem_of[result.request_id])
                    writer.add_columns(columns)
                    writer.flush()
                    if bar is not None:
                        bar.update(len(batch))
            if bar is not None:
                bar.close()
    return written


def _windows(chains_table, cols: list[str], model: str, done, window: int) -> Iterator[list[dict]]:
    """Not-yet-continued chains of ``model`` in stored order, ``window`` at a time, each window sorted by
    `continuation_order` (the chains stage writes a trace's chains together, so they stay together)."""
    buffer: list[dict] = []
    for batch in chains_table.iter_batches(cols, batch_size=window):
        for row in batch.to_pylist():
            if row["model"] == model and row["id"] not in done:
                buffer.append(row)
        if len(buffer) >= window:
            # Keep the last trace's chains for the next window so a trace is never split.
            last = buffer[-1]["trace_id"]
            head = [r for r in buffer if r["trace_id"] != last]
            buffer = [r for r in buffer if r["trace_id"] == last]
            if head:
                yield sorted(head, key=continuation_order)
    if buffer:
        yield sorted(buffer, key=continuation_order)


def _continuation_columns() -> dict[str, list]:
    """Empty column lists for a batch of continuation rows (built column-wise: millions of rows)."""
    return {name: [] for name in records.CONTINUATIONS.names}


def _add_samples(ctx: StageContext, columns: dict[str, list], result, model_name: str, problem_id: str) -> int:
    """Add one chain's N samples (all or none) to ``columns``; returns 1 if added, 0 on a generation error.

    The caller commits a whole batch at once, so a chain's samples always land in the same shard.
    """
    if result.error or not result.samples:
        # Not marked done: a transient failure (server down) is retried by the next run.
        ctx.counts[("continuations", "generation_error")] += 1
        return 0
    chain_id = result.request_id
    for index, sample in enumerate(result.samples):
        if not sample.text.strip():
            ctx.counts[("continuations", "empty_generation")] += 1
        columns["id"].append(continuation_id(chain_id, index))
        columns["chain_id"].append(chain_id)
        columns["problem_id"].append(problem_id)
        columns["sample_index"].append(index)
        columns["model"].append(model_name)
        columns["text"].append(sample.text)
        columns["n_tokens"].append(sample.n_tokens)
        columns["finish_reason"].append(sample.finish_reason)
        columns["prompt_tokens"].append(result.prompt_tokens)
        columns["prefilled_tokens"].append(result.prefilled_tokens)
    return 1


def continuation_request(
    config: RunConfig, problem: Problem, chain_row: dict, model: ModelConfig | None = None
) -> GenerationRequest:
    """The request that samples N continuations of one intervened chain: the problem's chat prompt with
    the intervened reasoning as the assistant prefill, seeded per chain (not per batch)."""
    cfg = config.continuation
    return GenerationRequest(
        request_id=chain_row["id"],
        sampling=_sampling(cfg, seed=_request_seed(cfg.seed, "continuation", chain_row["id"]), model=model),
        messages=(Message("user", user_prompt(config, problem)),),
        prefill=chain_row["prefix"],
    )


def continuation_order(row: dict) -> tuple:
    """Scheduling key for continuation requests: one model at a time, the chains of one trace together,
    shortest cut first. Consecutive requests then share the longest common prompt prefixes (the chat
    prompt and the original steps before the cut), which a prefix cache (vLLM) reuses."""
    return (row["model"], row["trace_id"], row["cut_index"], row["intervention"], row["id"])


# ----------------------------------------------------------------------------------------------- grades


def stage_grades(ctx: StageContext, grader, batch_size: int = 16384, cache_size: int = 200_000) -> int:
    """Grade every continuation not yet graded. A continuation whose reasoning never closed has no final
    answer: it is graded ``no_answer`` rather than scored on an intermediate number.

    Verdicts are cached by (text after the reasoning, problem): samples often end identically, and the
    verdict depends on nothing else. Rows are read and written column-wise (millions of them).
    """
    from recovery.types import Grade, Verdict

    judge = _judge(ctx)
    if judge is None:
        return _rule_graded_chunks(ctx, grader, batch_size)
    table = ctx.run.table("grades")
    done = table.keys("id")
    problems = load_problems_table(ctx.run)
    unclosed = Grade(Verdict.NO_ANSWER, None, "reasoning never closed")
    primary = ctx.config.grading.primary
    disagreements = ctx.run.table("judge_disagreements")
    cache: dict[tuple[str, str], Grade] = {}
    written = 0
    total = ctx.run.table("continuations").count()
    with table.writer(records.GRADES, rows_per_shard=max(batch_size, 50_000)) as writer:
        bar = ctx.bar(total=total, desc="grading", unit="continuation") if ctx.progress else None
        cols = ["id", "chain_id", "problem_id", "text"]
        for batch in ctx.run.table("continuations").iter_batches(cols, batch_size=batch_size):
            ids, chain_ids, problem_ids, texts = (batch.column(i).to_pylist() for i in range(4))
            finished = done.contains_many(ids)
            keep = [i for i in range(len(ids)) if not finished[i]]
            grades: list[Grade | None] = []
            misses: dict[tuple[str, str], list[int]] = {}
            for i in keep:
                key = grading_key(texts[i] or "", problem_ids[i])
                if key is None:
                    grades.append(unclosed)
                    ctx.counts[("grades", "unclosed_reasoning")] += 1
                    continue
                hit = cache.get(key)
                if hit is None:
                    misses.setdefault(key, []).append(len(grades))
                grades.append(hit)
            if misses:
                keys = list(misses)
                for key, grade in zip(keys, grader.grade_many([(k[0], problems[k[1]]) for k in keys])):
                    for slot in misses[key]:
                        grades[slot] = grade
                    if len(cache) < cache_size:
                        cache[key] = grade
            judged: list[Grade | None] = [None] * len(keep)
            if judge is not None:
                judged = [None if g is unclosed else judge(problems[problem_ids[i]], texts[i] or "")
                          for i, g in zip(keep, grades)]  # fmt: skip
                _log_disagreements(ctx, disagreements, [(ids[i], chain_ids[i], g, j) for i, g, j in zip(keep, grades, judged)])
            writer.add_columns(grade_columns([ids[i] for i in keep], [chain_ids[i] for i in keep], grades, judged, primary))
            written += len(keep)
            writer.flush()
            if bar is not None:
                bar.update(batch.num_rows)
        if bar is not None:
            bar.close()
    return written


def _rule_graded_chunks(ctx: StageContext, grader, chunk_rows: int) -> int:
    """`stage_grades` without an LLM judge: chunks of continuations graded in worker processes (the
    caller's ``grader`` serves when there is one worker)."""
    from recovery.parallel import map_chunks
    from recovery.pipeline import grade_workers
    from recovery.pipeline.chain_workers import cpu_workers

    done = ctx.run.table("grades").keys("id")
    source = ctx.run.table("continuations")
    problem_rows = {r["id"]: r for r in ctx.run.table("problems").iter_rows()}
    workers = cpu_workers(ctx.config)
    bar = ctx.bar(total=source.count(), desc="grading", unit="continuation") if ctx.progress else None
    sizes: list[int] = []

    def chunks():
        index = 0
        for batch in source.iter_batches(["id", "chain_id", "problem_id", "text"], batch_size=chunk_rows):
            columns = [batch.column(i).to_pylist() for i in range(4)]
            sizes.append(batch.num_rows)
            if done:
                keep = ~done.contains_many(columns[0])
                columns = [[v for v, k in zip(col, keep) if k] for col in columns]
            if columns[0]:
                yield grade_workers.GradeChunk(index, str(ctx.run.path), *columns)
                index += 1
            elif bar is not None:
                bar.update(sizes.pop())

    written = 0
    initargs = (ctx.config, problem_rows, grader if workers <= 1 else None)
    try:
        for count, reasons in map_chunks(
            grade_workers.grade_chunk, chunks(), workers=workers, initializer=grade_workers.init_worker, initargs=initargs
        ):
            written += count
            for reason, n in reasons.items():
                ctx.counts[("grades", reason)] += n
            if bar is not None:
                bar.update(sizes.pop(0))
    finally:
        grade_workers.close_worker()
        if bar is not None:
            bar.close()
    return written


def grading_key(text: str, problem_id: str) -> tuple[str, str] | None:
    """(answer part, problem) — what a verdict depends on — or None when the reasoning never closed.

    Continuations start inside the reasoning, so they normally hold a closing tag and no opening one;
    that common case is cut directly, anything else goes through `answer_part`'s full tag rules.
    """
    from recovery.grading import answer_part

    if "<think>" not in text and "<thought>" not in text:
        for close in ("</think>", "</thought>"):
            end = text.find(close)
            if end >= 0:
                return text[end + len(close) :], problem_id
        return None
    if "</think>" not in text and "</thought>" not in text:
        return None
    return answer_part(text), problem_id


def grade_columns(ids: list[str], chain_ids: list[str], grades, judged, primary: str) -> dict[str, list]:
    """`records.grade_row` for many continuations at once, column-wise."""
    columns: dict[str, list] = {name: [] for name in records.GRADES.names}
    columns["id"], columns["chain_id"] = ids, chain_ids
    for g, j in zip(grades, judged):
        chosen = j if (primary == "judge" and j is not None) else g
        columns["verdict"].append(chosen.verdict.value)
        columns["extracted"].append(g.extracted)
        columns["detail"].append(chosen.detail[:500])
        columns["rule_verdict"].append(g.verdict.value)
        columns["judge_verdict"].append(None if j is None else j.verdict.value)
    return columns


def _judge(ctx: StageContext):
    """The LLM judge of ``grading.judge`` (None when not configured)."""
    if ctx.config.grading.judge is None:
        return None
    from recovery.backends.base import ChatTextGenerator
    from recovery.grading.judge import LLMJudge

    return LLMJudge(ChatTextGenerator(ctx.generator(ctx.config.grading.judge)))


def _log_disagreements(ctx: StageContext, table, items) -> None:
    """Record every continuation where the rule-based grader and the judge disagree (and count them)."""
    rows = []
    for cid, chain_id, rule, judged in items:
        if judged is None or judged.correct == rule.correct:
            continue
        ctx.counts[("grades", "judge_disagrees")] += 1
        rows.append({"id": cid, "chain_id": chain_id, "rule_verdict": str(rule.verdict), "rule_detail": rule.detail[:300],
                     "judge_verdict": str(judged.verdict), "judge_detail": judged.detail[:300]})  # fmt: skip
    if rows:
        with table.writer(records.DISAGREEMENTS, writer_id="judge") as writer:
            writer.add_many(rows)
