"""recovery.analysis.doubt_judge: the paper's LLM doubt judge (App. D.2) and the detector interface.

No judge LLM can run here: the judge's replies come from scripted generators that implement the real
backend protocols (`recovery.backends.Generator`, `TextGenerator`); one test drives the judge through the
real HF backend with the tiny reasoner, which cannot answer Yes/No, to check that such replies are counted
skips and never a crash.
"""

from __future__ import annotations

import pytest

from recovery.analysis.doubt_judge import (
    DOUBT_JUDGE_SYSTEM,
    DOUBT_JUDGE_USER,
    DoubtDetector,
    DoubtJudge,
    DoubtJudgeConfig,
    LexicalDetector,
    UnusableReply,
    load_judge_config,
    make_judge,
    parse_doubt_reply,
)
from recovery.configs import ConfigError
from recovery.doubt import is_doubt
from recovery.generation import GenerationResult, Sample


@pytest.mark.parametrize(
    "reply,doubt,reason",
    [
        ("Yes", True, ""),
        ("No", False, ""),
        (" yes.", True, ""),
        ("NO", False, ""),
        ("**Yes**", True, ""),
        ("'No'", False, ""),
        ("Answer: Yes", True, ""),
        ("Final answer - no", False, ""),
        ("Yes, because it says wait.", True, ""),
        ("<think>It says 'no'. Hmm.</think>\n\nNo", False, ""),
        ("I would say yes.", True, ""),
        ("\u201cYes\u201d", True, ""),
        ("Yes or No?", None, "ambiguous"),
        ("Maybe", None, "no_yes_or_no"),
        ("", None, "empty"),
        ("  \n", None, "empty"),
        ("<think>Let me think about whether", None, "unfinished_thinking"),
        (None, None, "not_text"),
        ("Nope", None, "no_yes_or_no"),  # not a Yes/No word
        (
            "The sentence restates a computation and does not question the earlier steps at all, so no",
            None,
            "no_yes_or_no",
        ),  # a long explanation without an answer up front is not guessed from
    ],
)
def test_parse_doubt_reply(reply, doubt, reason):
    parsed = parse_doubt_reply(reply)
    assert (parsed.doubt, parsed.reason) == (doubt, reason)


class ScriptedBackend:
    """A `recovery.backends.Generator` standing in for the judge LLM: answers by a script keyed on a word
    of the sentence, returns results in reverse order (backends may reorder), and records every request."""

    concurrency = 1  # the Generator protocol: one request in flight

    name = "scripted"

    def __init__(self, script: dict[str, str | None], fail_on: str | None = None):
        self.script, self.fail_on = script, fail_on
        self.batches: list[list] = []
        self.closed = False

    def generate(self, requests):
        self.batches.append(list(requests))
        if self.fail_on and any(self.fail_on in r.messages[-1].content for r in requests):
            raise ConnectionError("server went away")
        for r in reversed(requests):
            sentence = r.messages[-1].content
            reply = next((v for k, v in self.script.items() if k in sentence), "Maybe")
            if reply is None:
                yield GenerationResult(r.request_id, (), prompt_tokens=0, error="context too long")
            else:
                yield GenerationResult(r.request_id, (Sample(reply, 1, "stop"),), prompt_tokens=10)

    def close(self):
        self.closed = True


def test_judge_sends_the_paper_prompt_greedily_in_batches():
    backend = ScriptedBackend({"Wait": "Yes", "So": "No"})
    judge = DoubtJudge(backend, batch_size=2)
    sentences = ["Wait, no.", "So x = 2.", "Wait, no.", "So y = 3.", "So z = 4.", "So x = 2."]
    assert judge.classify(sentences) == [True, False, True, False, False, False]
    # 4 distinct sentences → 2 batches of ≤2 requests; repeats are not asked again
    assert [len(b) for b in backend.batches] == [2, 2] and judge.calls == 4
    request = backend.batches[0][0]
    system, user = request.messages
    assert (system.role, system.content) == ("system", DOUBT_JUDGE_SYSTEM)
    assert user.role == "user"
    assert user.content == (
        "Consider the following text: Wait, no.. Does this text indicate that the previous "
        "reasoning contains errors or irrelevant information? Answer with Yes or No."
    )
    assert "PRIOR reasoning contains an error or irrelevant information" in DOUBT_JUDGE_SYSTEM
    assert "{sentence_or_segment}" in DOUBT_JUDGE_USER
    sampling = request.sampling
    assert (sampling.n, sampling.temperature, sampling.top_p, sampling.top_k) == (1, 0.0, 1.0, None)  # Table 15: greedy
    assert judge("So z = 4.") is False and judge.calls == 4  # cached
    assert judge.skips == {}


