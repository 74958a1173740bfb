"""The benchmark run's configuration: dataclasses loaded strictly from YAML (`recovery.configs`), and what a
config alone says about its models (their conventions, who continues whose chains).

One run = one dataset × one or more models × interventions × timesteps × N continuations, written to
``run_dir``. Every field has the paper's default where the paper has one (Table 15, §3.2).

Model swap (paper §5, Table 9): a run with ``swap_to: B`` (a name in ``models``) generates every model's
original traces and intervenes on them as usual, but samples the continuations of *every* chain with model B
(B's backend, chat template and decoding exceptions). Continuation rows record B in their ``model`` column;
aggregates label a swapped chain's group ``"A→B"`` (`pair_label`), so the report shows both models, and a
chain of B itself stays plain ``"B"`` (the matrix diagonal).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from recovery.backends.settings import legacy_keys, settings_class, settings_mapping
from recovery.configs import ConfigError, did_you_mean, fields_from_mapping, from_mapping
from recovery.generation import check_decoding, check_sampling
from recovery.models import gguf_model_name, resolve_spec, spec_for
from recovery.protocol import Protocol, check_protocol
from recovery.run_filters import FilterConfig
from recovery.run_sections import ExecutorConfig, WandbConfig
from recovery.segment import DEFAULT_MIN_STEPS, DEFAULT_TIMESTEPS, ThinkTags
from recovery.types import Unclosed, check_unclosed

if TYPE_CHECKING:
    from recovery.models import ModelSpec

ARROW = "→"


def validate_swap_to(swap_to: str | None, model_names: Sequence[str]) -> None:
    """Raise `ValueError` unless ``swap_to`` is unset or names one of ``model_names``.

    Model names must not contain the arrow when swapping, or the ``"A→B"`` labels would be ambiguous.
    """
    if swap_to is None:
        return
    if swap_to not in model_names:
        raise ValueError(
            f"swap_to {swap_to!r} is not one of the run's models ({', '.join(model_names)}); "
            "the continuing model must be listed under models"
        )
    bad = [n for n in model_names if ARROW in n]
    if bad:
        raise ValueError(f"model names must not contain {ARROW!r} when swap_to is set, got {bad}")


@dataclass
class ModelConfig:
    """A model and the backend that runs it: what every backend shares, and ``settings``, the backend's own
    (`recovery.backends.settings`; in YAML they sit flat beside the shared keys)."""

    name: str
    path: str | None = None  # HF path or hub id; "tiny-reasoner" (the default) is the shipped toy model
    backend: str = "hf"  # a registered backend (`recovery.backends.registry`)
    spec: str | None = None  # model-conventions name (think tags, system prompt); guessed from path if unset
    # A GGUF checkpoint inside ``path`` (a file name there, or a file path): loaded, with its tokenizer and chat
    # template, by the HF backend (needs the ``gguf`` package); its file name also names the model's conventions.
    # With the openai backend the server loads it: the tokenizer is read from it here, and requests name the
    # model ``<path>:<file name>``, as ``transformers serve`` does (other servers: --served-model-name).
    gguf_file: str | None = None
    # Whether the model writes a think block. Unset: from its conventions (registered families, else its chat
    # template: a generation prompt that opens a think block). A chat model never gets a think opener.
    reasoning: bool | None = None
    # Decoding of this model's own original traces (its recommended setting, paper §3.2: Phi-4-reasoning-plus
    # T=0.8, top_k=50). Continuations of intervened chains use `RunConfig.continuation` for every model
    # (Table 15: "All evaluated models", T=0.6, top_p=0.95); these never apply to them.
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    # The backend's own settings: an instance of its settings class, or a mapping of them (None: defaults).
    settings: Any = None

    def __post_init__(self) -> None:
        cls = settings_class(self.backend)
        if self.settings is None or isinstance(self.settings, Mapping):
            try:
                self.settings = cls(**dict(self.settings or {}))
            except TypeError as err:
                raise ValueError(f"model {self.name!r}: {err}") from None
        elif not isinstance(self.settings, cls):
            raise ValueError(
                f"model {self.name!r}: backend {self.backend!r} takes {cls.__name__}, got {type(self.settings).__name__}"
            )
        check_decoding(self.temperature, self.top_p, self.top_k, where=f"model {self.name!r}: ")
        if self.gguf_file is not None and (self.backend not in ("hf", "openai") or not self.path):
            raise ValueError(
                f"model {self.name!r}: gguf_file needs the hf or openai backend and a path (the folder holding it)"
            )

    @classmethod
    def from_config_mapping(cls, data: Mapping[str, Any], *, where: str = "model") -> ModelConfig:
        """A model config from its YAML shape: the shared keys, and the backend's settings flat beside them.

        A key that is neither shared nor a setting of the named backend is refused with its path. Keys of other
        built-in backends at their old defaults are read as absent: manifests list them all (`to_config_mapping`).
        """
        shared = {f.name for f in dataclasses.fields(cls)} - {"settings"}
        backend = data.get("backend", "hf")
        try:
            settings_cls = settings_class(backend) if isinstance(backend, str) else None
        except ValueError as err:
            raise ConfigError(f"{where}.backend: {err}") from None
        own = {f.name for f in dataclasses.fields(settings_cls)} if settings_cls else set()
        legacy = legacy_keys()
        flat = {k: v for k, v in data.items() if k not in shared and k != "settings"}
        for key, value in flat.items():
            if key not in own and not (key in legacy and value == legacy[key]):
                hint = did_you_mean(key, shared | own, label="known keys")
                raise ConfigError(f"{where}: unknown key {key!r} for backend {backend!r}{hint}")
        settings = dict(data.get("settings") or {})
        settings.update({k: v for k, v in flat.items() if k in own})
        common = {k: v for k, v in data.items() if k in shared}
        if settings_cls is not None:
            common["settings"] = from_mapping(settings_cls, settings, where=where)
        return fields_from_mapping(cls, common, where=where)

    def to_config_mapping(self) -> dict[str, Any]:
        """The YAML shape: shared keys, then every built-in backend's settings keys (their defaults where this
        backend has no such setting: the manifest's shape since before backends owned their settings, so run
        directories keep their bytes), then this backend's settings."""
        shared = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "settings"}
        return {**shared, **legacy_keys(), **settings_mapping(self.settings)}


