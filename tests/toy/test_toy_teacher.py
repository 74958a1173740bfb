"""The toy teacher: from any intervened prefix, a correct continuation with doubt where it is due."""

from __future__ import annotations

import pytest

from recovery.ids import item_rng
from recovery.interventions import InterventionContext, create
from recovery.segment import cut_at, join_steps, split_reasoning, split_steps
from recovery.toy.interventions import TOY_NAMES
from recovery.toy.steps import DOUBT_CHECK, DOUBT_WRONG, claim_is_correct, parse_step
from recovery.toy.tasks import generate_problems, make_problem, parse_question, spec_of
from recovery.toy.teacher import recovery_continuation, teach
from recovery.toy.traces import write_trace
from recovery.toy.verify import grade_toy
from recovery.types import Category, Intervened

PROBLEMS = generate_problems(30, seed=21)
TIMESTEPS = (0.1, 0.3, 0.5, 0.7, 0.9)
DOUBTING = {
    "toy/random_characters",
    "toy/wikipedia_text",
    "toy/wrong_continuation",
    "toy/hallucinated_fact",
    "toy/unrelated_cot",
}


def intervened_prefix(problem, t, name):
    trace = write_trace(problem, slip_rate=0.2).as_trace()
    steps = split_steps(trace.reasoning)
    ctx = InterventionContext(problem, trace, steps, cut_at(steps, t), item_rng(0, trace.id, name, t))
    return join_steps(create(name).apply(ctx).prefix_steps)


def intervened_prefixes(name):
    """``(problem, spec, prefix)`` for every test problem and timestep, intervened with ``name``."""
    for problem in PROBLEMS:
        for t in TIMESTEPS:
            yield problem, spec_of(problem), intervened_prefix(problem, t, name)


@pytest.mark.parametrize("name", TOY_NAMES)
def test_continuation_completes_a_correct_response(name):
    for problem in PROBLEMS:
        spec = spec_of(problem)
        for t in TIMESTEPS:
            prefix = intervened_prefix(problem, t, name)
            rec = recovery_continuation(problem, prefix)
            response = prefix + rec.text
            assert grade_toy(response, problem).correct
            split = split_reasoning(response)
            assert split.closed and split.reasoning.endswith("\n") and not split.reasoning.endswith("\n\n")
            new_steps = split_steps(split.reasoning)[len(split_steps(prefix)) :]
            claims = [parse_step(s.text, spec) for s in new_steps]
            if not claims:  # the prefix already ended on the correct conclusion
                assert rec.resumed_at == spec.n_ops + 2 and rec.doubt is None
                continue
            assert all(c is not None and claim_is_correct(c, spec) for c in claims)
            assert [c.position for c in claims] == list(range(claims[0].position, spec.n_ops + 2))
            if name in DOUBTING:
                assert rec.doubt in (DOUBT_CHECK, DOUBT_WRONG) and new_steps[0].text.startswith(rec.doubt)
            else:  # benign: doubt only when the model's own prefix ended on one of its slips
                assert (rec.doubt is None) == (rec.state.last_kind != "wrong")


def test_doubt_phrase_matches_what_went_wrong_and_is_cheap():
    problem = make_problem(parse_question("Start with 7. Step A: add 5. Step B: subtract 3. What is the final number?"))
    wrong = recovery_continuation(problem, "Okay.\n\nStart with 7.\n\nStep A: add 5. 7 + 5 = 13.")
    assert wrong.doubt == DOUBT_WRONG and wrong.resumed_at == 1
    assert wrong.text.startswith(
        "\n\nWait, that is wrong. Step A: add 5. 7 + 5 = 12.\n\nStep B: subtract 3. 12 - 3 = 9."
    )
    noise = recovery_continuation(problem, "Okay.\n\nStart with 7.\n\nThe Danube is a river.")
    assert noise.doubt == DOUBT_CHECK and noise.resumed_at == 1
    fine = recovery_continuation(problem, "Okay.\n\nStart with 7.\n\nStep A: add 5. 7 + 5 = 12.")
    assert fine.doubt is None and fine.text.startswith("\n\nStep B: subtract 3. 12 - 3 = 9.")
    forced = recovery_continuation(problem, "Okay.\n\nStart with 7.\n\nStep A: add 5. 7 + 5 = 12.", doubt=True)
    assert forced.text.startswith("\n\nWait, let me check. Step B:")


def test_restart_redoes_the_whole_chain_only_after_a_doubt():
    problem = make_problem(parse_question("Start with 7. Step A: add 5. Step B: subtract 3. What is the final number?"))
    wrong = recovery_continuation(problem, "Okay.\n\nStart with 7.\n\nStep A: add 5. 7 + 5 = 13.", restart=True)
    assert wrong.resumed_at == 0
    assert wrong.text.startswith("\n\nWait, that is wrong. Start with 7.\n\nStep A: add 5. 7 + 5 = 12.\n\nStep B:")
    noise = "Okay.\n\nStart with 7.\n\nStep A: add 5. 7 + 5 = 12.\n\nThe Danube is a river."
    assert recovery_continuation(problem, noise, restart=True).text.startswith("\n\nWait, let me check. Start with 7.")
    fine = "Okay.\n\nStart with 7.\n\nStep A: add 5. 7 + 5 = 12."
    assert recovery_continuation(problem, fine, restart=True) == recovery_continuation(problem, fine)
    response = noise + recovery_continuation(problem, noise, restart=True).text
    assert response.endswith("\\boxed{9}.") and response.count("</think>") == 1


