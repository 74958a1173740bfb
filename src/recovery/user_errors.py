"""Which errors a user causes, and the one line that tells them what happened and what to do.

The command line (`recovery.cli`) prints this line and exits 2 instead of a traceback; any other error is a
bug and keeps its traceback.
"""

from __future__ import annotations

import errno
from pathlib import Path

from recovery.configs import ConfigError
from recovery.data.sources import DataError

# Write failures a user causes (a full or read-only disk, no permission): one line, not a traceback.
_DISK_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT}
_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}


def user_error_message(err: BaseException) -> str | None:
    """The one-line message of an error a user causes (bad config or data, a damaged run directory, a model
    that cannot be loaded, a disk that cannot be written, a file where an output folder must go), or None for
    anything else: a real bug keeps its traceback."""

    if isinstance(err, (ConfigError, DataError)):
        return str(err)
    if not isinstance(err, OSError):
        return None
    if err.errno in _DISK_ERRNOS:
        where = f" {err.filename}" if err.filename else ""
        remedy = "; free some space and re-run the same command to resume" if err.errno in _FULL_ERRNOS else ""
        return f"cannot write{where}: {err.strerror or err}{remedy}"
    return _file_in_the_way(err)


def _file_in_the_way(err: OSError) -> str | None:
    """A folder could not be made because a file is where it, or a folder above it, must go (an output
    option or a path naming a file), or a file could not be written or read because a folder is where it
    must go: the message names the path in the way. Other `OSError`s are not settled here."""
    if not isinstance(err.filename, str | Path):
        return None
    path = Path(err.filename)
    if err.errno == errno.EISDIR:
        return f"{path} is a directory, not a file: remove it or name another path"
    if err.errno == errno.EEXIST and path.is_file():
        return f"cannot write {path}: it is a file, where a folder must go; name another path or move it away"
    if err.errno == errno.ENOTDIR:
        blocking = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)
        if blocking is not None:
            return f"cannot write {path}: {blocking} is a file, where a folder must go; name another path or move it"
    return None