@dataclass
class DatasetConfig:
    """Where problems come from: a registry name (``bbh/dyck_languages``, ``scibench``, ``toy``...)."""

    name: str
    path: str | None = None
    limit: int | None = None
    options: dict[str, Any] = field(default_factory=dict)
    # The user turn; "{question}" is replaced by the problem text. Unset: the question alone for the toy
    # world (as the tiny reasoner was trained), else DeepSeek-R1's recommended instruction.
    prompt_template: str | None = None

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise ValueError("dataset.limit must be ≥ 1")
        if self.prompt_template is not None and "{question}" not in self.prompt_template:
            raise ValueError("dataset.prompt_template must contain {question}")


@dataclass
class SamplingConfig:
    """Decoding for original traces or continuations (paper Table 15: T=0.6, top_p=0.95, n=8)."""

    n: int = 8
    temperature: float = 0.6
    top_p: float = 0.95
    top_k: int | None = None
    max_new_tokens: int = 32768
    seed: int = 0

    def __post_init__(self) -> None:
        check_sampling(self.n, self.max_new_tokens)
        check_decoding(self.temperature, self.top_p, self.top_k)


@dataclass
class TracesConfig:
    """Original traces: generated by each model (``generate``), imported from a file (``import``), or the
    problems, traces and selection of another run directory (``run``, ``path`` naming it: the Table 9 swap
    runs reuse the Logic run's, `recovery.pipeline.run_reuse`)."""

    source: Literal["generate", "import", "run"] = "generate"
    path: str | None = None
    # The import field mapping (see recovery.data.traces): column names, None for a column the file lacks, and
    # the options strip_prompt, id_prefix, model_name and metadata.
    fields: dict[str, Any] = field(default_factory=dict)
    sampling: SamplingConfig = field(default_factory=lambda: SamplingConfig(n=1))
    filters: FilterConfig = field(default_factory=FilterConfig)

    def __post_init__(self) -> None:
        if self.source in ("import", "run") and not self.path:
            raise ValueError(f"traces.source={self.source} needs traces.path")
        if self.sampling.n != 1:
            raise ValueError(
                f"sampling.n: one original trace per (model, problem) is generated, got n={self.sampling.n}"
            )


