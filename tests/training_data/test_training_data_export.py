"""Export: Parquet + save_to_disk + rendered cards for every kind; pushing never loses local files."""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import json
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from recovery.training_data import (
    KINDS,
    ExportConfig,
    GRPOPromptConfig,
    SFTConfig,
    export_run,
    push_export,
    push_folder,
)
from recovery.training_data.cards import render_card, unrendered_placeholders


def snapshot(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def exported(toy_run, toy_tokenizer, tmp_path_factory):
    out = tmp_path_factory.mktemp("export")
    config = ExportConfig(
        sft=SFTConfig(clean_fraction=0.25),
        grpo=GRPOPromptConfig(clean_fraction=0.1),
        repo_id="someone/toy-recovery-{kind}",
    )
    started = time.monotonic()
    result = export_run(toy_run.path, out, config, tokenizer=toy_tokenizer, push=True)  # HF_HUB_OFFLINE=1
    return out, result, time.monotonic() - started


def test_every_kind_written(exported, toy_run):
    from datasets import load_from_disk

    out, result, _ = exported
    assert list(result.datasets) == list(KINDS)
    expected = {"traces": len(toy_run.traces), "chains": len(toy_run.chains), "continuations": 3 * len(toy_run.chains)}
    for kind, entry in result.datasets.items():
        assert entry.skipped is None and entry.rows > 0
        if kind in expected:
            assert entry.rows == expected[kind]
        files = sorted((out / kind / "data").glob("*.parquet"))
        assert [str(f) for f in files] == entry.parquet_files
        assert sum(pq.ParquetFile(f).metadata.num_rows for f in files) == entry.rows
        disk = load_from_disk(str(out / "disk" / kind))
        assert len(disk) == entry.rows
        assert (out / "disk" / kind / "README.md").read_text() == (out / kind / "README.md").read_text()
    sft = pq.read_table(result.datasets["sft"].parquet_files[0]).to_pylist()
    assert {"prompt", "completion"} <= set(sft[0]) and {r["origin"] for r in sft} == {"own", "clean"}
    for row in sft:  # the pre-tokenized form survives Parquet
        assert len(row["input_ids"]) == len(row["completion_mask"]) == row["prompt_tokens"] + row["completion_tokens"]
    manifest = json.loads((out / "export.json").read_text())
    assert manifest["datasets"]["sft"]["rows"] == result.datasets["sft"].rows


def test_cards_are_rendered_with_counts(exported, toy_run):
    out, result, _ = exported
    for kind, entry in result.datasets.items():
        card = (out / kind / "README.md").read_text()
        assert not unrendered_placeholders(card) and "${" not in card
        front = yaml.safe_load(card.split("---\n")[1])
        assert front["license"] == "apache-2.0"  # toy-world data only
        assert front["size_categories"] == ["n<1K"]
        assert front["configs"][0]["data_files"][0]["path"] == "data/train-*.parquet"
        assert f"| rows | {entry.rows} |" in card
        assert "toy/wrong_continuation" in card and "tiny-reasoner" in card  # interventions, models
        assert "| continuations | 8 | 0.6 | 0.95 |" in card  # decoding from the run config
        assert f"hf upload someone/toy-recovery-{kind}" in card
    sft_card = (out / "sft" / "README.md").read_text()
    sft = result.datasets["sft"]
    assert f"| quality | not_correct | {len(toy_run.chains)} |" in sft_card  # drops with reasons
    assert f"| recovery_rows | {sft.counts['recovery_rows']} |" in sft_card
    assert "quality.max_overhead_pct" in sft_card and "completion_only_loss" in sft_card


def test_offline_push_keeps_files_and_says_how(exported):
    out, result, seconds = exported
    assert seconds < 30  # no 20-45 s Hub timeouts: offline is detected before any request
    for kind, entry in result.datasets.items():
        assert entry.push is not None and not entry.push.pushed
        assert "offline" in entry.push.error
        assert entry.push.command == (
            f"hf upload someone/toy-recovery-{kind} {out / kind} . --repo-type dataset --private"
        )
        assert (out / kind / "README.md").is_file() and entry.parquet_files
    assert len(result.push_commands()) == len(KINDS)
    assert json.loads((out / "export.json").read_text())["push_commands"] == result.push_commands()


class _Failing(http.server.BaseHTTPRequestHandler):
    """A loopback 'Hub' that answers every request with HTTP 500."""

    hits = 0

    def _fail(self):
        type(self).hits += 1
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        self.send_response(500)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_GET = do_POST = do_PUT = do_HEAD = _fail

    def log_message(self, *args):
        pass


def test_failed_push_loses_nothing(exported, monkeypatch):
    import huggingface_hub.constants

    out, _, _ = exported
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        before = snapshot(out)
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        result = push_folder(out / "sft", "someone/toy-sft", token="hf_fake", endpoint=endpoint)
        results = push_export(out, "someone/toy", kinds=["grpo"], token="hf_fake", endpoint=endpoint)
    finally:
        server.shutdown()
        server.server_close()
    assert _Failing.hits >= 2
    assert not result.pushed and "500" in result.error and result.command.startswith("hf upload someone/toy-sft ")
    assert not results["grpo"].pushed and results["grpo"].repo_id == "someone/toy"  # one repo, a config per kind
    assert snapshot(out) == before


def test_reexport_replaces_shards(toy_run, toy_tokenizer, tmp_path):
    config = ExportConfig(kinds=["continuations"], shard_rows=100)
    first = export_run(toy_run.path, tmp_path, config)
    assert len(first.datasets["continuations"].parquet_files) == 3  # 252 rows in shards of ≤ 100
    export_run(toy_run.path, tmp_path, ExportConfig(kinds=["continuations"]))
    files = sorted(p.name for p in (tmp_path / "continuations" / "data").iterdir())
    assert files == ["train-00000-of-00001.parquet"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp folders left


def test_prompt_datasets_skipped_without_tokenizer(toy_run, tmp_path, monkeypatch):
    import recovery.training_data.render as render

    monkeypatch.setattr(render, "has_checkpoint", lambda *a, **k: False)  # where the renderers look for it
    result = export_run(toy_run.path, tmp_path, ExportConfig(kinds=["chains", "sft", "grpo"]))
    assert result.datasets["chains"].rows == len(toy_run.chains)
    for kind in ("sft", "grpo"):
        assert "checkpoint" in result.datasets[kind].skipped and not (tmp_path / kind).exists()


def test_card_template_errors(tmp_path):
    (tmp_path / "x.md").write_text("---\nlicense: ${license}\n---\n${missing}\n")
    with pytest.raises(ValueError, match="missing"):
        render_card("x", {"license": "mit"}, tmp_path)
    (tmp_path / "y.md").write_text("costs $5\n")
    with pytest.raises(ValueError, match=r"\$\$"):
        render_card("y", {}, tmp_path)


def test_config_loads_strictly_from_yaml_mapping():
    from recovery.configs import ConfigError, from_mapping

    config = from_mapping(
        ExportConfig,
        {
            "kinds": ["sft"],
            "repo_id": "me/toy",
            "sft": {"clean_fraction": 0.3, "quality": {"require_doubt": True, "overhead_basis": "remaining"}},
        },
    )
    assert config.sft.quality.require_doubt and config.repo_for("sft") == "me/toy"  # one repo, a config per kind
    with pytest.raises((ConfigError, ValueError)):
        from_mapping(ExportConfig, {"sft": {"quality": {"bogus": 1}}})
    with pytest.raises(ValueError):
        ExportConfig(kinds=["nope"])


def test_unloadable_tokenizer_is_a_reason_not_a_crash(toy_run, tmp_path):
    from recovery.model_config import ModelConfig
    from recovery.training_data import load_run, renderers_for_run

    data = load_run(toy_run.path)
    data.run.config = dataclasses.replace(data.config, models=[ModelConfig(name="m", path=str(tmp_path / "missing"))])
    reason = renderers_for_run(data)
    assert isinstance(reason, str) and "'m'" in reason


def test_cli_teacher_toy_writes_teacher_rows(toy_run_for, tmp_path):
    """`recovery export RUN --out DIR --teacher toy` (the example in its --help) adds the toy teacher's rows:
    on a run whose own continuations all answer wrong, every recovery row is the teacher's."""
    from typer.testing import CliRunner

    from recovery.cli import app
    from toy_runs import ToyRunSpec

    run = toy_run_for(ToyRunSpec(interventions=("toy/wrong_continuation",), variants=("wrong_answer",)))

    def export(out, *teacher):
        result = CliRunner().invoke(app, ["export", str(run.path), "--out", str(out), "--kinds", "sft", *teacher])
        assert result.exit_code == 0, result.output
        return pq.read_table(next((out / "sft").rglob("*.parquet"))).to_pylist()

    recoveries = [row for row in export(tmp_path / "with", "--teacher", "toy") if row["kind"] == "recovery"]
    assert recoveries and {(row["origin"], row["teacher"]) for row in recoveries} == {("teacher", "toy-teacher")}
    assert not [row for row in export(tmp_path / "without") if row["kind"] == "recovery"]


def test_repush_mirrors_the_folder_so_no_stale_shard_is_left(toy_run, tmp_path, monkeypatch):
    """Re-pushing an export with fewer shards leaves none of the old ones on the Hub. The Hub cannot run here:
    `HfApi` is faked at that boundary by a repo that applies upload_folder's documented semantics (remote files
    matching ``delete_patterns`` and not re-uploaded are deleted, ``.gitattributes`` kept)."""
    import fnmatch

    import huggingface_hub
    import huggingface_hub.constants

    remote = {
        ".gitattributes",
        "README.md",
        "data/train-00000-of-00003.parquet",
        "data/train-00001-of-00003.parquet",
        "data/train-00002-of-00003.parquet",
    }  # the first push

    class FakeHub:
        def __init__(self, **kwargs):
            pass

        def create_repo(self, *args, **kwargs):
            return None

        def upload_folder(self, *, folder_path, delete_patterns=None, **kwargs):
            local = {str(p.relative_to(folder_path)) for p in Path(folder_path).rglob("*") if p.is_file()}
            patterns = [delete_patterns] if isinstance(delete_patterns, str) else list(delete_patterns or [])
            kept = {
                f for f in remote - local if f == ".gitattributes" or not any(fnmatch.fnmatch(f, p) for p in patterns)
            }
            remote.clear()
            remote.update(local | kept)
            return None

    export_run(toy_run.path, tmp_path, ExportConfig(kinds=["continuations"]))  # one shard now
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeHub)
    result = push_folder(tmp_path / "continuations", "someone/toy-continuations", token="hf_fake")
    assert result.pushed, result.error
    local = {
        str(p.relative_to(tmp_path / "continuations")) for p in (tmp_path / "continuations").rglob("*") if p.is_file()
    }
    assert remote == local | {".gitattributes"}
    assert sorted(f for f in remote if f.startswith("data/")) == ["data/train-00000-of-00001.parquet"]


def test_rows_over_the_token_budget_are_dropped_counted_and_on_the_card(toy_run, toy_tokenizer, tmp_path):
    from typer.testing import CliRunner

    from recovery.cli import app

    lengths = sorted(pq.read_table(_export_sft(toy_run, toy_tokenizer, tmp_path)).column("prompt_tokens").to_pylist())
    budget = lengths[len(lengths) // 2]
    result = CliRunner().invoke(
        app,
        ["export", str(toy_run.path), "--out", str(tmp_path / "cli"), "--kinds", "sft,grpo"]
        + ["--max-prompt-tokens", str(budget), "--max-tokens", "100000"],
    )
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "cli" / "export.json").read_text())
    for kind in ("sft", "grpo"):
        assert manifest["datasets"][kind]["drops"]["tokens/prompt_over_budget"] > 0
        card = (tmp_path / "cli" / kind / "README.md").read_text()
        assert "prompt_over_budget" in card and f"| max_prompt_tokens | {budget} |" in card
        rows = pq.read_table(manifest["datasets"][kind]["parquet_files"][0]).to_pylist()
        assert rows and all(r["prompt_tokens"] <= budget for r in rows)


def _export_sft(toy_run, toy_tokenizer, tmp_path: Path) -> str:
    result = export_run(toy_run.path, tmp_path / "all", ExportConfig(kinds=["sft"]), tokenizer=toy_tokenizer)
    return result.datasets["sft"].parquet_files[0]
