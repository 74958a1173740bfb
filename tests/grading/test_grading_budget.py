"""CPU-time budgets: a busy machine does not change verdicts; hanging items still time out, named with
their budget; stuck workers are stopped; workers never outlive the process that started them.

Load is real: busy-loop processes compete for the CPUs while a batch is graded, and are always killed
when the test ends. The hanging item is a real input that keeps sympy busy far longer than any budget here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from recovery.grading import Grader
from recovery.grading.symbolic import CpuBudgetExceeded, cpu_budget
from recovery.types import Verdict

V = Verdict
#: math-verify spends far more CPU than any budget here on this one (sympy expands both huge powers),
#: in Python code.
HANGING = ("\\sqrt{2}^{9999}+\\sqrt{3}^{9999}", "\\sqrt{3}^{9999}+\\sqrt{2}^{9999}+1", "expression")


def easy_items(n: int) -> list[tuple[tuple[str, str, str], bool]]:
    """``n`` distinct ((predicted, gold, "expression"), equivalent) pairs that need math-verify."""
    items = []
    for i in range(n):
        a, b, c = 2 + i % 7, 3 + i % 11, (2, 3, 5, 6, 7)[i % 5]
        if i % 4 == 0:
            pred, gold = f"\\frac{{{a}}}{{{b}}}\\sqrt{{{c}}}", f"\\frac{{{a}\\sqrt{{{c}}}}}{{{b}}}"
            items.append(((pred, gold, "expression"), True))
        elif i % 4 == 1:
            k, off = a + i // 28, (i // 4) % 2
            items.append(((f"{k}\\sqrt{{{c}}}", f"\\sqrt{{{k * k * c + off}}}", "expression"), off == 0))
        elif i % 4 == 2:
            s = a + i // 28
            items.append(((f"x^2+{2 * s}x+{s * s}", f"(x+{s})^2", "expression"), True))
        else:
            lo = i // 4
            items.append(((f"[{lo}, \\frac{{{2 * b + 1}}}{{2}})", f"[{lo}, {b + 0.5})", "expression"), True))
    return items


@contextmanager
def busy_loops(count: int) -> Iterator[None]:
    """``count`` processes spinning on the CPU for the block (killed after it, whatever happens)."""
    loops: list[subprocess.Popen] = []
    try:
        for _ in range(count):
            loops.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
        yield
    finally:
        for p in loops:
            p.kill()
        for p in loops:
            p.wait()


def spin(cpu_s: float) -> None:
    """Use ``cpu_s`` seconds of CPU in Python code."""
    end = time.process_time() + cpu_s
    while time.process_time() < end:
        pass


# -- the CPU timer ------------------------------------------------------------------------------------------
def test_cpu_budget_counts_cpu_time_not_wall_time() -> None:
    before = signal.getsignal(signal.SIGPROF)
    with cpu_budget(0.2):
        time.sleep(0.6)  # wall time, no CPU: within budget
    with pytest.raises(CpuBudgetExceeded):
        with cpu_budget(0.2):
            spin(30)
    with pytest.raises(CpuBudgetExceeded):  # code that drops the first exception is interrupted again
        with cpu_budget(0.1):
            try:
                spin(30)
            except CpuBudgetExceeded:
                pass
            spin(30)
    assert signal.getsignal(signal.SIGPROF) is before
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)


# -- verdicts under load ------------------------------------------------------------------------------------
def grade_all(items: list[tuple[str, str, str]]) -> list:
    # timeout_s=0.5: half the reward's default, so a wall-clock budget would fail here on a busy machine.
    with Grader(workers=2, timeout_s=0.5, retry_factor=2.0, cache_size=0) as grader:
        grader.start()  # warm workers before the batch, as a long-lived grader has them
        return grader.grade_answers(items)


@pytest.mark.slow
def test_verdicts_under_cpu_load_equal_the_idle_ones_and_a_hanging_item_still_times_out() -> None:
    easy = easy_items(80)
    items = [item for item, _ in easy] + [HANGING]
    idle = grade_all(items)
    with busy_loops(4):  # on top of whatever else runs here
        loaded = grade_all(items)
    assert [g.verdict for g in idle[:-1]] == [V.CORRECT if ok else V.WRONG for _, ok in easy]  # no timeouts
    assert all(g.detail.endswith("(cpu 0.5 s)") for g in idle[:-1])  # each names its budget
    assert idle[-1].verdict is V.TIMEOUT
    assert idle[-1].detail == "no verdict within cpu 1 s; retried after no verdict within cpu 0.5 s"
    assert loaded == idle  # verdicts and details, budgets included


def test_a_cpu_timeout_keeps_its_worker() -> None:
    """The CPU timer ends the item inside the worker, which answers and takes the next item (no restart)."""
    with Grader(workers=1, timeout_s=0.5, retry_factor=None) as grader:
        grader.start()
        pid = grader._pool._workers[0].process.pid
        grades = grader.grade_answers([HANGING, ("2\\sqrt{3}", "\\sqrt{12}", "expression")])
        assert [g.verdict for g in grades] == [V.TIMEOUT, V.CORRECT]
        assert grades[0].detail == "no verdict within cpu 0.5 s"
        assert grader._pool._workers[0].process.pid == pid


def spin_in_c(pred, gold, *, rel_tol, abs_tol, timeout_s):  # noqa: ARG001 - compare_with_math_verify's signature
    """A stand-in comparison stuck in one C call, where no Python signal handler runs."""
    if pred == "$spin$":  # the prediction as math-verify parses it
        sum(range(10**14))
    return V.CORRECT, f"fake ({os.getpid()})"


def c_spinning_worker(conn, memory_mb):
    from recovery.grading.worker import worker_main

    worker_main(conn, memory_mb, compare=spin_in_c)


def test_a_worker_stuck_in_c_code_is_stopped_by_the_kernel_cpu_limit() -> None:
    grader = Grader(workers=1, timeout_s=1.0, retry_factor=None)
    grader._worker_target = c_spinning_worker
    with grader:
        grades = grader.grade_answers([("spin", "x", "expression"), ("ok", "x", "expression")])
    assert [g.verdict for g in grades] == [V.TIMEOUT, V.CORRECT]
    assert grades[0].detail == ("no verdict within cpu 1 s; stuck in one computation, stopped by the kernel CPU limit")


# -- workers never outlive their parent ---------------------------------------------------------------------
def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie has exited
    except FileNotFoundError:
        return True
    except OSError:  # pragma: no cover - no /proc
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads process states from /proc")
def test_workers_exit_when_their_parent_is_killed() -> None:
    """One worker idle, one busy on the hanging item: both exit once the parent is SIGKILLed."""
    script = textwrap.dedent(f"""
        from recovery.grading import Grader
        grader = Grader(workers=2, timeout_s=120, retry_factor=None)
        grader.start()
        print(" ".join(str(w.process.pid) for w in grader._pool._workers), flush=True)
        grader.grade_answers([{HANGING!r}])
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pids: list[int] = []
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2 and not any(_gone(p) for p in pids)
        time.sleep(1.0)  # the hanging item is in a worker by now
        parent.kill()
        parent.wait()
        for _ in range(300):  # up to ~30 s
            if all(_gone(p) for p in pids):
                break
            time.sleep(0.1)
        assert all(_gone(p) for p in pids)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for p in pids:  # never leave one behind, even when the assertion failed
            if not _gone(p):
                os.kill(p, signal.SIGKILL)
