"""The tiny reasoner's data: the SFT examples, the tokenizer's training text and the held-out set.

The held-out set is drawn with its own seed (`HELDOUT_SEED`), far from any training index, and training
problems whose question also appears in it are dropped, so the accuracy test measures generalisation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from recovery.ids import item_rng
from recovery.segment import STEP_SEPARATOR
from recovery.toy.layouts import Layout, vary_layout
from recovery.toy.pool import TOY_PARAGRAPHS
from recovery.toy.steps import DOUBT_PHRASES, PARAPHRASED_OPENERS, render_position
from recovery.toy.tasks import (
    ToyTaskConfig,
    generate_problem,
    generate_problems,
    spec_of,
)
from recovery.toy.tokenizer import prompt_text
from recovery.toy.traces import DEFAULT_SLIP_RATE, ToyTrace, finish_response, write_trace
from recovery.types import Problem

HELDOUT_SEED = 1_000_000
HELDOUT_SIZE = 1000  # problems reserved; tests and benchmarks use a prefix of them
NUMBER_TOKENS = 64  # 0..63 cover every running total (max_value 50) and nearby wrong values


def heldout_problems(n: int = 200, *, config: ToyTaskConfig | None = None) -> list[Problem]:
    """The first ``n`` problems of the fixed held-out set (both families, alternating)."""
    if n > HELDOUT_SIZE:
        raise ValueError(f"the held-out set has {HELDOUT_SIZE} problems, asked for {n}")
    return generate_problems(n, seed=HELDOUT_SEED, config=config)


def training_traces(
    n: int,
    *,
    seed: int = 0,
    slip_rate: float = DEFAULT_SLIP_RATE,
    config: ToyTaskConfig | None = None,
    checks: bool = False,
) -> list[ToyTrace]:
    """``n`` training traces from problems ``0, 1, …`` of ``seed``, skipping held-out questions
    (``checks``: the self-checking style, `recovery.toy.traces.write_trace`)."""
    held = {p.question for p in heldout_problems(HELDOUT_SIZE, config=config)}
    traces: list[ToyTrace] = []
    idx = 0
    while len(traces) < n:
        problem = generate_problem(idx, seed=seed, config=config)
        idx += 1
        if problem.question in held:
            continue
        traces.append(write_trace(problem, seed=seed, slip_rate=slip_rate, checks=checks))
    return traces


def sft_records(traces: Sequence[ToyTrace], tokenizer) -> list[dict[str, str]]:
    """Prompt/completion records for TRL's `SFTTrainer` (plain strings; TRL appends the EOS token)."""

    return [{"prompt": prompt_text(tokenizer, t.problem.question), "completion": t.response} for t in traces]


def laid_out(trace: ToyTrace, *, layout_rate: float, seed: int) -> Layout:
    """``trace``'s question and steps, laid out anew (`recovery.toy.layouts.vary_layout`) with probability
    ``layout_rate``; the draw comes from the trace's own generator, so it depends on (seed, problem) only."""
    if not 0.0 <= layout_rate <= 1.0:
        raise ValueError(f"layout_rate must lie in [0, 1], got {layout_rate}")
    rng = item_rng(seed, "toy-layout", trace.problem.id)
    if rng.random() < layout_rate:
        return vary_layout(trace.problem.question, trace.steps, rng)
    return Layout(trace.problem.question, trace.steps)


def training_examples(
    traces: Sequence[ToyTrace],
    tokenizer,
    *,
    layout_rate: float = 0.0,
    mask_slips: bool = False,
    mask_reactions: bool = False,
    seed: int = 0,
) -> list[dict]:
    """SFT examples for TRL's `SFTTrainer`, with ``layout_rate`` of them laid out anew (`laid_out`).

    Without masks: prompt/completion strings, as `sft_records`. With one: pre-tokenised ``input_ids`` and a
    ``completion_mask`` that is 0 on the prompt and on what is masked (TRL honours a given mask):
    ``mask_slips``, a slip's wrong step, so the model learns to doubt and redo a wrong step without
    learning to write one; ``mask_reactions``, the doubt and corrected step that answer a slip, so the
    model learns to check a wrong step but not what to do when its check disagrees (recovery training's
    part, measured by the demo).
    """

    examples: list[dict] = []
    for trace in traces:
        layout = laid_out(trace, layout_rate=layout_rate, seed=seed)
        response = finish_response(STEP_SEPARATOR.join(layout.steps) + "\n", trace.answer)
        prompt = prompt_text(tokenizer, layout.question)
        if not (mask_slips or mask_reactions):
            examples.append({"prompt": prompt, "completion": response})
            continue
        masked = [trace.slip_step] if mask_slips else []
        masked += [trace.reaction_step] if mask_reactions else []
        unlearnt = [layout.moved(index) for index in masked if index is not None]
        examples.append(_masked_example(tokenizer, prompt, response, layout.steps, unlearnt))
    return examples


def _masked_example(tokenizer, prompt: str, response: str, steps: tuple[str, ...], unlearnt: list[int]) -> dict:
    prompt_ids = tokenizer(prompt, add_special_tokens=False).input_ids
    encoded = tokenizer(response, add_special_tokens=False, return_offsets_mapping=True)
    mask = [1] * len(encoded.input_ids)
    for index in unlearnt:
        start = len(STEP_SEPARATOR.join(steps[:index])) + len(STEP_SEPARATOR)
        end = start + len(steps[index])
        if response[start:end] != steps[index]:  # the response is built from these steps: cannot happen
            raise AssertionError(f"step {index} not found where expected in {response!r}")
        # Every token that overlaps the step goes unlearnt (BPE may merge its edge with a neighbour).
        mask = [0 if s < end and e > start else m for m, (s, e) in zip(mask, encoded.offset_mapping)]
    return {
        "input_ids": prompt_ids + encoded.input_ids + [tokenizer.eos_token_id],
        "completion_mask": [0] * len(prompt_ids) + mask + [1],
    }


def tokenizer_corpus(traces: Sequence[ToyTrace], *, extra: Iterable[str] = ()) -> list[str]:
    """Text the BPE is trained on: questions and traces, plus the texts interventions and the teacher
    write (other styles, doubt phrases, the paragraph pool, topics), so those stay cheap in tokens."""
    texts: list[str] = []
    for t in traces:
        texts.append(t.problem.question)
        texts.append(t.response)
    for t in traces[:500]:
        spec = spec_of(t.problem)
        for style in ("paraphrase", "other"):
            texts.extend(render_position(spec, p, style) for p in range(spec.n_ops + 2))
    # Every number a trace can hold becomes one token, with and without a leading space (" 45", "{45}").
    texts.extend(f"= {n}. \\boxed{{{n}}}" for n in range(NUMBER_TOKENS) for _ in range(20))
    texts.extend(DOUBT_PHRASES * 20)
    texts.extend(PARAPHRASED_OPENERS.values())
    texts.extend(TOY_PARAGRAPHS)
    texts.extend(extra)
    return texts
