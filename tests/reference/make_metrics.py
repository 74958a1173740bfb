"""Run the authors' metric scripts once on the shared inputs and store what they returned (issue 29, pieces
"length", "grading" and "doubt"): ``python tests/reference/make_metrics.py --authors /work/authors``.

The authors' pipeline is run as they run it, script by script, in a temporary folder: their
scripts/create_interventions.py (the fixed intervention-LLM replies of `inputs.LLM_REPLIES`, their fallback
Wikipedia paragraphs), scripts/continue_interventions.py (fixed continuations), scripts/judge_answers.py in
completions mode, scripts/compute_metrics.py and scripts/length_overhead.py (``--remove-intervention-text``,
characters) as subprocesses, and scripts/analyze_doubt.py (sentence units of the continuations, spaCy's
``sentencizer_en``). Where a script needs an LLM, its ``build_runner`` is replaced by `FixedRunner`, which
returns fixed text the way their vLLM runner would (every output stripped) and records every prompt.

Continuations per chain: the four of `inputs.CONTINUATIONS` assigned to the chain, then three more written
here from real text: the original trace's own remainder after the cut (closed), a long reasoning that never
closes (the reasoning of `inputs.UNCLOSED_TRACE_ID`, over 8,000 characters), and one sentence longer than
1,000 characters with line breaks inside. Judge and doubt replies are fixed per prompt (`judge_reply`,
`doubt_reply`), so the tests can hand the same replies to this project's judges.

Stored (``data/metrics.json``): the chains (prefix and intervention text as their code wrote them), the
traces' whole responses, the continuations, per completion the length change and the judge prompt (SHA-256,
some in full) and score, per chain the robustness items, the group means of length, and
per distinct continuation the doubt units, prompt hashes, replies and flags. Nothing of their code is kept.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import inputs  # noqa: E402

PIECE = "metrics"
COMMAND = "python tests/reference/make_metrics.py --authors /work/authors"
FULL_PROMPT_CHAINS = 7  # chains whose short judge prompts (first four completions) are stored in full
LONG_SENTENCE = (
    "Let me add the terms one by one:\n"
    + " + ".join(str(i) for i in range(1, 260))
    + "\nwhich gives 33670 if I did not slip somewhere along the way. Wait, that does not look right.\n\n"
    "Let me recompute.\n</think>\n\n\\boxed{33670}"
)
DOUBT_REPLIES = ("Yes", "No", " yes, it does", "Maybe", "", "No.", "YES", "**Yes**", "Yes or No")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def judge_reply(prompt: str) -> str:
    """A fixed answer-judge reply per prompt: mostly "Correct" when the reference answer is in the extract
    (their MockRunner's rule), sometimes a judge's mistake, sometimes written so only a lenient reader would
    accept it."""
    reference = prompt.split("Reference Answer:\n", 1)[1].split("\n\nAnswer Content (extract):\n", 1)[0].strip()
    extract = prompt.split("\n\nAnswer Content (extract):\n", 1)[1].split("\n\nIs the Reference Answer present", 1)[0]
    correct = bool(reference) and reference in extract
    variant = int(sha(prompt)[:8], 16) % 6
    if correct:
        return ("Correct", " Correct\n", "Correct.", "Correct", "correct", "Correct")[variant]
    return ("Incorrect", "Correct", " Incorrect ", "Correct", " Correct ", "Correct!")[variant]


def doubt_reply(prompt: str) -> str:
    """A fixed doubt-judge reply per prompt, from `DOUBT_REPLIES`."""
    return DOUBT_REPLIES[int(sha(prompt)[:8], 16) % len(DOUBT_REPLIES)]


class FixedRunner:
    """Stands in for their runner: fixed intervention replies (by system prompt), continuations (by call
    order), judge and doubt replies (by prompt); every output stripped as their vLLM runner strips it."""

    def __init__(self, constants, continuations: list[list[str]]) -> None:
        by_prompt = {
            constants.COMPLETE_STEP_SYSTEM_PROMPT: "complete_step",
            constants.REWRITE_TRACE_SYSTEM_PROMPT: "paraphrase",
            constants.WRONG_REASONING_SYSTEM_PROMPT: "wrong_continuation",
            constants.WRONG_FACT_SYSTEM_PROMPT: "hallucinated_fact",
            constants.UNRELATED_COT_SYSTEM_PROMPT: "unrelated_cot",
        }
        self.intervention_of = by_prompt
        self.continuations = continuations
        self.next_chain = 0
        self.prompts: dict[str, list[tuple[str, str]]] = {"judge": [], "doubt": []}

    def generate(self, prompts, *, system_prompts="", reasoning_traces="", model_name=None, decoding=None, **_):
        if isinstance(system_prompts, str) and system_prompts in self.intervention_of:
            reply = inputs.LLM_REPLIES[self.intervention_of[system_prompts]]
            return [[reply.strip()] for _ in prompts]
        if reasoning_traces:  # continuations, one row after the other
            out = []
            for _ in prompts:
                out.append([c.strip() for c in self.continuations[self.next_chain]])
                self.next_chain += 1
            return out
        kind = "judge" if "Is the Reference Answer present" in prompts[0] else "doubt"
        reply = judge_reply if kind == "judge" else doubt_reply
        out = []
        for prompt in prompts:
            text = reply(prompt)
            self.prompts[kind].append((prompt, text))
            out.append([text.strip()])
        return out

    def unload_model(self) -> None:
        pass


def run_main(module, argv: list[str], runner: FixedRunner) -> None:
    """Run one of their scripts' ``main`` in this process, with ``runner`` as its LLM."""
    module.build_runner = lambda _args: runner
    saved = sys.argv
    sys.argv = [module.__file__, *argv]
    try:
        module.main()
    finally:
        sys.argv = saved


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def remainder(trace: dict, row: dict) -> str:
    """The original response after the chain's cut: the reasoning's later blank-line steps, then the closing
    tag and answer as the model wrote them."""
    steps = row["original_reasoning"].split("\n\n")[row["cutoff_index"] + 1 :]
    answer = trace["answer_content"].split("</think>", 1)[1]
    return "\n\n".join(steps) + "\n</think>" + answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--authors", required=True, type=Path, help="checkout of the authors' code at the commit")
    args = parser.parse_args()
    authors = args.authors.resolve()
    sys.path[:0] = [str(authors), str(authors / "scripts")]
    import analyze_doubt
    import continue_interventions
    import create_interventions
    import judge_answers
    from rllm_robustness import constants

    traces = inputs.trace_rows()
    unclosed_reasoning = next(
        r for r in inputs.trace_rows(unclosed=True) if r["record_id"] == inputs.UNCLOSED_TRACE_ID
    )["answer_content"].removeprefix("<think>")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        runner = FixedRunner(constants, [])
        theirs = ",".join(inputs.AUTHORS_NAMES.values())
        timesteps = ",".join(str(t) for t in inputs.TIMESTEPS)
        io = ["--input", str(write_jsonl(tmp / "traces.jsonl", traces)), "--output", str(tmp / "interventions.jsonl")]
        run_main(
            create_interventions,
            [
                *io,
                "--backend",
                "mock",
                "--interventions",
                theirs,
                "--timesteps",
                timesteps,
                "--allow-wikipedia-fallback",
            ],
            runner,
        )
        chains = read_jsonl(tmp / "interventions.jsonl")
        by_trace = {t["id"]: t for t in traces}
        runner.continuations = [
            [
                *inputs.CONTINUATIONS[i % len(inputs.CONTINUATIONS)],
                remainder(by_trace[c["source_id"]], c),
                unclosed_reasoning,
                LONG_SENTENCE,
            ]
            for i, c in enumerate(chains)
        ]
        n = len(runner.continuations[0])
        io = ["--input", str(tmp / "interventions.jsonl"), "--output", str(tmp / "continued.jsonl")]
        run_main(continue_interventions, [*io, "--backend", "mock", "--num-completions", str(n)], runner)
        io = ["--input", str(tmp / "continued.jsonl"), "--output", str(tmp / "judged.jsonl")]
        run_main(judge_answers, [*io, "--backend", "mock", "--mode", "completions"], runner)
        judged = read_jsonl(tmp / "judged.jsonl")
        scripts = authors / "scripts"
        subprocess.run(
            [sys.executable, str(scripts / "compute_metrics.py"), "--input", str(tmp / "judged.jsonl")]
            + ["--output-json", str(tmp / "metrics.json"), "--output-csv", str(tmp / "metrics.csv")],
            check=True,
        )
        # One row per completion, each its own group (a domain of its own), gives each completion's change.
        singles = [
            {**row, "domain": f"{row['domain']}#{i}#{j}", "complete_answers": [answer], "verifier_scores": [score]}
            for i, row in enumerate(judged)
            for j, (answer, score) in enumerate(zip(row["complete_answers"], row["verifier_scores"]))
        ]
        write_jsonl(tmp / "singles.jsonl", singles)
        for source, out in (("judged.jsonl", "length.csv"), ("singles.jsonl", "length_singles.csv")):
            subprocess.run(
                [sys.executable, str(scripts / "length_overhead.py"), "--input", str(tmp / source)]
                + ["--output-csv", str(tmp / out), "--remove-intervention-text", "--unit", "characters"],
                check=True,
            )
        io = ["--input", str(tmp / "judged.jsonl"), "--output", str(tmp / "doubt.jsonl")]
        run_main(analyze_doubt, [*io, "--backend", "mock"], runner)
        doubt = read_jsonl(tmp / "doubt.jsonl")
        metrics = json.loads((tmp / "metrics.json").read_text(encoding="utf-8"))
        with (tmp / "length_singles.csv").open(encoding="utf-8") as f:
            single_pct = {row["domain"]: float(row["mean_percent_change"]) for row in csv.DictReader(f)}
        with (tmp / "length.csv").open(encoding="utf-8") as f:
            group_means = [
                {
                    "intervention": r["intervention"],
                    "t": float(r["target_timestep"]),
                    "mean": float(r["mean_percent_change"]),
                    "std": float(r["std_percent_change"]),
                    "n": int(r["num_completions"]),
                }
                for r in csv.DictReader(f)
            ]
        # robustness_from_scores itself on scores with gaps (their judge never leaves one; a crashed batch may).
        sys.path.insert(0, str(authors))
        from rllm_robustness.metrics import robustness_from_scores

        gaps = [[1, None, 0, 1], [None, None], [0, 1, 1, None, 1], [1, 1, 1], []]
        payload = build_payload(traces, judged, metrics, single_pct, group_means, doubt, runner, constants)
        payload["robustness_with_gaps"] = [{"scores": s, **robustness_from_scores(s)} for s in gaps]
        # Their group summary of robustness (scripts/compute_metrics.py: pandas means of the items' levels).
        payload["robustness_group_means"] = [
            {
                "intervention": row["intervention"],
                "t": row["target_timestep"],
                **{key: row[key] for key in ("num_items", "at_least_once_robustness", "majority_robustness")},
                "all_robustness": row["all_robustness"],
            }
            for row in metrics["summary"]
        ]
    inputs.store(PIECE, COMMAND, payload)


def build_payload(traces, judged, metrics, single_pct, group_means, doubt, runner, constants) -> dict:
    """The stored outputs (see the module doc)."""
    ours = {v: k for k, v in inputs.AUTHORS_NAMES.items()}
    judge_prompts = {}  # prompt hash → (prompt, reply)
    for prompt, reply in runner.prompts["judge"]:
        judge_prompts.setdefault(sha(prompt), (prompt, reply))
    prompts_in_order = [sha(p) for p, _ in runner.prompts["judge"]]
    position = 0
    chains = []
    for i, row in enumerate(judged):
        completions = []
        for j, score in enumerate(row["verifier_scores"]):
            digest = prompts_in_order[position]
            position += 1
            completions.append(
                {
                    "percent_change": single_pct[f"{row['domain']}#{i}#{j}"],
                    "judge_prompt_sha256": digest,
                    "judge_prompt": judge_prompts[digest][0] if i < FULL_PROMPT_CHAINS and j < 4 else None,
                    "judge_reply": judge_prompts[digest][1],
                    "score": score,
                }
            )
        item = metrics["items"][i]
        chains.append(
            {
                "trace_id": row["source_id"],
                "intervention": ours[row["intervention"]],
                "target_t": row["target_timestep"],
                "cutoff_index": row["cutoff_index"],
                "prefix": row["mutated_answer_content"],
                "intervention_text": row["intervention_text"],
                "continuations": [sha(c) for c in row["continuations"]],  # texts: ``continuation_texts``
                "complete_answers_sha256": [sha(a) for a in row["complete_answers"]],
                "completions": completions,
                "robustness": {
                    k: item[k] for k in ("n", "k_correct", "at_least_once_robust", "majority_robust", "all_robust")
                },
            }
        )
    units: dict[str, dict] = {}
    doubt_prompts = dict(runner.prompts["doubt"])
    for row in doubt:
        chain = judged[[r["record_id"] for r in judged].index(row["source_record_id"])]
        text = chain["continuations"][row["completion_index"]]
        prompts = [constants.DOUBT_PROMPT_TEMPLATE.format(unit_text=u.replace("\n", " ")) for u in row["units"]]
        assert all(p in doubt_prompts for p in prompts)  # the prompts their script sent, as recorded
        units.setdefault(
            sha(text),
            {
                "units": row["units"],
                "prompts_sha256": [sha(p) for p in prompts],
                "replies": [doubt_prompts[p] for p in prompts],
                "flags": row["doubt_flags"],
            },
        )
    return {
        "model": inputs.MODEL,
        "traces": [
            {
                "id": t["id"],
                "question": t["question"],
                "raw_question": t["raw_question"],
                "answer": t["reference_answer"],
            }
            | {"answer_content": t["answer_content"]}
            for t in traces
        ],
        "chains": chains,
        "length_group_means": group_means,
        "doubt_by_continuation": units,
        "continuation_texts": {sha(c): c for row in judged for c in row["continuations"]},
        "judge_system_prompt": constants.ANSWER_JUDGE_SYSTEM_PROMPT,
        "doubt_system_prompt": constants.DOUBT_SYSTEM_PROMPT,
    }


if __name__ == "__main__":
    main()