def test_judge_counts_unusable_replies_and_failures_instead_of_crashing():
    backend = ScriptedBackend({"Wait": "Yes", "odd": "Well, it depends", "long": None, "boom": "Yes"}, fail_on="boom")
    judge = DoubtJudge(backend, batch_size=4)
    out = judge.classify(["Wait.", "An odd one.", "A long one.", "Wait."])
    assert out == [True, None, None, True]
    assert judge.skips == {"no_yes_or_no": 1, "generator_error": 1}
    assert judge.examples["no_yes_or_no"] == "Well, it depends"
    assert judge.examples["generator_error"] == "context too long"
    # a backend exception takes down only its batch, each sentence counted
    assert judge.classify(["boom one.", "boom two."]) == [None, None]
    assert judge.skips["generator_error"] == 3
    with pytest.raises(UnusableReply, match="no_yes_or_no") as err:
        judge("An odd one.")
    assert err.value.reason == "no_yes_or_no" and err.value.reply == "Well, it depends"


def test_judge_over_a_text_generator():
    seen = []

    def chat(messages, decoding):
        seen.append(decoding)
        if "boom" in messages[-1].content:
            raise TimeoutError("slow")
        return "No." if "fine" in messages[-1].content else "Yes"

    judge = DoubtJudge(chat, max_new_tokens=5)
    assert judge.classify(["All fine.", "Hmm.", "boom"]) == [False, True, None]
    assert all(d.temperature == 0.0 and d.max_new_tokens == 5 for d in seen)
    assert judge.skips == {"generator_error": 1} and "TimeoutError: slow" in judge.examples["generator_error"]


def test_lexical_detector_has_the_same_interface():
    lexical = LexicalDetector()
    sentences = ["Wait, is that right?", "So the sum is 12.", "Let me double-check."]
    assert lexical.classify(sentences) == [is_doubt(s) for s in sentences] == [True, False, True]
    assert lexical("Hold on.") is True
    assert isinstance(lexical, DoubtDetector) and isinstance(DoubtJudge(ScriptedBackend({})), DoubtDetector)
    with pytest.raises(TypeError):
        DoubtJudge(42)
    with pytest.raises(ValueError):
        DoubtJudge(ScriptedBackend({}), batch_size=0)


def test_judge_config_file(tmp_path):
    path = tmp_path / "judge.yaml"
    path.write_text("model: {name: qwen, backend: openai, base_url: 'http://localhost:8000/v1'}\nbatch_size: 128\n")
    config = load_judge_config(path)
    assert config.model.name == "qwen" and config.model.backend == "openai" and config.batch_size == 128
    assert config.max_new_tokens == 8
    built = []
    judge = make_judge(config, make_generator=lambda m: built.append(m) or ScriptedBackend({}))
    assert built == [config.model] and judge.batch_size == 128
    path.write_text("model: {name: qwen}\nbatch_sise: 4\n")
    with pytest.raises(ConfigError, match="did you mean 'batch_size'"):
        load_judge_config(path)
    with pytest.raises(ValueError):
        DoubtJudgeConfig(model=config.model, max_new_tokens=0)


def test_judge_through_the_real_hf_backend_with_the_tiny_reasoner():
    """The tiny reasoner was never taught Yes/No: its replies must come back as counted skips."""
    pytest.importorskip("torch")
    from recovery.backends.registry import make_generator
    from recovery.model_config import ModelConfig
    from recovery.toy import has_checkpoint

    if not has_checkpoint():
        pytest.skip("tiny reasoner checkpoint not shipped")
    judge = make_judge(
        DoubtJudgeConfig(model=ModelConfig(name="tiny-judge", path="tiny-reasoner")), make_generator=make_generator
    )
    try:
        verdicts = judge.classify(["Wait, no.", "So 3 + 4 = 7.", "Wait, no."])
    finally:
        judge.generator.close()
    assert judge.calls == 2  # the repeated sentence is asked once
    skipped = sum(judge.skips.values())
    assert skipped == sum(v is None for v in verdicts)
    assert all(reason in {"no_yes_or_no", "ambiguous", "empty", "generator_error"} for reason in judge.skips)
    for verdict, sentence in zip(verdicts, ["Wait, no.", "So 3 + 4 = 7.", "Wait, no."]):
        assert verdict is None or isinstance(verdict, bool), sentence


def test_docstring_examples():
    import doctest

    import recovery.analysis.agreement
    import recovery.analysis.doubt_judge

    for module in (recovery.analysis.doubt_judge, recovery.analysis.agreement):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__
