"""Continuation prompts as raw text, ready for TRL's trainers.

Why raw text and not a conversational prompt: TRL 1.16 treats a ``prompt`` that is a list of messages as
a conversation and renders it with ``apply_chat_template(..., add_generation_prompt=True)`` — there is no
way to append an assistant *prefill*, so the policy would start a fresh answer instead of continuing the
intervened reasoning. A ``prompt`` that is a string is used verbatim: GRPOTrainer tokenizes it with
``processing_class(text=prompts)`` and SFTTrainer with ``processing_class(text=prompt)`` /
``processing_class(text=prompt + completion)``, neither applying a chat template. So the prompt is built
here, once, with the model's own template (`recovery.prompt_building.build_prompt_text`): chat template with its
generation prompt, the think opener only if the template lacks it, then the intervened reasoning verbatim.

Both trainers call the tokenizer with its default ``add_special_tokens=True``. For a tokenizer that adds a
BOS token by itself and a template that also writes ``{{ bos_token }}`` (DeepSeek-R1-Distill) that would
give two BOS tokens, so the rendered text drops its leading BOS string in exactly that case.

Text is not enough to fix the tokens, though: the benchmark presents the prefix after a hard token boundary,
which a tokenizer re-reading the text may merge. `PromptRenderer.prompt_ids` gives the benchmark's ids;
`recovery.training_data.tokens` builds SFT rows from them and checks GRPO prompts against them.

The chat is the run's continuation chat (`run_prompts`: the run's plan's prompts, `recovery.plan`), so under
``protocol: reference`` a training prompt is the one the run's continuations were given: the authors' system
message and user turn, the template rendered as given and the prefix appended as text with no think opener, the
whole text tokenized at once (`recovery.prompt_building.reference_prompt_text`). Its leading BOS is then kept
(the run's ids are the text tokenized with special tokens, what the trainers' tokenizer call gives too).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from recovery.generation import Message
from recovery.models import TINY_REASONER, ModelSpec, get_spec, is_tiny_reasoner, spec_for
from recovery.plan import plan_for
from recovery.prompt_building import (
    ChatPrompts,
    ProjectPrompts,
    continuation_ids,
    continuation_tail,
    encode_template,
    reference_prompt_ids,
    reference_prompt_text,
    render_chat,
)
from recovery.run_config import RunConfig
from recovery.toy import checkpoint_dir, has_checkpoint
from recovery.types import Problem

if TYPE_CHECKING:
    from recovery.training_data.source import RunData


def run_prompts(config: RunConfig | None) -> ChatPrompts:
    """The prompts of a run's continuations (its plan's, `recovery.plan`), or without a run the project's with the
    default user turn."""
    return ProjectPrompts() if config is None else plan_for(config).prompts


def tokenizer_adds_bos(tokenizer: Any) -> bool:
    """True when ``tokenizer(text)`` prepends the BOS token on its own."""
    bos_id = getattr(tokenizer, "bos_token_id", None)
    if bos_id is None:
        return False
    with_special = tokenizer("a")["input_ids"]
    without = tokenizer("a", add_special_tokens=False)["input_ids"]
    return bool(with_special) and with_special[0] == bos_id and without[:1] != [bos_id]


@dataclass
class PromptRenderer:
    """Renders the continuation prompt of one model: ``render(problem, prefix)`` is the exact text the
    model sees before it continues ``prefix`` (which is always the text's suffix).

    ``chat`` is the prompts the prompt shows (`recovery.prompt_building.ProjectPrompts` or ``AuthorsPrompts``;
    default: the project's, with the default user turn; `PromptRenderer.for_run` gives the run's plan's).
    """

    tokenizer: Any
    spec: ModelSpec
    chat: ChatPrompts = field(default_factory=ProjectPrompts)
    strip_bos: bool | None = None  # None: decide from the tokenizer (see module doc)
    _heads: dict[str, str] = field(default_factory=dict, repr=False)
    _templates: dict[str, tuple[str, list[int]]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.strip_bos is None:
            self.strip_bos = not self.chat.text_prefill and tokenizer_adds_bos(self.tokenizer)

    @classmethod
    def for_run(cls, tokenizer: Any, spec: ModelSpec, config: RunConfig | None) -> PromptRenderer:
        return cls(tokenizer, spec, run_prompts(config))

    def messages(self, problem: Problem) -> tuple[Message, ...]:
        return self.chat.continuation_messages(problem)

    def _template(self, problem: Problem) -> tuple[str, list[int]]:
        """The chat rendered with its generation prompt, and its token ids (cached per problem: they do not
        depend on the prefix, and jinja rendering dominates the cost of building large datasets)."""
        template = self._templates.get(problem.id)
        if template is None:
            if self.chat.text_prefill:
                rendered = reference_prompt_text(self.tokenizer, self.messages(problem), "")
            else:
                rendered = render_chat(self.tokenizer, self.spec, self.messages(problem))
            template = self._templates[problem.id] = (rendered, encode_template(self.tokenizer, rendered))
        return template

    def head(self, problem: Problem) -> str:
        """The chat rendered with its generation prompt, as text (without the BOS string when the tokenizer
        adds BOS itself: see module doc)."""
        head = self._heads.get(problem.id)
        if head is None:
            head = self._template(problem)[0]
            bos = getattr(self.tokenizer, "bos_token", None)
            if self.strip_bos and bos and head.startswith(bos):
                head = head[len(bos) :]
            self._heads[problem.id] = head
        return head

    def tail(self, problem: Problem, prefix: str) -> str:
        """What follows the head: the think opener when the template lacks it, then ``prefix`` (under the
        authors' prompts ``prefix`` alone)."""
        if self.chat.text_prefill:
            return prefix
        return continuation_tail(self.head(problem), self.spec, prefix)

    def render(self, problem: Problem, prefix: str) -> str:
        """The full prompt text for continuing ``prefix`` (reasoning without the opening think tag)."""
        text = self.head(problem) + self.tail(problem, prefix)
        if prefix and not text.endswith(prefix):
            # continuation_tail strips a prefix that carries its own opener; a chain prefix never should.
            raise ValueError(f"prefix for problem {problem.id} starts with the think opener; store reasoning only")
        return text

    def prompt_ids(self, problem: Problem, prefix: str) -> list[int]:
        """The token ids the benchmark presents before the model continues ``prefix``
        (`recovery.prompt_building.build_prompt_ids`: one BOS, the template's tokens, then the opener and
        prefix encoded after a hard token boundary; under the authors' prompts the whole text tokenized at once,
        `recovery.prompt_building.reference_prompt_ids`). Training rows are checked against, or built from, these."""
        rendered, head_ids = self._template(problem)
        if self.chat.text_prefill:
            return reference_prompt_ids(self.tokenizer, rendered + prefix)
        return continuation_ids(self.tokenizer, self.spec, rendered, head_ids, prefix)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False)) if text else 0


def renderers_for_run(data: RunData) -> dict[str, PromptRenderer] | str:
    """One `PromptRenderer` per model of a `RunData`, from the tokenizers its config names: the shipped
    tiny reasoner for ``tiny-reasoner``, else ``path`` (or the name) through ``AutoTokenizer`` (a local
    folder or the Hub cache). Returns the reason as a string when a tokenizer cannot be loaded (offline,
    no checkpoint), so callers can skip the prompt datasets and say why."""

    out: dict[str, PromptRenderer] = {}
    for model in data.config.models:
        name, path = model.name, model.path
        try:
            from transformers import AutoTokenizer

            if is_tiny_reasoner(path or name):
                if not has_checkpoint():
                    return "the tiny-reasoner checkpoint is not installed (pass a tokenizer)"
                tokenizer = AutoTokenizer.from_pretrained(str(checkpoint_dir()))
                spec = get_spec(model.spec or TINY_REASONER)
            else:
                tokenizer = AutoTokenizer.from_pretrained(path or name)
                spec = get_spec(model.spec) if model.spec else spec_for(path or name, tokenizer)
        except Exception as err:  # noqa: BLE001 - offline / missing files: skip the prompt datasets, say why
            return f"cannot load the tokenizer of {name!r}: {type(err).__name__}: {err}"
        out[name] = PromptRenderer.for_run(tokenizer, spec, data.config)
    return out