def test_prefix_endings_and_complete_prefixes():
    problem = make_problem(parse_question("Start with 2. Step A: add 1. What is the final number?"))
    for prefix in ("Start with 2.", "Start with 2.\n\n", "Start with 2.\n"):
        response = prefix + recovery_continuation(problem, prefix).text
        assert "\n\n\n" not in response and grade_toy(response, problem).correct
    done = "Start with 2.\n\nStep A: add 1. 2 + 1 = 3.\n\nSo the final number is 3.\n"
    assert recovery_continuation(problem, done).text == "</think>\n\nThe answer is \\boxed{3}."
    assert recovery_continuation(problem, "").text.startswith("Start with 2.")


def test_teach_reads_an_intervened_record():
    problem = PROBLEMS[0]
    prefix = intervened_prefix(problem, 0.5, "toy/wrong_continuation")
    record = Intervened(
        trace_id="t",
        problem_id=problem.id,
        model="toy",
        intervention="toy/wrong_continuation",
        category=Category.ADVERSARIAL,
        target_t=0.5,
        actual_t=0.5,
        cut_index=2,
        n_steps=6,
        prefix=prefix,
        inserted_text="x",
        original_prefix_chars=1,
        original_reasoning_chars=2,
    )
    assert teach(record, problem).text == recovery_continuation(problem, prefix).text
    with pytest.raises(ValueError):
        teach(record, PROBLEMS[1])


# -- the self-checking style ---------------------------------------------------------------------------------


def test_a_check_redoes_the_step_from_the_state_before_it():
    from recovery.toy.steps import is_check, render_check

    arith = make_problem(parse_question("Start with 7. Step A: add 5. Step B: subtract 3. What is the final number?"))
    spec = spec_of(arith)
    assert render_check(spec, 2) == "Check: 12 - 3 = 9." and is_check(" Check: 12 - 3 = 9.\n")
    swap = next(p for p in PROBLEMS if spec_of(p).family == "swap")
    before, after = spec_of(swap).state(0), spec_of(swap).state(1)
    assert render_check(spec_of(swap), 1) == f"Check: {before} had the ball, so {after} holds the ball."
    for outside in (0, 3):  # the start and the conclusion are not operation steps
        with pytest.raises(ValueError, match="a check follows an operation step"):
            render_check(spec, outside)
    # A check establishes nothing: the prefix's state is read from the steps around it.
    from recovery.toy.analysis import analyse_prefix

    steps = ["Okay.", "Start with 7.", "Step A: add 5. 7 + 5 = 13.", "Check: 7 + 5 = 12."]
    assert analyse_prefix(spec, steps).last_kind == "wrong" and analyse_prefix(spec, steps).last_ok == 0


@pytest.mark.parametrize("name", TOY_NAMES)
def test_self_checking_recoveries_check_every_step_and_doubt_only_a_wrong_one(name):
    from recovery.toy.steps import is_check, render_check

    for problem, spec, prefix in intervened_prefixes(name):
        rec = recovery_continuation(problem, prefix, restart=True, checks=True)
        assert grade_toy(prefix + rec.text, problem).correct
        written = split_steps(split_reasoning(prefix + rec.text).reasoning)[len(split_steps(prefix)) :]
        texts = [s.text.strip() for s in written]
        last = parse_step(split_steps(prefix)[-1].text, spec)
        if last is not None and 1 <= last.position <= spec.n_ops:
            # The first paragraph checks the prefix's last step; the doubt comes only if they disagree.
            assert texts[0] == render_check(spec, last.position)
            assert (rec.doubt is not None) == (not claim_is_correct(last, spec)) or rec.state.last_kind == "noise"
        for i, text in enumerate(texts):
            claim = None if is_check(text) else parse_step(text, spec)
            if claim is not None and 1 <= claim.position <= spec.n_ops:
                assert texts[i + 1] == render_check(spec, claim.position), (name, texts)


def test_the_self_checking_doubt_follows_a_check_that_disagrees():
    problem = make_problem(parse_question("Start with 7. Step A: add 5. Step B: subtract 3. What is the final number?"))
    wrong = recovery_continuation(problem, "Okay.\n\nStart with 7.\n\nStep A: add 5. 7 + 5 = 13.", checks=True)
    assert wrong.text.startswith(f"\n\nCheck: 7 + 5 = 12.\n\n{DOUBT_WRONG} Step A: add 5. 7 + 5 = 12.\n\nCheck:")
    right = recovery_continuation(problem, "Okay.\n\nStart with 7.\n\nStep A: add 5. 7 + 5 = 12.", checks=True)
    assert right.doubt is None and right.text.startswith("\n\nCheck: 7 + 5 = 12.\n\nStep B: subtract 3.")
    plain = recovery_continuation(problem, "Okay.\n\nStart with 7.\n\nStep A: add 5. 7 + 5 = 12.")
    assert "Check:" not in plain.text  # the default style is the tiny reasoner's own
