"""The tiny reasoner's tokenizer: byte-level BPE trained locally on toy-world text, with a chat template.

Byte-level, so any text (random characters, encyclopedic paragraphs) can be encoded; trained on the toy
traces plus the doubt phrases and the intervention pools, so the words the model reads most (names,
colours, ``Step``, whole numbers such as `` 12``, ``Wait``) are single tokens. The GPT-2 pre-tokenizer
keeps a run of digits together, so BPE learns each frequent number as one token.

The chat template follows DeepSeek-R1-Distill: the generation prompt already opens ``<think>``, so a
model response starts inside the reasoning and a continuation prompt is simply
``prompt + intervened reasoning``.
"""

from __future__ import annotations

from collections.abc import Iterable

USER = "<|user|>"
ASSISTANT = "<|assistant|>"
SYSTEM = "<|system|>"
END = "<|end|>"
PAD = "<|pad|>"
SPECIAL_TOKENS: tuple[str, ...] = (PAD, END, USER, ASSISTANT, SYSTEM)
# Think tags are ordinary added tokens (not "special"), so decoding with skip_special_tokens keeps them.
THINK_TOKENS: tuple[str, ...] = ("<think>", "</think>")
DEFAULT_VOCAB_SIZE = 768

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}"
    "{{ '<|system|>\n' + message['content'] + '\n' }}"
    "{%- elif message['role'] == 'user' -%}"
    "{{ '<|user|>\n' + message['content'] + '\n' }}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{{ '<|assistant|>\n' + message['content'] + '<|end|>\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{ '<|assistant|>\n<think>\n' }}"
    "{%- endif -%}"
)


def train_tokenizer(texts: Iterable[str], *, vocab_size: int = DEFAULT_VOCAB_SIZE):
    """Train the byte-level BPE on ``texts`` and wrap it as a `PreTrainedTokenizerFast`.

    Deterministic for the same texts in the same order. Padding is on the left (decoder-only batched
    generation); it is set in the constructor because it must survive `save_pretrained`.
    """
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    # The blank line between steps is isolated first so BPE can learn it as one token (it is ~8% of
    # a trace otherwise); then GPT-2's byte-level split, which keeps digit runs together.
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split("\n\n", behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=END,
        pad_token=PAD,
        padding_side="left",
        chat_template=CHAT_TEMPLATE,
        model_max_length=1024,
    )
    fast.add_tokens(list(THINK_TOKENS))
    return fast


def prompt_text(tokenizer, question: str) -> str:
    """The chat-templated prompt for ``question``, ending with the opened think block."""
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": question}], add_generation_prompt=True, tokenize=False
    )
