"""Pushing an exported dataset folder to the Hugging Face Hub — only when asked, never losing local data.

An exported folder (``README.md`` card + ``data/*.parquet``) is uploaded as it is with
`huggingface_hub.HfApi.upload_folder`, so what is on the Hub is byte for byte what is on disk. The push
only reads the folder: whatever happens, the local copy stays. Offline (``HF_HUB_OFFLINE=1``) nothing is
attempted; on any failure (no network, no token, a server error) the result carries the error and the
exact command that pushes the same folder later.
"""

from __future__ import annotations

import logging
import os
import shlex
from dataclasses import asdict, dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

_TRUE = {"1", "true", "yes", "on"}
# Every remote file not re-uploaded is deleted (fnmatch's "*" crosses folders): the repo mirrors the folder.
MIRROR_DELETE_PATTERNS = ["*"]


@dataclass(frozen=True, slots=True)
class PushResult:
    """Outcome of one push. ``command`` re-does it from a shell (``hf`` is huggingface_hub's CLI)."""

    repo_id: str
    local_dir: str
    pushed: bool
    command: str
    url: str | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, object]:
        """The fields by name, in declaration order (the ``push`` entry of an export's summary)."""
        return asdict(self)


def hub_offline() -> bool:
    """True when Hub access is switched off, read at call time (``huggingface_hub`` reads its constant
    once at import, so a variable set later is honoured here too)."""
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        if os.environ.get(name, "").strip().lower() in _TRUE:
            return True
    try:
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE)
    except ImportError:  # pragma: no cover - huggingface_hub comes with datasets
        return False


def push_command(
    local_dir: str | Path, repo_id: str, *, private: bool = True, allow_patterns: list[str] | None = None
) -> str:
    """The shell command that uploads ``local_dir`` (only the files ``allow_patterns`` match, when given) as
    dataset repo ``repo_id``."""
    parts = ["hf", "upload", repo_id, str(local_dir), ".", "--repo-type", "dataset"]
    for pattern in allow_patterns or ():
        parts += ["--include", pattern]
    if private:
        parts.append("--private")
    return " ".join(shlex.quote(p) for p in parts)


def push_folder(
    local_dir: str | Path,
    repo_id: str,
    *,
    private: bool = True,
    token: str | None = None,
    endpoint: str | None = None,
    commit_message: str | None = None,
    allow_patterns: list[str] | None = None,
) -> PushResult:
    """Upload ``local_dir`` to dataset repo ``repo_id`` (created if missing); with ``allow_patterns`` only the
    files they match. Never raises for Hub problems and never touches the local files: failures come back in
    the result with the command to retry. ``endpoint`` overrides ``HF_ENDPOINT`` (read at call time)."""
    local = Path(local_dir)
    command = push_command(local, repo_id, private=private, allow_patterns=allow_patterns)
    if not (local / "README.md").is_file():
        return PushResult(repo_id, str(local), False, command, error=f"{local} has no README.md (not an export)")
    if hub_offline():
        logger.warning("Hub offline: kept %s locally; push later with: %s", local, command)
        return PushResult(repo_id, str(local), False, command, error="offline (HF_HUB_OFFLINE is set)")
    try:
        from huggingface_hub import HfApi

        api = HfApi(endpoint=endpoint or os.environ.get("HF_ENDPOINT") or None, token=token)
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        # Remote files the folder no longer holds (a re-export's fewer shards) are deleted in the same commit,
        # so the card's data/train-* glob never loads stale rows; huggingface_hub keeps .gitattributes.
        info = api.upload_folder(
            folder_path=str(local),
            repo_id=repo_id,
            repo_type="dataset",
            delete_patterns=MIRROR_DELETE_PATTERNS,
            allow_patterns=allow_patterns,
            commit_message=commit_message or f"Upload {local.name} dataset from recovery",
        )
    except Exception as err:  # noqa: BLE001 - any Hub failure must leave the export usable
        message = f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
        logger.warning("push of %s to %s failed (%s); kept locally; retry with: %s", local, repo_id, message, command)
        return PushResult(repo_id, str(local), False, command, error=message)
    url = getattr(info, "repo_url", None) or getattr(info, "commit_url", None)
    return PushResult(repo_id, str(local), True, command, url=str(url) if url else None)