@dataclass
class InterventionsConfig:
    """Which interventions, where, and the ablation options (§5 append-Wait, App. A.2 repeats)."""

    # The default needs no data file and no LLM (wikipedia_text needs a pool, the LLM-backed ones a model).
    names: list[str] = field(default_factory=lambda: ["random_characters"])
    timesteps: list[float] = field(default_factory=lambda: list(DEFAULT_TIMESTEPS))
    seed: int = 0
    min_steps: int = DEFAULT_MIN_STEPS
    append_wait: bool = False
    repeats: int = 1
    # What lies between consecutive interventions (repeats ≥ 2): the original trace's next step, or one
    # paragraph the chain's own model writes (paper App. A.2; see recovery.pipeline.between).
    between: Literal["original", "model"] = "original"
    between_max_new_tokens: int = 1024
    options: dict[str, dict[str, Any]] = field(default_factory=dict)  # per-intervention factory options
    wikipedia_pool: str | None = None  # file for wikipedia_text (JSONL with "text" or blank-line paragraphs)
    llm: ModelConfig | None = None  # the intervention LLM for the LLM-backed interventions

    def __post_init__(self) -> None:
        if not self.names:
            raise ValueError("interventions.names must not be empty")
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"names: each intervention once, got {self.names}")
        if not self.timesteps:
            raise ValueError("timesteps must not be empty")
        for t in self.timesteps:
            if not 0 <= t <= 1:
                raise ValueError(f"interventions.timesteps: {t} is outside [0, 1]")
        if self.repeats < 1:
            raise ValueError("interventions.repeats must be ≥ 1")
        if self.between_max_new_tokens < 1:
            raise ValueError("interventions.between_max_new_tokens must be ≥ 1")


@dataclass
class GradingConfig:
    """Rule-based grading (always) and an optional LLM judge (paper's grading option).

    The defaults are the project's protocol. To compare with the paper's published figures, use the
    authors' one: ``judge`` set, ``primary: judge``, ``judge_prompt: reference`` and ``unclosed: grade``
    (their reference implementation judges every continuation, closed or not; see
    `recovery.grading.judge`). These options are part of the run manifest, so a run directory cannot be
    resumed under another protocol.
    """

    workers: int = 2
    timeout_s: float = 5.0
    judge: ModelConfig | None = None  # also grade every continuation with this LLM (closed ones, by default)
    primary: Literal["rule", "judge"] = "rule"  # which verdict the metrics use when a judge is configured
    # The judge's prompt: "default" (Yes/No on the answer part) or "reference" (the authors' prompt: "Is the
    # Reference Answer present ...", last 8,000 characters after the last closing tag, exact "Correct").
    judge_prompt: Literal["default", "reference"] = "default"
    # A continuation that never closed its think block: "no_answer" (not graded, never correct) or "grade"
    # (graded on its whole text, so a correct boxed answer inside the open reasoning counts, as in the
    # authors' reference implementation).
    unclosed: Unclosed = "no_answer"
    # Grade continuations in worker processes while they are generated (rule-based grading, ≥2 CPU
    # workers); the grades stage then only grades what is missing.
    alongside: bool = True

    def __post_init__(self) -> None:
        if self.primary == "judge" and self.judge is None:
            raise ValueError("grading.primary=judge needs grading.judge")
        if self.workers < 1:
            raise ValueError(f"workers must be ≥ 1, got {self.workers}")
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {self.timeout_s}")
        if self.judge_prompt != "default" and self.judge is None:
            raise ValueError(f"grading.judge_prompt={self.judge_prompt} needs grading.judge")
        check_unclosed(self.unclosed)

    def protocol(self) -> str:
        """One line naming how verdicts were decided, for reports: grader, judge prompt, unclosed handling.

        >>> GradingConfig().protocol()
        'rule-based grader; unclosed continuations: no_answer (never correct)'
        """
        if self.judge is None:
            how = "rule-based grader"
        else:
            judge = f"LLM judge {self.judge.name} (prompt: {self.judge_prompt})"
            if self.primary == "judge":
                how = f"{judge}, rule-based grader beside it"
            else:
                how = f"rule-based grader, {judge} beside it"
        unclosed = "no_answer (never correct)" if self.unclosed == "no_answer" else "graded on their whole text"
        return f"{how}; unclosed continuations: {unclosed}"


