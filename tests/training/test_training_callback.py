"""`MiniBench` and `RobustnessCallback` mechanics on a tiny random Llama (texts are gibberish; the tests check
what runs when, train/eval mode, rank logic, the vLLM glue and failure handling).

The callback in a real training run with W&B is in test_training_wandb.py; with GRPO in test_training_grpo.py.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from transformers import TrainerControl, TrainerState, TrainingArguments

from recovery.run_config import InterventionsConfig, SamplingConfig
from recovery.training.callback import RobustnessCallback, RobustnessCallbackConfig
from recovery.training.minibench import MiniBench, MiniBenchConfig, run_minibench

INTERVENTIONS = ["toy/wrong_continuation", "toy/random_characters"]
TIMESTEPS = [0.3, 0.7]
SMALL = {
    "n_problems": 2,
    "interventions": InterventionsConfig(names=INTERVENTIONS, timesteps=TIMESTEPS),
    "continuation": SamplingConfig(n=2, max_new_tokens=12),
    "spec": "tiny-reasoner",
}


def small_config(**overrides) -> RobustnessCallbackConfig:
    return RobustnessCallbackConfig(**{**SMALL, "raise_errors": True, **overrides})


@pytest.fixture(scope="module")
def args(tmp_path_factory):
    return TrainingArguments(output_dir=str(tmp_path_factory.mktemp("out")), use_cpu=True, report_to=[])


def state_at(step: int, main: bool = True) -> TrainerState:
    state = TrainerState()
    state.global_step = step
    state.is_world_process_zero = main
    return state


def test_minibench_measures_restores_train_mode_and_is_reproducible(tiny_model, toy_tokenizer):
    config = MiniBenchConfig(**SMALL)
    bench = MiniBench(config)
    assert len(bench.chains) == 2 * 2 * 2 and not bench.skips
    tiny_model.train()
    first = run_minibench(tiny_model, toy_tokenizer, bench=bench)
    assert tiny_model.training  # HFGenerator switched it to eval; it is back in train mode
    second = run_minibench(tiny_model, toy_tokenizer, bench=bench)
    assert first.per_timestep == second.per_timestep  # per-request seeds: same model, same numbers
    assert {r["intervention"] for r in first.per_intervention} == set(INTERVENTIONS)
    assert {(r["intervention"], r["timestep"]) for r in first.per_timestep} == {
        (iv, t) for iv in INTERVENTIONS for t in TIMESTEPS
    }
    assert first.n_chains == 8 and first.n_continuations == 16 and first.clean_accuracy is not None
    scalars = first.scalars()
    for iv in ("toy_wrong_continuation", "toy_random_characters", "mean"):
        for key in ("majority", "at_least_once", "all", "length_overhead_pct", "doubt_rate"):
            assert math.isfinite(scalars[f"robustness/{iv}/{key}"])
    assert "robustness/toy_random_characters/majority_t0.7" in scalars
    assert scalars["robustness/n_chains"] == 8.0


def test_llm_backed_interventions_are_refused():
    with pytest.raises(ValueError, match="intervention LLM"):
        MiniBench(
            MiniBenchConfig(
                n_problems=1, interventions=InterventionsConfig(names=["wrong_continuation"], timesteps=[0.5])
            )
        )


def test_every_k_steps_and_one_evaluation_per_step(args, tiny_model, toy_tokenizer):
    callback = RobustnessCallback(small_config(every_k_steps=2, include_clean=False), tokenizer=toy_tokenizer)
    state, control = state_at(0), TrainerControl()
    for step in range(1, 5):
        state.global_step = step
        callback.on_step_end(args, state, control, model=tiny_model)
        callback.on_evaluate(args, state, control, model=tiny_model)  # same step: not run twice
    assert [step for step, _ in callback.results] == [1, 2, 3, 4]  # on_evaluate ran at 1 and 3
    logged = [row["step"] for row in state.log_history if "robustness/mean/majority" in row]
    assert logged == [1, 2, 3, 4]

    only_k = RobustnessCallback(
        small_config(every_k_steps=2, on_evaluate=False, include_clean=False), tokenizer=toy_tokenizer
    )
    state = state_at(0)
    for step in range(1, 6):
        state.global_step = step
        only_k.on_step_end(args, state, control, model=tiny_model)
        only_k.on_evaluate(args, state, control, model=tiny_model)
    assert [step for step, _ in only_k.results] == [2, 4]


def test_non_main_rank_waits_and_logs_what_the_main_rank_broadcasts(args, tiny_model, toy_tokenizer, monkeypatch):
    callback = RobustnessCallback(small_config(), tokenizer=toy_tokenizer)
    calls: list[str] = []
    monkeypatch.setattr(MiniBench, "run", lambda self, generator: pytest.fail("a non-main rank generated"))
    monkeypatch.setattr(callback, "_barrier", lambda a: calls.append("barrier"))
    monkeypatch.setattr(
        callback,
        "_broadcast",
        lambda metrics, a: calls.append(f"broadcast:{metrics}") or {"robustness/mean/majority": 0.5},
    )
    state = state_at(3, main=False)
    tiny_model.train()
    assert callback.evaluate(args, state, model=tiny_model) is None
    assert calls == ["barrier", "broadcast:None"]  # it waited, and sent nothing of its own
    assert state.log_history[-1] == {"robustness/mean/majority": 0.5, "step": 3}
    assert callback.results == [] and tiny_model.training


def test_main_rank_reaches_the_barrier_even_when_the_benchmark_fails(args, tiny_model, toy_tokenizer, monkeypatch):
    callback = RobustnessCallback(small_config(raise_errors=False), tokenizer=toy_tokenizer)
    calls: list[str] = []
    monkeypatch.setattr(callback, "_barrier", lambda a: calls.append("barrier"))

    def boom(self, generator):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(MiniBench, "run", boom)
    state = state_at(5)
    tiny_model.train()
    assert callback.evaluate(args, state, model=tiny_model) is None
    assert calls == ["barrier"] and callback.failures == 1 and tiny_model.training
    assert state.log_history[-1] == {"robustness/failed": 1.0, "step": 5}


def test_gradient_checkpointing_resumes_with_the_runs_own_kwargs(tmp_path, tiny_model, toy_tokenizer, monkeypatch):
    """Generation pauses gradient checkpointing; training must go on with the run's kwargs, not transformers'
    defaults (TRL < 1.16 re-enables it without them; the callback puts them back)."""
    from accelerate import Accelerator

    kwargs = {"use_reentrant": False, "preserve_rng_state": False}
    run_args = TrainingArguments(
        output_dir=str(tmp_path),
        use_cpu=True,
        report_to=[],
        gradient_checkpointing=True,
        gradient_checkpointing_kwargs=kwargs,
    )
    tiny_model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    enabled: list = []
    enable = tiny_model.gradient_checkpointing_enable
    monkeypatch.setattr(
        tiny_model,
        "gradient_checkpointing_enable",
        lambda gradient_checkpointing_kwargs=None: (
            enabled.append(gradient_checkpointing_kwargs)
            or enable(gradient_checkpointing_kwargs=gradient_checkpointing_kwargs)
        ),
    )
    trainer = SimpleNamespace(accelerator=Accelerator(cpu=True), model=tiny_model, model_wrapped=tiny_model)
    callback = RobustnessCallback(small_config(include_clean=False), trainer=trainer, tokenizer=toy_tokenizer)
    tiny_model.train()
    assert callback.evaluate(run_args, state_at(1), model=tiny_model) is not None
    assert tiny_model.is_gradient_checkpointing and enabled and enabled[-1] == kwargs


class FakeCompletion:
    def __init__(self, text, token_ids):
        self.text, self.token_ids, self.finish_reason = text, token_ids, "stop"


class FakeLLM:
    """Stands in for a colocated ``vllm.LLM``: answers every prompt with a closed, correct-looking text."""

    def __init__(self):
        self.prompts, self.params, self.events = [], [], []

    def generate(self, prompts, params, use_tqdm=False):
        self.prompts += prompts
        self.params += params
        return [
            SimpleNamespace(
                prompt_token_ids=p["prompt_token_ids"],
                num_cached_tokens=0,
                outputs=[FakeCompletion("So 7.\n</think>\n\nThe answer is \\boxed{7}.", [1, 2, 3])] * s["n"],
            )
            for p, s in zip(prompts, params)
        ]

    def wake_up(self, tags=None):
        self.events.append(("wake_up", tuple(tags or ())))

    def sleep(self, level=1):
        self.events.append(("sleep", level))


@pytest.mark.parametrize("sleep_mode", [False, True])
def test_colocated_vllm_engine_is_used_with_fresh_weights(args, toy_tokenizer, sleep_mode):
    llm = FakeLLM()
    synced: list[int] = []
    vg = SimpleNamespace(
        mode="colocate",
        tensor_parallel_size=1,
        llm=llm,
        enable_sleep_mode=sleep_mode,
        max_model_length=None,
        _llm_weights_sleeping=sleep_mode,
        sync_weights=lambda: synced.append(1),
    )
    trainer = SimpleNamespace(
        vllm_generation=vg,
        _last_loaded_step=-1,
        processing_class=toy_tokenizer,
        model=SimpleNamespace(config=SimpleNamespace(_name_or_path="tiny-reasoner")),
    )
    callback = RobustnessCallback(small_config(), trainer=trainer)
    callback.vllm_params_class = dict  # no vllm here: plain dicts stand in for vllm.SamplingParams
    state = state_at(4)
    result = callback.evaluate(args, state)
    assert synced == [1] and trainer._last_loaded_step == 4  # weights pushed to the engine for this step
    n_requests = len(callback.bench.requests())
    assert len(llm.prompts) == n_requests and all(p["n"] == 2 and p["seed"] is not None for p in llm.params)
    assert result.clean_accuracy is not None and result.n_chains == 8
    if sleep_mode:
        assert llm.events == [("wake_up", ("kv_cache",)), ("sleep", 2)] and vg._llm_weights_sleeping
    else:
        assert llm.events == []
    assert state.log_history[-1]["robustness/n_chains"] == 8.0


def test_vllm_server_mode_falls_back_to_hf_and_backend_vllm_insists(toy_tokenizer):
    trainer = SimpleNamespace(vllm_generation=SimpleNamespace(mode="server", llm=None))
    assert RobustnessCallback(small_config(), trainer=trainer)._vllm_engine() is None
    with pytest.raises(ValueError, match="colocated"):
        RobustnessCallback(small_config(backend="vllm"), trainer=trainer)._vllm_engine()


def test_register_train_commands_passes_the_recipe_and_overrides(monkeypatch, tmp_path):
    import typer
    from typer.testing import CliRunner

    from recovery.training import commands

    seen = []
    monkeypatch.setattr(commands, "train", lambda stage, argv: seen.append((stage, list(argv))))
    app = typer.Typer()

    @app.command()
    def other() -> None:  # a second command, as in the real CLI
        pass

    commands.register_train_commands(app)
    recipe = tmp_path / "r.yaml"
    recipe.write_text("max_steps: 1\n")
    result = CliRunner().invoke(app, ["train", "grpo", "--config", str(recipe), "--max_steps", "3", "--beta", "0.1"])
    assert result.exit_code == 0, result.output
    assert seen == [("grpo", ["--config", str(recipe), "--max_steps", "3", "--beta", "0.1"])]


def test_wandb_config_names_the_chains_measured_and_the_run_config():
    from recovery.training.minibench import DEFAULT_TIMESTEPS
    from recovery.training.minibench_chains import toy_items

    items = toy_items(3, seed=0)
    config = RobustnessCallbackConfig(
        n_problems=2,
        interventions=InterventionsConfig(names=["toy/random_characters"], timesteps=[0.3, 0.5, 0.7]),
        continuation=SamplingConfig(n=3, max_new_tokens=320),
    )
    callback = RobustnessCallback(config, items=items, run_config={"clean_fraction": 0.5, "reward_funcs": ["doubt"]})
    values = callback.wandb_config()
    assert values["clean_fraction"] == 0.5 and values["reward_funcs"] == ["doubt"]  # as given
    assert values["robustness/source"] == "items"  # not the config's default "toy": the items given
    assert values["robustness/interventions"] == ["toy/random_characters"]
    assert values["robustness/timesteps"] == list(DEFAULT_TIMESTEPS)  # timesteps None: the defaults, resolved
    assert values["robustness/problems"] == sorted(p.id for p, _ in items[:2])
    assert values["robustness/n_problems"] == 2
    assert values["robustness/n_chains"] == len(callback.bench.chains) and values["robustness/continuation.n"] == 3
    assert not [k for k in values if k.endswith(("/prefix", "/wandb_curves", "/raise_errors"))]


class _FixedReplies:
    """A backend that answers every request with the same text, for a model whose reasoning closes with
    ``</thought>``: what the mini-benchmark does with the text is under test, not generation."""

    concurrency = 1  # the Generator protocol: one request in flight

    name = "fixed"

    def __init__(self, tail: str) -> None:
        from recovery.models import ModelSpec

        self.spec = ModelSpec(name="thought-model", hub_id=None, family="test", think_close="</thought>")
        self.reply = "Let me redo the last step carefully.\n\nSo the result stands.</thought>" + tail

    def generate(self, requests):
        from recovery.generation import GenerationResult, Sample

        for request in requests:
            sample = Sample(self.reply, n_tokens=len(self.reply), finish_reason="stop")
            yield GenerationResult(request.request_id, (sample,) * request.sampling.n, prompt_tokens=1)

    def close(self) -> None:
        pass


def test_minibench_lengths_end_at_the_models_own_closing_tag():
    """The length overhead counts the reasoning up to the generator's own closing tag: what follows it (the
    answer) changes nothing, however long it is."""
    bench = MiniBench(MiniBenchConfig(**SMALL))
    short = bench.run(_FixedReplies(" \\boxed{1}")).scalars()
    long = bench.run(_FixedReplies(" \\boxed{1}" + " and some words after the reasoning" * 40)).scalars()
    key = "robustness/mean/length_overhead_pct"
    assert math.isfinite(short[key]) and short[key] == long[key]


def test_a_registered_backend_with_a_live_form_generates_with_the_trainers_model(args, tiny_model, toy_tokenizer):
    """The callback takes its backends from the registry: one registered with a ``live`` form is the one that
    generates with the trainer's model (here a recording wrapper around the HF backend's live form)."""
    from recovery.backends.registry import BACKENDS, Backend, backend_named, register
    from recovery.backends.settings import SETTINGS, HFSettings

    built = []

    def live(model, tokenizer, spec, **options):
        built.append(model)
        return backend_named("hf").live(model, tokenizer, spec, **options)

    hf = backend_named("hf")
    register(Backend("recording-hf", HFSettings, hf.build, live=live))
    try:
        callback = RobustnessCallback(
            small_config(backend="recording-hf", include_clean=False), tokenizer=toy_tokenizer
        )
        callback.on_evaluate(args, state_at(1), TrainerControl(), model=tiny_model)
        assert built == [tiny_model] and [step for step, _ in callback.results] == [1]
        with pytest.raises(ValueError, match="backend must be one of"):
            small_config(backend="openai")  # a server cannot hold the trainer's weights: it has no live form
    finally:
        BACKENDS.pop("recording-hf", None)
        SETTINGS.pop("recording-hf", None)


def test_an_evaluation_at_a_logging_step_keeps_the_trainers_own_log(tmp_path, tiny_model, toy_tokenizer):
    """The callback logs at the end of a step through ``Trainer.log``, whose ``on_log`` clears the step's
    ``should_log``: without putting it back, every step the callback measured lost the trainer's own log (its
    loss; with GRPO the rewards, KL and lengths), so a curve logged every k steps had holes at each evaluation."""
    from datasets import Dataset
    from transformers import Trainer

    ids = toy_tokenizer("Start with 3. Step A: add 4. 3 + 4 = 7.")["input_ids"]
    dataset = Dataset.from_dict({"input_ids": [ids] * 4, "labels": [ids] * 4})
    args = TrainingArguments(
        output_dir=str(tmp_path),
        use_cpu=True,
        max_steps=3,
        per_device_train_batch_size=1,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        disable_tqdm=True,
    )
    trainer = Trainer(model=tiny_model, args=args, train_dataset=dataset, processing_class=toy_tokenizer)
    RobustnessCallback(small_config(every_k_steps=1, include_clean=False)).attach(trainer)
    trainer.train()
    history = trainer.state.log_history
    assert [e["step"] for e in history if "robustness/mean/majority" in e] == [1, 2, 3]
    assert [e["step"] for e in history if "loss" in e] == [1, 2, 3]
