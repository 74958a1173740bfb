"""``python -m recovery …``: the ``recovery`` command of this interpreter (what tests and scripts start, so the
command is the one of the environment running them, whatever ``recovery`` is first on ``PATH``)."""

from __future__ import annotations

import sys

from recovery.cli import main

if __name__ == "__main__":
    sys.exit(main())
