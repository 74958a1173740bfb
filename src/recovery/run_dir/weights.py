"""Which weights a run measured: a fingerprint of each local model's weight files, stored with the run
(``weights.json``) and checked when it resumes.

The manifest records a model by its path, and a path can hold other weights later: a checkpoint retrained
in place, a package upgrade that ships a new tiny reasoner. A run resumed then would report the old
model's finished records beside the new one's under one name, so a resume whose weights differ from the
ones recorded is refused before any work. A fingerprint reads the name and size of every weight file and
its bytes: all of a file up to 64 MiB, and of a larger one its first and last MiB and 64 blocks spread
between, so it takes milliseconds on a checkpoint of any size while retraining (which moves every tensor)
changes it. Models whose weights are not on this machine (a Hub id not yet downloaded, a server) are not
fingerprinted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from recovery.configs import ConfigError
from recovery.run_dir.files import WEIGHTS_FILE, read_json_file
from recovery.store import RunDir, atomic_write_text

# What `from_pretrained` (and a GGUF loader) reads from a model folder's top level; a training run's
# folder also holds checkpoint-*/ subfolders, optimizer and RNG states and training_args.bin, which do not
# change the model and appear as training goes on.
WEIGHT_SUFFIXES = (".safetensors", ".gguf")
LEGACY_WEIGHTS_PREFIX = "pytorch_model"  # pytorch_model.bin, pytorch_model-00001-of-00002.bin
_WHOLE = 64 << 20  # a weight file up to this size is read whole
_EDGE = 1 << 20  # of a larger one: this much from each end,
_BLOCKS, _BLOCK = 64, 64 << 10  # and this many blocks of this size between


def weights_fingerprint(location: str | Path) -> str | None:
    """A digest of the weight files at ``location`` (a model folder, or one weight file such as a GGUF);
    None when it holds none."""
    path = Path(location)
    files = [path] if path.is_file() else sorted(p for p in path.glob("*") if _is_weight_file(p))
    if not files:
        return None
    digest = hashlib.sha256()
    for file in files:
        size = file.stat().st_size
        digest.update(f"{file.name}\0{size}\0".encode())
        with file.open("rb") as handle:
            for offset, length in _sampled_ranges(size):
                handle.seek(offset)
                digest.update(handle.read(length))
    return digest.hexdigest()


def _is_weight_file(path: Path) -> bool:
    weights = path.suffix in WEIGHT_SUFFIXES or (path.name.startswith(LEGACY_WEIGHTS_PREFIX) and path.suffix == ".bin")
    return weights and path.is_file()


def _sampled_ranges(size: int) -> list[tuple[int, int]]:
    """``(offset, length)`` of the bytes a fingerprint reads from a file of ``size`` bytes."""
    if size <= _WHOLE:
        return [(0, size)]
    step = (size - 2 * _EDGE) // (_BLOCKS + 1)
    middle = [(_EDGE + i * step, _BLOCK) for i in range(1, _BLOCKS + 1)]
    return [(0, _EDGE), *middle, (size - _EDGE, _EDGE)]


def check_weights(run: RunDir, locations: Mapping[str, str | Path | None]) -> None:
    """Record the fingerprint of each model's weights (``name → location``, None: not local) with ``run``,
    or, for a model already recorded, raise `ConfigError` naming it when its weights changed since."""
    current = {name: weights_fingerprint(loc) for name, loc in locations.items() if loc is not None}
    current = {name: fp for name, fp in current.items() if fp is not None}
    path = run.file(WEIGHTS_FILE)
    stored = read_json_file(path) if path.is_file() else {}
    for name, fingerprint in current.items():
        if name in stored and stored[name] != fingerprint:
            raise ConfigError(
                f"{run.path}: the weights of model {name!r} at {locations[name]} are not the ones this run "
                "measured (changed since); use a new run_dir, or restore those weights to resume"
            )
    if {**stored, **current} != stored:
        run.path.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({**stored, **current}, indent=2, sort_keys=True))
