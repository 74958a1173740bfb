"""Turn (problem, trace, intervention, t, settings) into an `Intervened` prefix: one item (`intervene`) or
the loop over trace × intervention × timestep (`intervene_traces`, its settings in one `ChainSettings`).

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

Each intervention's `TextRules` (`recovery.interventions.rules`; the default protocol's for one without)
decide what differs between protocols here: the steps and cut, how the prefix and inserted text end
("Wait"), the original reasoning's length and what the chain records about its protocol. Built with the
authors' (``protocol: reference``, `recovery.interventions.reference`), a chain is built their way:
reasoning and cut as they extract it, the prefix as they restore it, their "Wait" marker,
``inserted_text`` their ``intervention_text``, the trace's batch position (`TraceJob.position`) in place of
the item seed, and ``protocol`` and ``position`` in the options. They have no consecutive-interventions
mode (``repeats`` must be 1).

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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from recovery.generation import TextGenerator
from recovery.ids import content_id, item_rng
from recovery.interventions.base import Edit, Intervention, InterventionContext, InterventionFailed
from recovery.interventions.cleaning import FailureReason, split_paragraphs
from recovery.interventions.registry import INTERVENTIONS, create
from recovery.interventions.rules import DEFAULT_RULES, NOT_RECORDED, TextRules, rules_of
from recovery.run_config import InterventionsConfig
from recovery.segment import DEFAULT_MIN_STEPS, DEFAULT_TIMESTEPS, TooFewSteps, join_steps, split_steps
from recovery.types import Cut, Intervened, Problem, Step, Trace

WAIT_TEXT = "Wait"
TOO_FEW_STEPS = "too_few_steps"  # skip reason for `TooFewSteps`, beside the `FailureReason` vocabulary
ORIGINAL_NEXT_STEP = "original_next_step"  # recorded as ``options["between"]`` when ``between`` is None

Between = Callable[[str], str]


@dataclass(frozen=True)
class ChainSettings:
    """What the loop does: which interventions (name → instance, in run order) at which timesteps, and
    everything else that decides a chain's bytes (recorded in its options, hence in its id).

    Checked when built, so a run with a setup mistake (an LLM-backed intervention without ``generator``,
    ``repeats`` < 1, a blank ``wait_text``) fails before its first item. ``recorded`` holds each
    intervention's `describe_intervention`, computed once (describing a dataclass walks its fields).
    """

    interventions: Mapping[str, Intervention]
    timesteps: Sequence[float] = DEFAULT_TIMESTEPS
    seed: int = 0
    min_steps: int = DEFAULT_MIN_STEPS
    append_wait: bool = False
    wait_text: str = WAIT_TEXT
    repeats: int = 1
    generator: TextGenerator | None = None
    recorded: Mapping[str, dict[str, Any]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for impl in self.interventions.values():
            if impl.needs_generator and self.generator is None:
                raise ValueError(
                    f"{impl.name} is LLM-backed: pass generator=<TextGenerator> (messages, decoding) -> str"
                )
        if not isinstance(self.repeats, int) or self.repeats < 1:
            raise ValueError(f"repeats must be an int ≥ 1, got {self.repeats!r}")
        if self.repeats > 1 and not all(rules_of(impl).consecutive for impl in self.interventions.values()):
            raise ValueError("repeats > 1 has no reference implementation: use the default interventions")
        if self.append_wait and not self.wait_text.strip():
            raise ValueError("wait_text must not be blank")
        object.__setattr__(self, "interventions", dict(self.interventions))
        object.__setattr__(self, "timesteps", tuple(self.timesteps))
        recorded = {name: describe_intervention(impl) for name, impl in self.interventions.items()}
        object.__setattr__(self, "recorded", recorded)

    @classmethod
    def from_names(
        cls,
        names: Iterable[str],
        options: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        style: str | TextRules = DEFAULT_RULES,
        **settings: Any,
    ) -> ChainSettings:
        """Settings for registry names, each built with its factory ``options`` (e.g. ``{"wikipedia_text":
        {"pool": pool}}``). Options for a registered name not in ``names`` are fine (one options dict can
        serve many runs); options for an unregistered one are a typo. ``style`` is the text rules the paper's
        seven are built with (a `TextRules`, as a run's plan holds them, or a style's name: `rules_for`); other
        interventions keep their own."""
        names = list(names)
        options = options or {}
        unknown = set(options) - set(INTERVENTIONS) - set(names)
        if unknown:
            raise ValueError(f"options given for unknown interventions: {sorted(unknown)}")

        built = {name: create(name, protocol=style, **options.get(name, {})) for name in names}
        return cls(built, **settings)

    @classmethod
    def from_config(
        cls,
        cfg: InterventionsConfig,
        options: Mapping[str, Mapping[str, Any]],
        *,
        style: str | TextRules = DEFAULT_RULES,
        generator: TextGenerator | None = None,
    ) -> ChainSettings:
        """Settings of a run's ``interventions`` section: its names built with ``options`` (`from_names`), at its
        timesteps, seed, minimum steps, append-Wait and repeats."""
        run_settings = {name: getattr(cfg, name) for name in _RUN_SETTINGS}
        return cls.from_names(cfg.names, options, style=style, generator=generator, **run_settings)


# The fields of a run's `InterventionsConfig` that are `ChainSettings` fields of the same name.
_RUN_SETTINGS = ("timesteps", "seed", "min_steps", "append_wait", "repeats")


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One trace's part of the loop: the (intervention, t) pairs still to do (None: every pair of the
    settings, in order), what lies between consecutive interventions (None: the original next step) and the
    trace's batch position (read by the ``protocol: reference`` interventions only)."""

    problem: Problem
    trace: Trace
    todo: Sequence[tuple[str, float]] | None = None
    between: Between | None = None
    position: int | None = None


