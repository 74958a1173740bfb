"""The shipped protocol data: App. D.1 templates, Table 15 decoding, Table 17 topics."""

from __future__ import annotations

from importlib import resources

import pytest

from recovery.generation import Decoding
from recovery.interventions import PromptTemplate, decoding_for, load_templates, load_topics, template_for

LLM_NAMES = ("complete_step", "paraphrase", "wrong_continuation", "hallucinated_fact", "unrelated_cot")
PAPER_TITLE = "Are Reasoning LLMs Robust to Interventions on their Chain-of-Thought?"


def test_templates_cover_the_five_llm_interventions() -> None:
    assert set(load_templates()) == set(LLM_NAMES)


@pytest.mark.parametrize(
    ("name", "sentence"),
    [
        ("complete_step", "produce the NEXT SINGLE reasoning step that logically follows and moves towards"),
        ("paraphrase", "Separate each step with exactly TWO newline characters. Do not leave out any details."),
        ("wrong_continuation", "THE NEXT SINGLE reasoning step that sounds plausible yet is factually or logically"),
        ("hallucinated_fact", "fabricate ONE new mathematical statement (theorem, lemma, corollary, or definition)"),
        ("unrelated_cot", 'the sentence might be "Okay, so I need to think about how quantum entanglement works."'),
    ],
)
def test_system_prompts_contain_paper_sentences(name: str, sentence: str) -> None:
    assert sentence in template_for(name).system


def test_user_templates_exact() -> None:
    assert template_for("complete_step").user == "Problem:\n<Q>\nReasoning so far:\n<R>\nNext step:"
    assert template_for("paraphrase").user == "Problem:\n<Q>\nOriginal reasoning trace:\n<R>\nRewritten trace:"
    assert template_for("wrong_continuation").user == "Problem:\n<Q>\nReasoning so far:\n<R>\nNext (incorrect) step:"
    assert template_for("hallucinated_fact").user == "Problem:\n<Q>\nReasoning so far:\n<R>\nWrong statement:"
    assert template_for("unrelated_cot").user == "Topic: <TOPIC>\nUnrelated reasoning step about <TOPIC>:"


def test_templates_match_paper_verbatim(paper_text: str) -> None:
    for name in LLM_NAMES:
        template = template_for(name)
        assert f"SYSTEM: {template.system}\nUSER:\n{template.user}\n" in paper_text, name


def test_render_is_single_pass() -> None:
    system, user = template_for("complete_step").render(Q="Is <R> a tag?", R="step one")
    assert system.role == "system" and user.role == "user"
    assert user.content == "Problem:\nIs <R> a tag?\nReasoning so far:\nstep one\nNext step:"
    with pytest.raises(KeyError, match="<TOPIC>"):
        template_for("unrelated_cot").render(Q="x")
    with pytest.raises(KeyError, match="known"):
        template_for("nope")
    assert isinstance(template_for("paraphrase"), PromptTemplate)


def test_topics_are_table_17() -> None:
    topics = load_topics()
    assert len(topics) == 100 and len(set(topics)) == 100
    assert topics[0] == "Quantum entanglement" and topics[-1] == "Ottoman architecture"
    assert "Möbius strip" in topics and "Saturn’s rings" in topics and "Riemann hypothesis" in topics


def test_topics_match_paper(paper_text: str) -> None:
    start = paper_text.index("Quantum entanglement\tNeural style transfer")
    end = paper_text.index("Table 17:")
    cells = [cell.strip() for line in paper_text[start:end].strip().splitlines() for cell in line.split("\t")]
    assert tuple(cells) == load_topics()


def test_decoding_follows_table_15() -> None:
    greedy = Decoding(temperature=0.0, top_p=1.0, top_k=None, seed=None)
    assert decoding_for("complete_step") == greedy
    assert decoding_for("paraphrase", max_new_tokens=8192) == Decoding(0.0, 1.0, None, None, 8192)
    sampled = Decoding(temperature=0.7, top_p=0.9, top_k=None, seed=80129)
    assert decoding_for("wrong_continuation") == sampled
    assert decoding_for("hallucinated_fact") == sampled
    assert decoding_for("unrelated_cot") == Decoding(temperature=1.0, top_p=0.9, top_k=None, seed=80129)
    assert decoding_for("doubt_classification") == greedy
    assert decoding_for("continuation") == Decoding(temperature=0.6, top_p=0.95, top_k=None, seed=None)
    for no_llm in ("random_characters", "wikipedia_text"):
        with pytest.raises(ValueError, match="no LLM"):
            decoding_for(no_llm)


@pytest.mark.parametrize(
    ("filename", "citation"),
    [
        ("intervention_templates.yaml", "Appendix D.1"),
        ("decoding.yaml", "Table 15"),
        ("unrelated_topics.txt", "Table 17"),
    ],
)
def test_data_files_cite_the_paper(filename: str, citation: str) -> None:
    text = resources.files("recovery").joinpath("prompts", filename).read_text(encoding="utf-8")
    header = "\n".join(line for line in text.splitlines()[:10] if line.startswith("#"))
    assert PAPER_TITLE in header and citation in header
