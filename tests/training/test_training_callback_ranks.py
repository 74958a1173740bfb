"""The `RobustnessCallback` across processes: a real `transformers.Trainer` on the tiny reasoner under
``accelerate launch`` with two CPU processes (gloo), against the same script on one process.

``accelerate launch --cpu --num_processes 2`` starts a single process unless given an MPI host file, so the
two processes are started the way accelerate starts several GPUs (``--multi_gpu``, torchrun) with CUDA
hidden; the script's ``use_cpu=True`` then makes them a gloo (MULTI_CPU) group.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from recovery.training.minibench_result import RankShare, dealt, generate_share, merge_shares, waited

SCRIPT = Path(__file__).with_name("ranks_script.py")


def launch(out: Path, n_processes: int) -> None:
    import recovery

    out.mkdir()
    if n_processes == 1:
        mode = ["--cpu", "--num_processes", "1"]
    else:
        with socket.socket() as s:  # a free port: other test sessions may hold accelerate's default one
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mode = ["--multi_gpu", "--num_processes", str(n_processes), "--main_process_port", str(port)]
    src = str(Path(recovery.__file__).resolve().parents[1])  # the recovery this test imported
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]),
        "CUDA_VISIBLE_DEVICES": "",
        "OMP_NUM_THREADS": "1",
    }
    cmd = [sys.executable, "-m", "accelerate.commands.launch", *mode, str(SCRIPT), "--out", str(out)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    written = sorted(p.name for p in out.glob("*.json"))  # how far the ranks got, should it fail
    assert done.returncode == 0, f"wrote {written}\n" + done.stdout[-3000:] + done.stderr[-6000:]


@pytest.mark.slow
def test_two_ranks_share_the_generation_and_log_what_one_process_logs(tmp_path):
    launch(tmp_path / "two", 2)
    launch(tmp_path / "one", 1)

    single = json.loads((tmp_path / "one" / "rank0.json").read_text())["generated"]
    ranks = [json.loads((tmp_path / "two" / f"rank{r}.json").read_text())["generated"] for r in (0, 1)]
    assert [step for step, _ in single] == [0, 2]  # at train begin, then after the second step
    for e, (step, every_id) in enumerate(single):
        shares = [set(rank[e][1]) for rank in ranks]
        assert all(rank[e][0] == step for rank in ranks)
        assert all(shares) and not shares[0] & shares[1]  # both ranks generated, nothing twice
        assert shares[0] | shares[1] == set(every_id)  # and together every request

    one = json.loads((tmp_path / "one" / "metrics.json").read_text())
    two = json.loads((tmp_path / "two" / "metrics.json").read_text())
    assert [row["step"] for row in one] == [0, 2] and one[0]["robustness/n_chains"] == 8.0
    assert two == one  # every logged number, bit for bit (the wall time left out)


def test_dealt_split_gives_each_process_every_nth_request_and_merging_restores_them():
    from types import SimpleNamespace

    from accelerate.state import PartialState

    items = list(range(11))
    order = dealt(items, 3)
    assert order == [0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8]
    for rank in range(3):  # accelerate's own split of the dealt list, for each of three processes
        process = SimpleNamespace(num_processes=3, process_index=rank)
        with PartialState.split_between_processes(process, order) as mine:
            assert mine == items[rank::3]
    shares = [RankShare(1, {"b": ["y"]}, failed=1), RankShare(0, {"a": ["x"]})]
    assert merge_shares(shares) == ({"a": ["x"], "b": ["y"]}, 1)
    with pytest.raises(RuntimeError, match="process 1 failed to generate its share: OSError: disk"):
        merge_shares([RankShare(0, {}), RankShare(1, {}, error="OSError: disk")])
    with pytest.raises(RuntimeError, match="two processes"):
        merge_shares([RankShare(0, {"a": ["x"]}), RankShare(1, {"a": ["x"]})])
    with pytest.raises(ValueError, match="n_processes"):
        dealt(items, 0)


def test_a_share_that_fails_is_returned_not_raised():
    """A rank whose generation fails must still reach the gather, where the others wait for it."""

    def no_engine():
        raise OSError("CUDA out of memory\nsecond line")

    share, generator = generate_share(object(), no_engine, [], rank=1)
    assert share.error == "OSError: CUDA out of memory" and share.texts == {} and generator is None
    with pytest.raises(RuntimeError, match="process 1 failed"):
        merge_shares([RankShare(0, {"a": ["x"]}), share])


def test_a_wait_near_ddp_timeout_is_named(caplog):
    shares = [RankShare(0, {}, seconds=100.0), RankShare(1, {}, seconds=1100.0)]
    assert waited(shares, ddp_timeout=3600) == 1000.0 and not caplog.records
    with caplog.at_level("WARNING"):
        waited(shares, ddp_timeout=1800)
    assert "waited 1000 s for the slowest share (ddp_timeout 1800 s)" in caplog.text
