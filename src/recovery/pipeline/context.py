"""What every stage shares: the `StageContext` (config, run directory, backends, the grader, what was
written and skipped), the `Stage` a stage module registers, and the sampling parameters and request seeds
of a stage's requests. Stages read and write the run directory through ``ctx.run``, a
`recovery.run_dir.Run`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tqdm.auto import tqdm

from recovery.generation import Generator
from recovery.grading import Grader
from recovery.model_config import ModelConfig
from recovery.pipeline.stage_log import StageLog
from recovery.plan import RunPlan
from recovery.run_config import RunConfig
from recovery.run_dir import Run, open_run

GeneratorFactory = Callable[[ModelConfig], Generator]


@dataclass
class StageContext:
    """What every stage needs: the run's plan (`recovery.plan`: what each protocol part runs, built once by the
    runner) and its ``config`` (the plan's, its grading resolved), the run directory, a backend factory, the grader, and what this
    invocation wrote (``written``: rows per stage, a stage may count rows of another, as grading alongside
    the continuations does for ``grades``), skipped and asked of the backends (``log``, a `StageLog`)."""

    plan: RunPlan
    run: Run
    make_generator: GeneratorFactory
    progress: bool = True
    n_boot: int = 2000  # bootstrap resamples of the aggregate's intervals
    written: Counter = field(default_factory=Counter)  # stage → rows this invocation wrote
    outcome: str | None = None  # why the run measured nothing, once a stage found it (`recovery.pipeline.outcome`)
    warnings: list[str] = field(default_factory=list)  # what was not measured although the run measured something
    report: str | None = None  # the report's HTML path, once the report stage wrote it
    log: StageLog = field(init=False)
    _generators: dict[str, Generator] = field(default_factory=dict)
    _grader: Any = None

    def __post_init__(self) -> None:
        self.run = open_run(self.run)  # a path or a bare `recovery.store.RunDir` is opened as a `Run`
        self.log = StageLog(self.run.tables.skips)

    @property
    def config(self) -> RunConfig:
        """The run's config as its plan resolved it (what the manifest records)."""
        return self.plan.config

    @property
    def grader(self):
        """The run's `recovery.grading.Grader` (its worker processes start on first use; `close` stops them)."""
        if self._grader is None:
            self._grader = Grader(workers=self.config.grading.workers, timeout_s=self.config.grading.timeout_s)
        return self._grader

    def generator(self, model: ModelConfig) -> Generator:
        """One backend per model, created on first use and reused by later stages."""
        if model.name not in self._generators:
            self._generators[model.name] = self.make_generator(model)
        return self._generators[model.name]

    def concurrency(self, models: Iterable[ModelConfig]) -> int:
        """How many requests a stage that asks one at a time may have in flight on these models' backends:
        a backend's ``concurrency`` (the Ray executor's replicas), else 1."""
        return max((self.generator(m).concurrency for m in models), default=1)

    def close(self) -> None:
        self.log.flush()
        for gen in self._generators.values():
            try:
                gen.close()
            except Exception:  # noqa: BLE001 — closing must not hide the run's real outcome
                pass
        self._generators.clear()
        if self._grader is not None:
            self._grader.close()
            self._grader = None

    def bar(self, iterable: Iterable | None = None, **kw: Any) -> tqdm:
        """A progress bar over ``iterable`` (or a manual one with ``total=``), silent without progress."""
        return tqdm(iterable, disable=not self.progress, dynamic_ncols=True, **kw)


@dataclass(frozen=True)
class Stage:
    """One stage of the run, registered in `recovery.pipeline.stages.STAGES` by the module that defines it:
    ``run`` reads and writes the run directory and returns how many rows it wrote (None: it writes no
    table rows, as the report)."""

    name: str
    run: Callable[[StageContext], int | None]
    description: str
    # Whether `recovery <name> CONFIG` runs this stage alone; the report has its own `recovery report RUN_DIR`,
    # which rewrites a finished run's report from its directory.
    command: bool = True