@dataclass
class RunConfig:
    """A whole benchmark run."""

    run_dir: str
    dataset: DatasetConfig
    models: list[ModelConfig] = field(default_factory=lambda: [ModelConfig(name="tiny-reasoner")])
    traces: TracesConfig = field(default_factory=TracesConfig)
    interventions: InterventionsConfig = field(default_factory=InterventionsConfig)
    continuation: SamplingConfig = field(default_factory=SamplingConfig)
    grading: GradingConfig = field(default_factory=GradingConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)
    flush_every: int = 64  # chains per committed shard in the generation stages (bounds lost work on a kill)
    # Processes for the CPU-bound stages (rule-based interventions, grading); 0 = one per available CPU
    # (at most 8). Results do not depend on it.
    cpu_workers: int = 0
    title: str = "recovery benchmark"
    # Model swap (paper §5, Table 9): continue every chain with this model (a name in models).
    swap_to: str | None = None
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)  # where generation runs (not results)
    # Whose protocol: the project's ("default") or the authors' ("reference", `recovery.protocol`); parts of the
    # other style may be mixed in per part (``protocol_parts: {length: default}``). What each part then runs is
    # resolved once, into the run's plan (`recovery.plan.plan_for`).
    protocol: Protocol = "default"
    protocol_parts: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [m.name for m in self.models]
        if not names:
            raise ValueError("models must not be empty")
        if self.flush_every < 1:
            raise ValueError(f"flush_every must be ≥ 1, got {self.flush_every}")
        if self.cpu_workers < 0:
            raise ValueError(f"cpu_workers must be ≥ 0 (0 = one per available CPU), got {self.cpu_workers}")
        if len(set(names)) != len(names):
            raise ValueError(f"model names must be unique, got {names}")
        validate_swap_to(self.swap_to, names)
        check_protocol(self.protocol, self.protocol_parts)


def continuation_model(config: RunConfig, chain_model: str) -> ModelConfig:
    """The `ModelConfig` that continues the chains of ``chain_model``: ``swap_to``'s model when set."""
    name = config.swap_to or chain_model
    for model in config.models:
        if model.name == name:
            return model
    raise KeyError(f"model {name!r} is not among the run's models")


def model_key(config: ModelConfig) -> str:
    """What names ``config``'s model for its conventions: a GGUF's model name (from its file name), else the
    path or the config's name."""
    if config.gguf_file:
        return gguf_model_name(config.gguf_file)
    return config.path or config.name


def model_spec(config: ModelConfig) -> ModelSpec:
    """The conventions of ``config``'s model without loading its tokenizer: its ``spec``, else what its path or
    name (and ``reasoning``) say. A model whose think tags only its chat template reveals should name its
    ``spec``, so that readers of the run (the aggregate's length overhead) see the same tags as the backend."""

    return resolve_spec(config.spec, model_key(config), reasoning=config.reasoning)


class ThinkTagsOf:
    """``tags(model_name)``: a model's think tags (opener, closer), which alone decide where its responses'
    reasoning ends: from the conventions of the run's models (`model_spec`), else from what the name says
    (`recovery.models.spec_for`, looked up once per name)."""

    def __init__(self, models: Iterable[ModelConfig] = ()) -> None:
        self.known: dict[str, ThinkTags] = {model.name: model_spec(model).think_tags for model in models}

    def __call__(self, name: str) -> ThinkTags:
        if name not in self.known:
            self.known[name] = spec_for(name).think_tags
        return self.known[name]


def think_closers(models: Iterable[ModelConfig]) -> dict[str, str]:
    """Each model's closing think tag by model name, from its conventions (`ThinkTagsOf`)."""
    return {name: tags[1] for name, tags in ThinkTagsOf(models).known.items()}


def pair_label(original: str, continued: str | None) -> str:
    """The aggregate label of a chain of ``original`` continued by ``continued``.

    >>> pair_label("A", "B"), pair_label("A", "A"), pair_label("A", None)
    ('A→B', 'A', 'A')
    """
    if not continued or continued == original:
        return original
    return f"{original}{ARROW}{continued}"


def split_label(label: str) -> tuple[str, str]:
    """(original model, continuing model) of an aggregate label; a plain name continues itself.

    >>> split_label("A→B"), split_label("A")
    (('A', 'B'), ('A', 'A'))
    """
    original, arrow, continued = label.partition(ARROW)
    return (original, continued) if arrow else (label, label)
