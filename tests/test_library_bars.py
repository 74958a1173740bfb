"""`library_bars_off`, `datasets_bars_off`: no bar from the libraries inside the block, each library's switch as
it was afterwards, whether transformers was imported before the block or inside it (as a run loading a model
imports it)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from huggingface_hub import utils as hub
from transformers.utils import logging

from recovery.library_bars import library_bars_off


def switches() -> tuple[bool, bool]:
    return not hub.are_progress_bars_disabled(), logging.is_progress_bar_enabled()


def test_both_off_inside_and_as_they_were_after():
    logging.enable_progress_bar()  # both on (an earlier test in this process may have left them otherwise)
    assert switches() == (True, True)
    with library_bars_off():
        assert switches() == (False, False)
    assert switches() == (True, True)
    logging.disable_progress_bar()  # a user who turned transformers' off (and with it the hub's)
    try:
        with library_bars_off():
            assert switches() == (False, False)
        assert switches() == (False, False)
    finally:
        logging.enable_progress_bar()
    assert switches() == (True, True)


def test_transformers_imported_inside_the_block_has_its_bars_back():
    script = textwrap.dedent(
        """
        import sys
        from recovery.library_bars import library_bars_off
        assert "transformers" not in sys.modules
        with library_bars_off():
            from transformers.utils import logging
            assert not logging.is_progress_bar_enabled()
        from huggingface_hub.utils import are_progress_bars_disabled
        print(logging.is_progress_bar_enabled(), are_progress_bars_disabled())
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False"]


def test_datasets_bars_off_inside_and_as_they_were_after():
    from datasets.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    from recovery.library_bars import datasets_bars_off

    enable_progress_bars()
    with datasets_bars_off():
        assert are_progress_bars_disabled()
    assert not are_progress_bars_disabled()
    disable_progress_bars()  # a user who turned them off keeps them off
    try:
        with datasets_bars_off():
            assert are_progress_bars_disabled()
        assert are_progress_bars_disabled()
    finally:
        enable_progress_bars()