@dataclass(frozen=True, slots=True)
class Produced:
    """An item the loop intervened on, with the cleaning notes of all its rounds (see `Edit.notes`)."""

    chain: Intervened
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Skip:
    """An item that produced no `Intervened`, with the reason (``too_few_steps`` or a `FailureReason`)."""

    trace_id: str
    problem_id: str
    intervention: str
    target_t: float
    reason: str
    message: str = ""


def intervene_traces(jobs: Iterable[TraceJob], settings: ChainSettings) -> Iterator[Produced | Skip]:
    """The loop over trace × intervention × timestep, lazily, in that order (or in each job's ``todo``).

    An item that cannot be intervened on (`TooFewSteps`, `InterventionFailed`) becomes a `Skip` instead
    of ending the run; anything else (a trace paired with another problem, a bug) raises.
    """
    every = tuple((name, t) for name in settings.interventions for t in settings.timesteps)
    rules = {name: rules_of(impl) for name, impl in settings.interventions.items()}
    for job in jobs:
        problem, trace = job.problem, job.trace
        _check_pair(problem, trace)
        steps = split_steps(trace.reasoning)  # once per trace, shared by every intervention and t
        steps_of = {r: r.steps(trace, steps) for r in set(rules.values())}  # each protocol's, once per trace
        for name, t in every if job.todo is None else job.todo:
            try:
                outcome: Produced | Skip = _chain(
                    problem, trace, name, t, steps_of[rules[name]], job.between, settings, job.position
                )
            except (TooFewSteps, InterventionFailed) as exc:
                reason = TOO_FEW_STEPS if isinstance(exc, TooFewSteps) else str(exc.reason)
                outcome = Skip(trace.id, problem.id, name, t, reason, str(exc))
            yield outcome


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
    ``wikipedia_text``) or an instance; the other keywords are those of `ChainSettings`. ``steps`` may
    pass ``split_steps(trace.reasoning)`` when already computed. Raises `TooFewSteps` for short traces and
    `InterventionFailed` (with a `FailureReason`) when no usable edit results; configuration mistakes
    raise `ValueError`/`TypeError`.
    """
    impl = _resolve(intervention, options)
    settings = ChainSettings(
        {impl.name: impl},
        (t,),
        seed=seed,
        generator=generator,
        min_steps=min_steps,
        append_wait=append_wait,
        wait_text=wait_text,
        repeats=repeats,
    )
    _check_pair(problem, trace)
    steps = split_steps(trace.reasoning) if steps is None else tuple(steps)
    return _chain(problem, trace, impl.name, t, steps, between, settings).chain


def _resolve(intervention: str | Intervention, options: Mapping[str, Any]) -> Intervention:
    """A registry name becomes an instance (with ``options``); an instance is returned as is."""
    if isinstance(intervention, str):
        return create(intervention, **options)
    if options:
        raise TypeError(f"options {sorted(options)} only apply to registry names; configure the instance instead")
    return intervention


def _check_pair(problem: Problem, trace: Trace) -> None:
    if trace.problem_id != problem.id:
        raise ValueError(f"trace {trace.id} belongs to problem {trace.problem_id!r}, not {problem.id!r}")


def _chain(
    problem: Problem,
    trace: Trace,
    name: str,
    t: float,
    steps: tuple[Step, ...],
    between: Between | None,
    settings: ChainSettings,
    position: int | None = None,
) -> Produced:
    """One item: the intervention called ``name`` in ``settings`` at ``t``, then its further rounds."""
    impl = settings.interventions[name]
    rules = rules_of(impl)
    cut = rules.cut(steps, t, min_steps=settings.min_steps)
    rng = item_rng(settings.seed, trace.id, impl.name, t)
    edit = impl.apply(InterventionContext(problem, trace, steps, cut, rng, settings.generator, position))
    prefix_steps, pieces, notes = edit.prefix_steps, [edit.inserted_text], list(edit.notes)
    for round_index in range(1, settings.repeats):
        paragraph = _between_paragraph(between, prefix_steps, steps, cut, round_index)
        edit = _apply_round(impl, problem, trace, prefix_steps + (paragraph,), t, round_index, settings)
        prefix_steps = edit.prefix_steps
        pieces.append(edit.inserted_text)
        notes.extend(edit.notes)
    wait = settings.wait_text if settings.append_wait else None
    prefix, inserted = rules.finished(prefix_steps, pieces, wait)

    options: dict[str, Any] = {
        "append_wait": settings.append_wait,
        "repeats": settings.repeats,
        "min_steps": settings.min_steps,
    }
    if settings.append_wait:
        options["wait_text"] = settings.wait_text
    if settings.repeats > 1:
        options["between"] = ORIGINAL_NEXT_STEP if between is None else _callable_name(between)
    if recorded := settings.recorded[name]:
        options["intervention_options"] = dict(recorded)
    options.update(rules.recorded(position))
    intervened = Intervened(
        trace_id=trace.id,
        problem_id=problem.id,
        model=trace.model,
        intervention=impl.name,
        category=impl.category,
        target_t=t,
        actual_t=cut.actual_t,
        cut_index=cut.index,
        n_steps=len(steps),
        prefix=prefix,
        inserted_text=inserted,
        original_prefix_chars=steps[cut.index].end,  # = len(join_steps(steps[: cut.index + 1]))
        original_reasoning_chars=rules.reasoning_chars(trace, steps),
        seed=settings.seed,
        options=options,
    )
    return Produced(intervened, tuple(notes))


def _apply_round(
    impl: Intervention,
    problem: Problem,
    trace: Trace,
    chain: tuple[str, ...],
    t: float,
    round_index: int,
    settings: ChainSettings,
) -> Edit:
    """Round r ≥ 1 of k consecutive interventions, at the end of ``chain`` (which ends with the paragraph)."""
    if getattr(impl, "edit_kind", None) == "replace_last":
        # An empty placeholder step is what gets replaced, so the in-between paragraph survives.
        chain = chain + ("",)
    steps = split_steps(join_steps(chain))
    cut = Cut(index=len(steps) - 1, target_t=t, actual_t=steps[-1].t)
    rng = item_rng(settings.seed, trace.id, impl.name, t, round_index)
    return impl.apply(InterventionContext(problem, trace, steps, cut, rng, settings.generator))


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


def describe_intervention(impl: Intervention) -> dict[str, Any]:
    """The settings of an intervention that differ from its defaults, JSON-friendly (recorded in ids).

    For dataclass interventions (all of ours) these are the fields whose value differs from the field's
    default, however the instance was built, so ``create("x", opt=default)`` and ``create("x")`` share ids.
    The protocol's rules are not among them (a chain records its protocol itself). Other interventions
    record nothing.
    """
    if dataclasses.is_dataclass(impl) and not isinstance(impl, type):
        changed = {}
        for f in dataclasses.fields(impl):
            if f.metadata.get(NOT_RECORDED):
                continue
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
    return {}
