"""Turn (problem, trace, intervention, t, seed, options) into an `Intervened` prefix, one item or many.

Randomness: every item draws from ``item_rng(seed, trace.id, intervention name, t)`` (round r ≥ 1 of k
consecutive interventions adds ``r`` to the key), so the same (seed, item, intervention, t) gives the same
bytes whatever the batch size or order.

Field semantics (see also `recovery.types.Intervened`):

- ``prefix`` = the edited steps joined with the step separator (``"\\n\\n"``); it ends with the last step,
  not with a separator. With ``append_wait`` it ends with the separator and ``wait_text``, so the model
  continues after ``"\\n\\nWait"`` (paper §5).
- ``inserted_text`` = the intervention's added text: the new/replacement step, the inserted random
  characters only (in order of appearance), or the whole rewritten prefix for paraphrase. With k
  consecutive interventions it is each round's inserted text joined with the separator (the in-between
  paragraphs are model reasoning, not inserted). With ``append_wait`` the separator and ``wait_text`` are
  appended to it too: "Wait" is forced text, so length accounting must not count it as model output.
- ``options`` record everything besides (trace, intervention, t, seed) that changes the result
  (``append_wait``, ``repeats``, ``min_steps``, …), so `Intervened.id` differs between configurations.

k consecutive interventions (App. A.2, ``repeats=k``): after the first edit, each further round adds one
paragraph of reasoning and then intervenes again at the end of the chain. The paragraph comes from
``between(current_prefix_text)`` (a model backend; only its first paragraph is kept) or, when ``between``
is None, from the original trace: step ``cut_index + r`` for round r (the original model's next step, a
stand-in that does not react to the intervention). A "replace_last" intervention then writes the step that
follows that paragraph (the paragraph is kept), "append" adds after it, "modify_last" changes the
paragraph itself and "rewrite" rewrites the whole chain.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recovery.generation import TextGenerator
from recovery.ids import content_id, item_rng
from recovery.interventions.base import REGISTRY, Edit, Intervention, InterventionContext, InterventionFailed, create
from recovery.interventions.cleaning import FailureReason, split_paragraphs
from recovery.segment import (
    DEFAULT_MIN_STEPS,
    DEFAULT_TIMESTEPS,
    STEP_SEPARATOR,
    TooFewSteps,
    cut_at,
    join_steps,
    split_steps,
)
from recovery.types import Cut, Intervened, Problem, Step, Trace

WAIT_TEXT = "Wait"
TOO_FEW_STEPS = "too_few_steps"  # skip reason for `TooFewSteps`, beside the `FailureReason` vocabulary
ORIGINAL_NEXT_STEP = "original_next_step"  # recorded as ``options["between"]`` when ``between`` is None

Between = Callable[[str], str]


def resolve(intervention: str | Intervention, options: Mapping[str, Any] | None = None) -> Intervention:
    """A registry name becomes an instance (with ``options``); an instance is returned as is."""
    if isinstance(intervention, str):
        return create(intervention, **dict(options or {}))
    if options:
        raise TypeError(f"options {sorted(options)} only apply to registry names; configure the instance instead")
    return intervention


def intervene(
    problem: Problem,
    trace: Trace,
    intervention: str | Intervention,
    t: float,
    *,
    seed: int = 0,
    generator: TextGenerator | None = None,
    min_steps: int = DEFAULT_MIN_STEPS,
    append_wait: bool = False,
    wait_text: str = WAIT_TEXT,
    repeats: int = 1,
    between: Between | None = None,
    steps: Sequence[Step] | None = None,
    **options: Any,
) -> Intervened:
    """Apply one intervention to ``trace`` at target timestep ``t`` and return the intervened prefix.

    ``intervention`` is a registry name (``options`` go to its factory, e.g. ``pool=`` for
    ``wikipedia_text``) or an instance. ``steps`` may pass ``split_steps(trace.reasoning)`` when already
    computed. Raises `TooFewSteps` for short traces and `InterventionFailed` (with a `FailureReason`) when
    no usable edit results; configuration mistakes raise `ValueError`/`TypeError`.
    """
    impl = resolve(intervention, options)
    recorded = describe_intervention(impl, options)
    return intervene_described(
        problem,
        trace,
        impl,
        t,
        recorded,
        seed=seed,
        generator=generator,
        min_steps=min_steps,
        append_wait=append_wait,
        wait_text=wait_text,
        repeats=repeats,
        between=between,
        steps=steps,
    )[0]


def intervene_described(
    problem: Problem,
    trace: Trace,
    impl: Intervention,
    t: float,
    recorded_options: Mapping[str, Any],
    *,
    seed: int,
    generator: TextGenerator | None,
    min_steps: int,
    append_wait: bool,
    wait_text: str,
    repeats: int,
    between: Between | None,
    steps: Sequence[Step] | None,
) -> tuple[Intervened, tuple[str, ...]]:
    """`intervene` on an instance already described by `describe_intervention` (``recorded_options``);
    also returns the cleaning notes of every round. Callers that intervene many items with one instance
    describe it once (describing a dataclass instance walks its fields) and call this per item."""
    _check_setup(impl, generator, repeats, append_wait, wait_text)
    if trace.problem_id != problem.id:
        raise ValueError(f"trace {trace.id} belongs to problem {trace.problem_id!r}, not {problem.id!r}")
    steps = split_steps(trace.reasoning) if steps is None else tuple(steps)
    cut = cut_at(steps, t, min_steps=min_steps)
    name = impl.name

    edit = impl.apply(InterventionContext(problem, trace, steps, cut, item_rng(seed, trace.id, name, t), generator))
    prefix_steps, pieces, notes = edit.prefix_steps, [edit.inserted_text], list(edit.notes)
    for round_index in range(1, repeats):
        paragraph = _between_paragraph(between, prefix_steps, steps, cut, round_index)
        edit = _apply_round(impl, problem, trace, prefix_steps + (paragraph,), t, seed, round_index, generator)
        prefix_steps = edit.prefix_steps
        pieces.append(edit.inserted_text)
        notes.extend(edit.notes)
    if append_wait:
        prefix_steps = prefix_steps + (wait_text,)
        pieces.append(wait_text)

    options: dict[str, Any] = {"append_wait": append_wait, "repeats": repeats, "min_steps": min_steps}
    if append_wait:
        options["wait_text"] = wait_text
    if repeats > 1:
        options["between"] = ORIGINAL_NEXT_STEP if between is None else _callable_name(between)
    if recorded_options:
        options["intervention_options"] = dict(recorded_options)
    intervened = Intervened(
        trace_id=trace.id,
        problem_id=problem.id,
        model=trace.model,
        intervention=name,
        category=impl.category,
        target_t=t,
        actual_t=cut.actual_t,
        cut_index=cut.index,
        n_steps=len(steps),
        prefix=join_steps(prefix_steps),
        inserted_text=STEP_SEPARATOR.join(pieces),
        original_prefix_chars=steps[cut.index].end,  # = len(join_steps(steps[: cut.index + 1]))
        original_reasoning_chars=len(trace.reasoning),
        seed=seed,
        options=options,
    )
    return intervened, tuple(notes)


def _check_setup(
    impl: Intervention, generator: TextGenerator | None, repeats: int, append_wait: bool, wait_text: str
) -> None:
    if impl.needs_generator and generator is None:
        raise ValueError(f"{impl.name} is LLM-backed: pass generator=<TextGenerator> (messages, decoding) -> str")
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an int ≥ 1, got {repeats!r}")
    if append_wait and not wait_text.strip():
        raise ValueError("wait_text must not be blank")


def _apply_round(
    impl: Intervention,
    problem: Problem,
    trace: Trace,
    chain: tuple[str, ...],
    t: float,
    seed: int,
    round_index: int,
    generator: TextGenerator | None,
) -> Edit:
    """Round r ≥ 1 of k consecutive interventions, at the end of ``chain`` (which ends with the paragraph)."""
    if getattr(impl, "edit_kind", None) == "replace_last":
        # An empty placeholder step is what gets replaced, so the in-between paragraph survives.
        chain = chain + ("",)
    steps = split_steps(join_steps(chain))
    cut = Cut(index=len(steps) - 1, target_t=t, actual_t=steps[-1].t)
    rng = item_rng(seed, trace.id, impl.name, t, round_index)
    return impl.apply(InterventionContext(problem, trace, steps, cut, rng, generator))


def _between_paragraph(
    between: Between | None, prefix_steps: tuple[str, ...], steps: Sequence[Step], cut: Cut, round_index: int
) -> str:
    """The paragraph of reasoning before round ``round_index`` (see the module docstring)."""
    if between is None:
        index = cut.index + round_index
        if index >= len(steps):
            raise InterventionFailed(
                FailureReason.BETWEEN_UNAVAILABLE, f"original trace has no step {index} to put between interventions"
            )
        return steps[index].text
    try:
        text = between(join_steps(prefix_steps))
    except Exception as exc:  # noqa: BLE001 — a backend failure is one failed item
        raise InterventionFailed(FailureReason.GENERATOR_ERROR, f"between: {type(exc).__name__}: {exc}") from exc
    paragraphs = split_paragraphs(text) if isinstance(text, str) else []
    if not paragraphs:
        raise InterventionFailed(FailureReason.BETWEEN_UNAVAILABLE, "between() returned no text")
    return paragraphs[0]  # "one paragraph of model reasoning" (App. A.2)


def _callable_name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__qualname__


def _describe(value: Any) -> Any:
    """A JSON-friendly stand-in for an option value, stable across runs (recorded in ids)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if hasattr(value, "fingerprint"):  # e.g. WikipediaPool
        return f"{type(value).__name__}:{value.fingerprint}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"type": type(value).__name__, **{k: _describe(v) for k, v in dataclasses.asdict(value).items()}}
    if isinstance(value, (list, tuple)) and all(isinstance(v, (str, int, float, bool)) for v in value):
        return f"{type(value).__name__}:{content_id(list(value))}"
    return type(value).__qualname__


