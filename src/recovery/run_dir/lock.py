"""One writer per run directory: an exclusive lock the operating system holds for the writing process and
releases when it ends, however it ends (a SIGKILL included), so nothing is left to clean up.

Two processes writing one run directory (a re-submitted cluster job, a second terminal) would each append
their rows: the tables would hold every record twice and every count read from them would be wrong. The
lock is ``flock`` on ``RUN_DIR/.lock`` (an empty file, the same in every run); on Linux it also holds across
machines on NFS, where the kernel maps it to NFS byte-range locks. The one refused is told who writes where
the kernel says (``/proc/locks``: a holder on this machine). A filesystem that cannot lock at all is said
plainly; ``RECOVERY_UNLOCKED=1`` then runs without the lock, on the user's word that only one writer runs.

The lock is re-entrant within a process (the demo runs stages that each take it), and readers (reports,
comparisons, exports that only read) never take it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from recovery.configs import ConfigError

LOCK_FILE = ".lock"
UNLOCKED_ENV = "RECOVERY_UNLOCKED"
# errno values of a filesystem that has no locks (some network and FUSE filesystems).
_NO_LOCKS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}

_held: dict[Path, int] = {}  # run directory → how many times this process holds its lock
_guard = threading.Lock()


class RunDirBusy(ConfigError):
    """Another process writes the run directory."""


def holder_of(path: str | os.PathLike, *, other: bool = False) -> str:
    """The process on this machine holding ``path``'s lock, in words (``pid 123: recovery run c.yaml``), from
    the kernel's table of locks; empty when it cannot be told (another machine, no ``/proc``) or nobody holds
    it. ``other``: a lock this process holds does not count. Reading the table takes no lock, so a reader
    asking never stands in a writer's way."""
    try:
        inode = (Path(path) / LOCK_FILE).stat().st_ino
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            if len(fields) > 5 and fields[1] == "FLOCK" and fields[5].rsplit(":", 1)[-1] == str(inode):
                pid = fields[4]
                if other and pid == str(os.getpid()):
                    continue
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                return f"pid {pid}: {' '.join(command.split())[:200]}"
    except (OSError, ValueError):
        pass
    return ""


@contextlib.contextmanager
def exclusive_writer(path: str | os.PathLike) -> Iterator[None]:
    """Hold the run directory ``path``'s lock (creating the directory) for the block; raise `RunDirBusy` in one
    line, at once, when another process holds it, and `ConfigError` when ``path`` is a file or its
    filesystem cannot lock."""
    run_dir = Path(path).absolute()
    with _guard:
        if run_dir in _held:
            _held[run_dir] += 1
            fd = None
        else:
            fd = _acquire(run_dir)
            _held[run_dir] = 1
    try:
        yield
    finally:
        with _guard:
            _held[run_dir] -= 1
            if _held[run_dir] == 0:
                del _held[run_dir]
                if fd is not None and fd >= 0:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    os.close(fd)


def _acquire(run_dir: Path) -> int:
    """The open lock file of ``run_dir``, locked; -1 when running unlocked on the user's word."""
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"run_dir {run_dir} is a file, not a directory; point run_dir at a directory")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except NotADirectoryError:
        raise ConfigError(f"run_dir {run_dir}: a part of this path is a file, not a directory") from None
    fd = os.open(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        holder = holder_of(run_dir)
        raise RunDirBusy(
            f"{run_dir} is being written by another process{f' ({holder})' if holder else ''}; wait for it to "
            "end or use another run_dir (two writers would record every row twice)"
        ) from None
    except OSError as err:
        os.close(fd)
        if err.errno not in _NO_LOCKS:
            raise
        if os.environ.get(UNLOCKED_ENV, "").lower() in {"1", "true", "yes"}:
            return -1
        raise ConfigError(
            f"{run_dir}: this filesystem cannot lock files ({err.strerror}), so a second writer could not be "
            f"kept out; use a run_dir on a local disk, or set {UNLOCKED_ENV}=1 if you are sure only one "
            "process writes it"
        ) from None
    return fd


__all__ = ["LOCK_FILE", "UNLOCKED_ENV", "RunDirBusy", "exclusive_writer", "holder_of"]
