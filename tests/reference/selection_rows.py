"""Inputs of the selection differential test: the real traces of `inputs.trace_rows` given to three models, with
differences that make every step of the authors' ``scripts/filter_correct.py`` drop something.

Problems, in order: A = problem_2370 (answer 10), B = problem_1022 (6), C = problem_6356 (24),
D = problem_53 (66), E = problem_2940 (164; the trace never closes and is wrong), F = A asked again under
another id (answer 10, so the answer cap of 1 drops it). Every model has every problem's trace, scored 1
(``verifier_score``, as the authors' judge would) unless stated:

* every model: E scored 0 (wrong, unclosed);
* model 3 on B: its boxed answer changed to 7, scored 0 — B leaves the intersection for every model;
* model 2 on D: its closing tag removed, still correct (the boxed 66 stays), scored 1 — only model 2 drops D;
* model 1 on C: a long check appended after its answer — its longest *whole response*, not its longest
  reasoning.

The project's rule grader gives the same verdicts (the test checks that too), so a run's filter stage on
these traces can be compared with the authors' kept rows.
"""

from __future__ import annotations

import copy

from reference.inputs import trace_rows

MODELS = (
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B",
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
    "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
)
# The authors' filter_correct.py options of the paper's Math setup (its --help), the cap lowered to 1 so that it
# bites on six problems.
OPTIONS = {"drop_top_length_fraction": 0.02, "max_per_reference_answer": 1}
COPY_ID = "problem_2370_again"
LONG_CHECK = "\n\nChecking once more: the positive divisors of 23 are 1 and 23, so their sum is 24." * 12


def problem_rows() -> list[dict]:
    """The six problems' rows (one model's traces, unmodified): A, B, C, D, E and F."""
    rows = trace_rows(unclosed=True)
    again = copy.deepcopy(rows[0])
    again.update(
        record_id="problem_2370_again_seed0",
        id=COPY_ID,
        raw_question=again["raw_question"] + " (Asked again.)",
        question=again["question"].replace(again["raw_question"], again["raw_question"] + " (Asked again.)"),
    )
    return [*rows, again]


def model_rows() -> dict[str, list[dict]]:
    """Each model's rows in the authors' trace schema, scored, in problem order."""
    out = {}
    for number, model in enumerate(MODELS, start=1):
        rows = []
        for row in copy.deepcopy(problem_rows()):
            row.update(model_name=model, record_id=f"{row['record_id']}/m{number}", verifier_score=1)
            text = row["answer_content"]
            if row["id"] == "problem_2940":
                row["verifier_score"] = 0
            elif number == 3 and row["id"] == "problem_1022":
                assert text.count("\\boxed{6}") == 1
                row["answer_content"], row["verifier_score"] = text.replace("\\boxed{6}", "\\boxed{7}"), 0
            elif number == 2 and row["id"] == "problem_53":
                assert text.count("</think>") == 1
                row["answer_content"] = text.replace("</think>", "")
            elif number == 1 and row["id"] == "problem_6356":
                row["answer_content"] = text + LONG_CHECK
            rows.append(row)
        out[model] = rows
    return out


# -- issue 35: tags of another family inside the text, for R1 (with and without its opener), EXAONE and a tagless
# chat model. Each case is its own problem (problem A asked again), every trace correct (scored 1), so only the
# closure test decides; the judge cases add an answer with a stray tag after the box.
R1_MODEL = MODELS[1]
EXAONE_MODEL = "LGAI-EXAONE/EXAONE-Deep-7.8B"
CHAT_MODEL = "Qwen/Qwen2.5-7B-Instruct"
TAG_MODELS = (R1_MODEL, EXAONE_MODEL, CHAT_MODEL)
THOUGHT_INSIDE = "\n\nThe tag <thought> is mentioned literally here.\n\n"
CLOSE_INSIDE = "\n\nThe tag </think> is mentioned literally here.\n\n"
STRAY_AFTER = " </thought> stray tag"


def _r1_cases(text: str) -> dict[str, str]:
    reasoning, answer = text.removeprefix("<think>").split("</think>", 1)
    head, _, tail = reasoning.partition("\n\n")
    inside = head + THOUGHT_INSIDE + tail
    return {
        "r1_thought_inside": f"<think>{inside}</think>{answer}",
        "r1_thought_inside_no_opener": f"{inside}</think>{answer}",
        "r1_think_after_close": f"<think>{reasoning}</think>{answer} (A literal <think> tag after the close.)",
        "r1_think_after_close_no_opener": f"{reasoning}</think>{answer} <think>",
        "r1_stray_close_after_answer": f"{reasoning}</think>\nThe answer is \\boxed{{10}}.{STRAY_AFTER}",
    }


def _exaone_cases(text: str) -> dict[str, str]:
    reasoning, answer = text.removeprefix("<think>").split("</think>", 1)
    head, _, tail = reasoning.partition("\n\n")
    return {
        "exaone_own_tags": f"<thought>{reasoning}</thought>{answer}",
        "exaone_own_tags_no_opener": f"{reasoning}</thought>{answer}",
        "exaone_think_close_inside": f"<thought>{head}{CLOSE_INSIDE}{tail}</thought>{answer}",
    }


def _chat_cases() -> dict[str, str]:
    return {
        "chat_plain_answer": "The divisors add up as shown, so the answer is \\boxed{10}.",
        "chat_literal_close": "I will not write a </think> tag. The answer is \\boxed{10}.",
    }


def tag_case_rows() -> dict[str, list[dict]]:
    """Each model's rows of the tag cases, in the authors' trace schema, scored 1, in case order."""
    base = problem_rows()[0]
    texts = {
        R1_MODEL: _r1_cases(base["answer_content"]),
        EXAONE_MODEL: _exaone_cases(base["answer_content"]),
        CHAT_MODEL: _chat_cases(),
    }
    out = {}
    for model, cases in texts.items():
        rows = []
        for case, text in cases.items():
            row = copy.deepcopy(base)
            question = f"{base['raw_question']} ({case})"
            row.update(
                record_id=f"{case}_seed0",
                id=case,
                raw_question=question,
                question=base["question"].replace(base["raw_question"], question),
                model_name=model,
                answer_content=text,
                verifier_score=1,
            )
            rows.append(row)
        out[model] = rows
    return out
