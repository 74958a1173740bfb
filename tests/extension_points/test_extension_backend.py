"""A new backend, added as docs/architecture.md says (a settings class, a generator, its builder, one
`register` call), through `recovery run`: a deterministic one whose 'model' is the toy world's own trace writer
and teacher, so the run needs no weights. Its setting declared ``results=True`` makes a resume with another
value a refused change."""

from __future__ import annotations

from dataclasses import dataclass

from typer.testing import CliRunner

from recovery.backends.registry import BACKENDS, Backend, register
from recovery.backends.settings import SETTINGS, setting
from recovery.cli import app
from recovery.generation import GenerationResult, Sample
from recovery.models import get_spec
from recovery.run_dir import read_aggregates
from recovery.store import RunDir
from recovery.toy import recovery_continuation, write_trace
from recovery.toy.tasks import make_problem, parse_question


@dataclass
class ToyOracleSettings:
    """What a model config with ``backend: toy_oracle`` may set beside the shared keys."""

    slip_rate: float = setting(0.0, results=True)  # changes what it writes: a resume must keep it


class ToyOracle:
    """A backend whose 'model' is the toy world's own trace writer and teacher."""

    concurrency = 1  # requests a stage may keep in flight

    def __init__(self, name, settings, seed):
        self.name, self.settings, self.seed = name, settings, seed
        self.spec = get_spec("tiny-reasoner")  # the think tags its texts use

    def generate(self, requests):
        for request in requests:
            problem = make_problem(parse_question(request.messages[-1].content))
            texts = [self.write(problem, request.prefill, i) for i in range(request.sampling.n)]
            samples = tuple(Sample(text, len(text.split()), "stop") for text in texts)
            yield GenerationResult(request.request_id, samples, prompt_tokens=0)

    def write(self, problem, prefill, i):
        if prefill:  # a continuation of the (intervened) reasoning
            return recovery_continuation(problem, prefill).text
        return write_trace(problem, seed=self.seed + i, slip_rate=self.settings.slip_rate).response

    def close(self):
        pass


def build_toy_oracle(config, seed, server):
    return ToyOracle(config.name, config.settings, seed)


CONFIG = """\
run_dir: runs/oracle
dataset: {name: toy, limit: 4}
models:
  - {name: oracle, backend: toy_oracle, slip_rate: 0.1}
interventions: {names: [toy/wrong_continuation], timesteps: [0.5]}
continuation: {n: 2}
"""


def test_a_new_backend_runs_through_recovery_run(tmp_path, monkeypatch, restored, recovery_cli):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.yaml").write_text(CONFIG, encoding="utf-8")
    restored(BACKENDS)
    restored(SETTINGS)

    register(Backend("toy_oracle", ToyOracleSettings, build_toy_oracle, local_weights=False))

    recovery_cli("run", "config.yaml", "--no-progress")
    rows = read_aggregates(RunDir(tmp_path / "runs" / "oracle"))
    assert [(r["model"], r["intervention"]) for r in rows] == [("oracle", "toy/wrong_continuation")]
    assert rows[0]["majority_mean"] == 1.0  # the teacher recovers from every intervention

    (tmp_path / "config.yaml").write_text(CONFIG.replace("slip_rate: 0.1", "slip_rate: 0.2"), encoding="utf-8")
    resumed = CliRunner().invoke(app, ["run", "config.yaml", "--no-progress"])
    assert resumed.exit_code != 0 and "created with a different config (changed: models)" in resumed.output

    (tmp_path / "bad.yaml").write_text(CONFIG.replace("slip_rate", "slip_rat"), encoding="utf-8")
    refused = CliRunner().invoke(app, ["run", "bad.yaml", "--no-progress"])
    assert refused.exit_code == 2 and "slip_rat" in refused.output
