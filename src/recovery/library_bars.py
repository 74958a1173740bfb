"""The progress bars the libraries draw on their own (huggingface_hub's downloads, transformers' "Loading
weights", datasets' per-shard maps), off for a block of work asked to show none, and as they were afterwards.

transformers reads huggingface_hub's switch once, when it is imported, so a block that imports it (a stage
loading a model) would leave it off; leaving the block sets it to what it would have read before.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def library_bars_off() -> Iterator[None]:
    """No progress bar from huggingface_hub or transformers inside the block; each library's switch restored
    on leaving it (a bar the user had turned off stays off)."""
    from huggingface_hub import utils as hub

    hub_was_on = library_bars_on()
    logging = _transformers_logging()
    transformers_was_on = hub_was_on if logging is None else logging.is_progress_bar_enabled()
    turn_library_bars_off()
    try:
        yield
    finally:
        logging = _transformers_logging()  # perhaps imported inside the block, with the block's switch
        if logging is not None and transformers_was_on:  # sets huggingface_hub's too: it is set again below
            logging.enable_progress_bar()
        elif logging is not None:
            logging.disable_progress_bar()
        if hub_was_on:
            hub.enable_progress_bars()
        else:
            hub.disable_progress_bars()


@contextmanager
def datasets_bars_off() -> Iterator[None]:
    """No progress bar from `datasets` inside the block (its own switch, apart from huggingface_hub's); restored
    on leaving it."""
    from datasets.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    was_on = not are_progress_bars_disabled()
    disable_progress_bars()
    try:
        yield
    finally:
        if was_on:
            enable_progress_bars()


def library_bars_on() -> bool:
    """Whether huggingface_hub draws its bars in this process: what a worker process started from it (a model
    replica) is told, so that it draws them as this process does."""
    from huggingface_hub import utils as hub

    return not hub.are_progress_bars_disabled()


def turn_library_bars_off() -> None:
    """huggingface_hub's and transformers' bars off in this process, for good (a worker process told so)."""
    from huggingface_hub import utils as hub

    hub.disable_progress_bars()
    logging = _transformers_logging()
    if logging is not None:
        logging.disable_progress_bar()


def _transformers_logging():
    """transformers' logging module, or None while transformers is not imported (importing it here would cost
    seconds to a run that never loads it)."""
    return sys.modules.get("transformers.utils.logging")
