"""SmolLM2-135M-Instruct as the paper's doubt judge (App. D.2), validated against hand labels through
``recovery analyze doubt-validate``'s own function: every sentence gets a verdict parsed from the model's
real reply or a counted parse failure, and Cohen's κ against the labels is a number. A 135M model is a weak
judge, so κ and the parse-failure rate are printed, not bounded."""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from pathlib import Path

import pytest
from real_chat import RecordingGenerator, assert_plain_chat_prompt

from recovery.analysis.agreement import cohen_kappa
from recovery.analysis.cli_doubt import doubt_validation
from recovery.analysis.doubt_judge import DOUBT_JUDGE_SYSTEM, DOUBT_JUDGE_USER, parse_doubt_reply

pytestmark = pytest.mark.slow

LABELS = Path(__file__).resolve().parents[2] / "bench" / "data" / "doubt_labels_real_traces.jsonl"
PER_CLASS = 8  # the first 8 doubtful and the first 8 other sentences of the label file


def label_slice(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in LABELS.read_text(encoding="utf-8").splitlines() if line.strip()]
    picked = [r for r in rows if r["label"]][:PER_CLASS] + [r for r in rows if not r["label"]][:PER_CLASS]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in picked), encoding="utf-8")
    return picked


def test_smollm2_as_the_doubt_judge(tmp_path, smollm2, smollm2_config, smollm2_factory, capsys):
    start = time.perf_counter()
    labels = label_slice(tmp_path / "labels.jsonl")
    assert len({r["text"] for r in labels}) == len(labels) == 2 * PER_CLASS
    judge_yaml = tmp_path / "judge.yaml"
    m = smollm2_config
    judge_yaml.write_text(
        f"model: {{name: {m.name}, path: {m.path}, gguf_file: {m.gguf_file}, device: {m.settings.device}}}\n"
    )
    recorders: list[RecordingGenerator] = []

    def factory(model_config):
        recorders.append(RecordingGenerator(smollm2_factory(model_config)))
        return recorders[-1]

    validation, _ = doubt_validation(
        tmp_path / "labels.jsonl",
        run_dir=tmp_path / "run",
        judge_config=judge_yaml,
        make_generator=factory,
        render=False,
    )
    (recorder,) = recorders

    # Each distinct sentence was asked once, with the App. D.2 prompt on the plain chat template, greedily.
    assert sorted(c.request.messages[1].content for c in recorder.calls) == sorted(
        DOUBT_JUDGE_USER.format(sentence_or_segment=r["text"]) for r in labels
    )
    sentence_of = {DOUBT_JUDGE_USER.format(sentence_or_segment=r["text"]): r["text"] for r in labels}
    replies = {}
    for call in recorder.calls:
        assert_plain_chat_prompt(call, smollm2.tokenizer)
        system, user = call.request.messages
        assert system.content == DOUBT_JUDGE_SYSTEM
        sampling = call.request.sampling
        assert (sampling.temperature, sampling.top_p, sampling.seed, sampling.n) == (0.0, 1.0, None, 1)  # Table 15
        assert call.result.error is None and call.reply is not None
        replies[sentence_of[user.content]] = call.reply

    # Every sentence has the verdict its real reply parses to, or none (a counted parse failure).
    verdicts = validation.predictions["judge"]
    parsed = [parse_doubt_reply(replies[r["text"]]) for r in labels]
    assert verdicts == [p.doubt for p in parsed]
    failures = Counter(p.reason for p in parsed if p.doubt is None)
    assert validation.skipped["judge"] == sum(failures.values()) < len(labels)
    judged = [(r["label"], v) for r, v in zip(labels, verdicts) if v is not None]
    metrics = validation.results["judge"]
    assert metrics.n == len(judged)
    kappa = cohen_kappa([y for y, _ in judged], [v for _, v in judged])
    assert metrics.kappa == kappa and math.isfinite(kappa) and -1.0 <= kappa <= 1.0
    stored = json.loads((tmp_path / "run" / "analysis" / "doubt_validation" / "metrics.json").read_text())
    assert stored["metrics"]["judge"]["kappa"] == pytest.approx(kappa) and stored["skipped"]["judge"] == len(
        labels
    ) - len(judged)

    lexical = validation.results["lexical"]
    with capsys.disabled():
        print(
            f"\nSmolLM2 as doubt judge on {len(labels)} labelled sentences ({time.perf_counter() - start:.1f} s, "
            f"{recorder.seconds:.1f} s generating): κ={kappa:.3f}, accuracy={metrics.accuracy:.3f} on {metrics.n}; "
            f"parse failures {sum(failures.values())}/{len(labels)} ({dict(failures) or '-'}); said doubt "
            f"{sum(v for _, v in judged)}/{len(judged)}; lexical κ={lexical.kappa:.3f}"
        )
