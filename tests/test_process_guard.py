"""Worker processes exit when the process they work for is SIGKILLed: none is left behind."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable

import pytest

WORK = textwrap.dedent("""
    import os, time

    def slow(x):
        print("worker", os.getpid(), flush=True)
        time.sleep(600)
        return x
""")
SCRIPT = textwrap.dedent("""
    from recovery.parallel import map_chunks
    from guarded_work import slow

    if __name__ == "__main__":
        for _ in map_chunks(slow, range(4), workers=2):
            pass
""")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie waiting for its reaper is gone for every purpose.
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _descendants(pid: int) -> set[int]:
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True, check=True).stdout
    children: dict[int, list[int]] = {}
    for line in out.splitlines():
        child, parent = map(int, line.split())
        children.setdefault(parent, []).append(child)
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _line_reader(process: subprocess.Popen, wait_s: float = 60.0) -> Callable[[], str]:
    """A function giving ``process``'s next stdout line, read by a thread, or "" once the process has
    printed nothing for ``wait_s`` (or closed its stdout): a parent that hangs before its workers start is
    then started again like one that died, instead of blocking a read until the test's own timeout."""
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in process.stdout:
            lines.put(line)
        lines.put("")

    threading.Thread(target=read, daemon=True).start()

    def next_line() -> str:
        try:
            return lines.get(timeout=wait_s)
        except queue.Empty:
            return ""

    return next_line


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc and ps")
def test_sigkilled_parent_leaves_no_worker_forkserver_or_tracker(tmp_path):
    script = tmp_path / "main.py"
    script.write_text(SCRIPT)
    (tmp_path / "guarded_work.py").write_text(WORK)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    errors = []
    for _ in range(3):  # a parent that dies before its workers start (a loaded machine) is started again
        parent = subprocess.Popen(
            [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        workers, other = [], []
        next_line = _line_reader(parent)
        try:
            while len(workers) < 2 and len(other) < 50 and (line := next_line()):
                match = re.fullmatch(r"worker (\d+)\n", line)  # other output (a library's notice) is skipped
                if match:
                    workers.append(int(match.group(1)))
                else:
                    other.append(line)
            if len(workers) == 2:
                family = _descendants(parent.pid)  # the workers, the forkserver, the resource tracker
                assert set(workers) <= family
                break
        finally:
            parent.send_signal(signal.SIGKILL)
            parent.wait()
        errors.append((other, parent.stderr.read()[-2000:]))
    else:
        pytest.fail(f"the parent never started its workers: {errors}")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(_alive(pid) for pid in family):
        time.sleep(0.2)
    left = [pid for pid in family if _alive(pid)]
    for pid in left:  # never leave them behind, even when the test fails
        os.kill(pid, signal.SIGKILL)
    assert not left


def test_parent_gone_by_pid_or_by_parenthood() -> None:
    from recovery.process_guard import parent_gone

    assert not parent_gone(os.getppid())
    assert not parent_gone(os.getppid(), direct=True)
    assert not parent_gone(os.getpid())  # this process exists ...
    assert parent_gone(os.getpid(), direct=True)  # ... but is not its own parent


DIRECT_CHILD = textwrap.dedent("""
    import sys, time
    from recovery.process_guard import guard_worker

    guard_worker(int(sys.argv[1]), 0.1, direct=True)
    print("guarded", flush=True)
    time.sleep(600)
""")
MIDDLE = textwrap.dedent("""
    import os, subprocess, sys, time

    child = subprocess.Popen([sys.executable, "-c", sys.argv[1], str(os.getpid())])
    print(child.pid, flush=True)
    time.sleep(600)
""")


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_a_direct_guard_ends_a_child_whose_parent_died_unreaped() -> None:
    """A SIGKILLed parent that nobody has reaped yet still has its pid; its child is re-parented at once, and
    the direct guard ends it."""
    middle = subprocess.Popen([sys.executable, "-c", MIDDLE, DIRECT_CHILD], stdout=subprocess.PIPE, text=True)
    child = None
    try:
        child = int(middle.stdout.readline())
        assert middle.stdout.readline() == "guarded\n"
        middle.send_signal(signal.SIGKILL)  # not waited for until the end: a zombie, its pid still taken
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _alive(child):
            time.sleep(0.1)
        assert not _alive(child)
    finally:
        middle.kill()
        middle.wait()
        if child is not None and _alive(child):
            os.kill(child, signal.SIGKILL)
