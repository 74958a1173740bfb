"""How each model's server was talked to: the settings probed from it before the run (``servers.json``),
checked when the run resumes.

A server behind the openai backend is probed before any work (`recovery.backends.openai_probe`): token or
text prompts, n samples per request or one, whether it takes seeds and which extra fields. Each of these
changes what the run generates, so the settings a run used are recorded with it and a resume whose
server behaves differently (another server software or version behind the same ``base_url``) is refused
before any work, like a changed config or changed weights. Where the server is (``base_url``) is recorded
for the reader but may change.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from recovery.configs import ConfigError
from recovery.run_dir.files import SERVERS_FILE, read_json_file
from recovery.store import RunDir, atomic_write_text


def check_servers(run: RunDir, servers: Mapping[str, Mapping[str, Any]], urls: Mapping[str, str]) -> None:
    """Record the probed ``settings`` of each model's server (``name → settings``; ``urls``: name → base
    URL) with ``run``, or, for a model already recorded, raise `ConfigError` naming it and what differs when
    its server now needs other settings."""
    path = run.file(SERVERS_FILE)
    stored = read_json_file(path) if path.is_file() else {}
    current = {name: {"base_url": urls.get(name), "settings": dict(settings)} for name, settings in servers.items()}
    for name, entry in current.items():
        before = stored.get(name, {}).get("settings")
        if before is not None and before != entry["settings"]:
            changed = ", ".join(
                f"{key}: {before.get(key)!r} → {entry['settings'].get(key)!r}"
                for key in sorted(set(before) | set(entry["settings"]))
                if before.get(key) != entry["settings"].get(key)
            )
            raise ConfigError(
                f"{run.path}: the server of model {name!r} at {entry['base_url']} behaves differently from the one "
                f"this run used ({changed}); use a new run_dir, or serve the model as before to resume"
            )
    merged = {**stored, **{name: entry for name, entry in current.items() if name not in stored}}
    if merged != stored:
        run.path.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(merged, indent=2, sort_keys=True))