def describe_intervention(impl: Intervention, options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The settings of an intervention that differ from its defaults, JSON-friendly (recorded in ids).

    For dataclass interventions (all of ours) these are the fields whose value differs from the field's
    default, however the instance was built, so ``create("x", opt=default)`` and ``create("x")`` share ids.
    For other interventions the factory ``options`` are recorded as given.
    """
    if dataclasses.is_dataclass(impl) and not isinstance(impl, type):
        changed = {}
        for f in dataclasses.fields(impl):
            value = getattr(impl, f.name)
            if f.default is not dataclasses.MISSING:
                default = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            else:
                changed[f.name] = _describe(value)
                continue
            if value is not default and value != default:
                changed[f.name] = _describe(value)
        return dict(sorted(changed.items()))
    return {key: _describe(value) for key, value in sorted((options or {}).items())}


# ---------------------------------------------------------------------------------------------- batches


@dataclass(frozen=True, slots=True)
class Skip:
    """An item that produced no `Intervened`, with the reason (``too_few_steps`` or a `FailureReason`)."""

    trace_id: str
    problem_id: str
    intervention: str
    target_t: float
    reason: str
    message: str = ""


class SkipCounter:
    """Counts produced items, skips by (intervention, reason) and cleaning notes by (intervention, note);
    keeps the first ``max_examples`` skips for inspection."""

    def __init__(self, max_examples: int = 20) -> None:
        self.produced: Counter[str] = Counter()
        self.skipped: Counter[tuple[str, str]] = Counter()
        self.notes: Counter[tuple[str, str]] = Counter()
        self.examples: list[Skip] = []
        self.max_examples = max_examples

    def add_skip(self, skip: Skip) -> None:
        """Count one skipped item."""
        self.skipped[(skip.intervention, skip.reason)] += 1
        if len(self.examples) < self.max_examples:
            self.examples.append(skip)

    def add_produced(self, intervention: str, notes: Iterable[str] = ()) -> None:
        """Count one produced item and its cleaning notes."""
        self.produced[intervention] += 1
        for note in notes:
            self.notes[(intervention, note)] += 1

    @property
    def total_produced(self) -> int:
        return sum(self.produced.values())

    @property
    def total_skipped(self) -> int:
        return sum(self.skipped.values())

    def by_reason(self) -> Counter[str]:
        """Skips per reason, over all interventions."""
        totals: Counter[str] = Counter()
        for (_, reason), count in self.skipped.items():
            totals[reason] += count
        return totals

    def summary(self) -> str:
        """One line per intervention: produced, skipped by reason, notes."""
        names = sorted(set(self.produced) | {n for n, _ in self.skipped} | {n for n, _ in self.notes})
        lines = []
        for name in names:
            skips = ", ".join(f"{r}={c}" for (n, r), c in sorted(self.skipped.items()) if n == name) or "none"
            notes = ", ".join(f"{o}={c}" for (n, o), c in sorted(self.notes.items()) if n == name) or "none"
            lines.append(f"{name}: produced={self.produced[name]} skipped: {skips}; notes: {notes}")
        return "\n".join(lines)


def intervene_all(
    items: Iterable[tuple[Problem, Trace]],
    interventions: Sequence[str | Intervention],
    timesteps: Iterable[float] = DEFAULT_TIMESTEPS,
    *,
    seed: int = 0,
    generator: TextGenerator | None = None,
    min_steps: int = DEFAULT_MIN_STEPS,
    append_wait: bool = False,
    wait_text: str = WAIT_TEXT,
    repeats: int = 1,
    between: Between | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    counter: SkipCounter | None = None,
    yield_skips: bool = False,
) -> Iterator[Intervened | Skip]:
    """Intervene on every (problem, trace) × intervention × timestep, lazily, in that order.

    Items that cannot be intervened on (`TooFewSteps`, `InterventionFailed`) are counted in ``counter``
    (and yielded as `Skip` when ``yield_skips``) instead of ending the run. ``options`` maps an
    intervention name to its factory options (e.g. ``{"wikipedia_text": {"pool": pool}}``). Setup errors
    (unknown name, missing generator or pool) raise before the first item.
    """
    options = options or {}
    # Options for registered names not in this run are fine (one settings dict for many runs); others are typos.
    unknown = set(options) - set(REGISTRY) - {i if isinstance(i, str) else i.name for i in interventions}
    if unknown:
        raise ValueError(f"options given for unknown interventions: {sorted(unknown)}")
    resolved = []
    for spec in interventions:
        name = spec if isinstance(spec, str) else spec.name
        impl = resolve(spec, options.get(name) if isinstance(spec, str) else None)
        _check_setup(impl, generator, repeats, append_wait, wait_text)
        factory_options = options.get(name) if isinstance(spec, str) else None
        resolved.append((impl, describe_intervention(impl, factory_options)))
    grid = tuple(timesteps)
    counter = SkipCounter() if counter is None else counter
    settings = dict(
        seed=seed,
        generator=generator,
        min_steps=min_steps,
        append_wait=append_wait,
        wait_text=wait_text,
        repeats=repeats,
        between=between,
    )
    return _run(items, resolved, grid, settings, counter, yield_skips)


def _run(
    items: Iterable[tuple[Problem, Trace]],
    resolved: list[tuple[Intervention, dict[str, Any]]],
    grid: tuple[float, ...],
    settings: dict[str, Any],
    counter: SkipCounter,
    yield_skips: bool,
) -> Iterator[Intervened | Skip]:
    for problem, trace in items:
        steps = split_steps(trace.reasoning)  # once per trace, shared by every intervention and t
        for impl, recorded in resolved:
            for t in grid:
                try:
                    intervened, notes = intervene_described(problem, trace, impl, t, recorded, steps=steps, **settings)
                except (TooFewSteps, InterventionFailed) as exc:
                    reason = TOO_FEW_STEPS if isinstance(exc, TooFewSteps) else str(exc.reason)
                    skip = Skip(trace.id, problem.id, impl.name, t, reason, str(exc))
                    counter.add_skip(skip)
                    if yield_skips:
                        yield skip
                    continue
                counter.add_produced(impl.name, notes)
                yield intervened
