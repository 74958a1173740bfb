"""`recovery export --push` puts every kind in one Hub repo, a ``configs:`` entry per kind, and what lands there
loads back with ``load_dataset(repo, kind)``.

The Hub cannot run here: `huggingface_hub.HfApi` — the one boundary faked — is replaced by a stand-in that
keeps a repo as a folder and applies ``upload_folder``'s documented semantics with huggingface_hub's own
pattern filter (``allow_patterns`` / ``ignore_patterns`` select what is uploaded; remote files matching
``delete_patterns`` and not re-uploaded are deleted; ``.gitattributes`` is kept).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from recovery.training_data import KINDS


class FolderHub:
    """``HfApi`` over local folders: ``repos[repo_id]`` is the repo's working tree."""

    root: Path
    repos: dict[str, Path] = {}
    calls: list[tuple[str, dict]] = []

    def __init__(self, endpoint=None, token=None, **kwargs):
        pass

    def create_repo(self, repo_id, *, repo_type=None, private=None, exist_ok=False, **kwargs):
        type(self).calls.append(("create_repo", {"repo_id": repo_id, "repo_type": repo_type, "private": private}))
        repo = self.repos.setdefault(repo_id, self.root / repo_id.replace("/", "__"))
        repo.mkdir(parents=True, exist_ok=True)
        (repo / ".gitattributes").touch()

    def upload_folder(
        self,
        *,
        repo_id,
        folder_path,
        repo_type=None,
        allow_patterns=None,
        ignore_patterns=None,
        delete_patterns=None,
        commit_message=None,
        **kwargs,
    ):
        from huggingface_hub.utils import filter_repo_objects

        type(self).calls.append(("upload_folder", {"repo_id": repo_id, "allow_patterns": allow_patterns}))
        repo, local = self.repos[repo_id], Path(folder_path)
        files = sorted(str(p.relative_to(local)) for p in local.rglob("*") if p.is_file())
        upload = set(filter_repo_objects(files, allow_patterns=allow_patterns, ignore_patterns=ignore_patterns))
        remote = {str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file()}
        stale = set(filter_repo_objects(remote - upload, allow_patterns=delete_patterns)) - {".gitattributes"}
        for name in stale:
            (repo / name).unlink()
        for name in upload:
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(local / name, repo / name)
        return type("CommitInfo", (), {"commit_url": f"https://hub.local/datasets/{repo_id}/commit/1"})()


@pytest.fixture
def hub(tmp_path, monkeypatch):
    import huggingface_hub
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(FolderHub, "root", tmp_path / "hub", raising=False)
    monkeypatch.setattr(FolderHub, "repos", {})
    monkeypatch.setattr(FolderHub, "calls", [])
    monkeypatch.setattr(huggingface_hub, "HfApi", FolderHub)
    return FolderHub


def test_export_push_puts_every_kind_in_one_repo_that_loads_back_per_config(toy_run, tmp_path, hub):
    import datasets
    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from recovery.cli import app

    out = tmp_path / "export"
    (tmp_path / "hub" / "someone__toy" / "old").mkdir(parents=True)
    (tmp_path / "hub" / "someone__toy" / "old" / "stale.parquet").write_bytes(b"x")  # from an earlier push
    result = CliRunner().invoke(
        app, ["export", str(toy_run.path), "--out", str(out), "--push", "--repo-id", "someone/toy"]
    )
    assert result.exit_code == 0, result.output
    assert [c[0] for c in hub.calls] == ["create_repo", "upload_folder"]  # one repo, one commit
    repo = hub.repos["someone/toy"]
    remote = sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file())
    assert "old/stale.parquet" not in remote and "export.json" not in remote
    assert not [f for f in remote if f.startswith("disk/")]  # the save_to_disk copies stay local
    card = (repo / "README.md").read_text()
    front = yaml.safe_load(card.split("---\n")[1])
    assert [c["config_name"] for c in front["configs"]] == list(KINDS)
    for kind in KINDS:
        local = sum(pq.ParquetFile(f).metadata.num_rows for f in (out / kind / "data").glob("*.parquet"))
        loaded = datasets.load_dataset(str(repo), kind, split="train")
        assert len(loaded) == local > 0
        assert f'load_dataset("someone/toy", "{kind}", split="train")' in card
        assert f'load_dataset("someone/toy", "{kind}", split="train")' in (repo / kind / "README.md").read_text()
    assert "run config id" in card and "tiny-reasoner" in card  # the provenance the kinds share
    # the tokenizer the prompts were rendered for (the tiny reasoner's: a local folder, no BOS token)
    assert "| `checkpoint (local folder)` |" in card and "chat template sha256" in card and "no BOS token" in card
    assert datasets.load_dataset(str(out), "sft", split="train").num_rows > 0  # the local folder loads the same


def test_kind_in_the_repo_id_keeps_one_repo_per_kind(toy_run, tmp_path, hub):
    from recovery.training_data import ExportConfig, export_run

    result = export_run(
        toy_run.path, tmp_path, ExportConfig(kinds=["chains", "continuations"], repo_id="me/x-{kind}"), push=True
    )
    assert sorted(hub.repos) == ["me/x-chains", "me/x-continuations"]
    assert all(entry.push.pushed for entry in result.datasets.values())
    front = yaml.safe_load((hub.repos["me/x-chains"] / "README.md").read_text().split("---\n")[1])
    assert front["configs"][0]["data_files"][0]["path"] == "data/train-*.parquet"


def test_offline_one_repo_export_prints_one_command(toy_run, tmp_path):
    from recovery.training_data import ExportConfig, export_run

    result = export_run(toy_run.path, tmp_path, ExportConfig(kinds=["traces", "chains"], repo_id="me/x"), push=True)
    (command,) = result.push_commands()
    assert command.startswith(f"hf upload me/x {tmp_path} . --repo-type dataset --include README.md")
    assert "--include 'traces/**' --include 'chains/**'" in command
