"""Print ``name==version`` pins of the declared minimum versions of the given packages, read from pyproject.toml.

CI installs these pins in a second environment and runs the training, rewards and training-data tests there
(see `.ci/run`), so the floors in pyproject.toml are checked rather than hoped for. Reading them from
pyproject.toml, not from a hand-kept list, keeps the two from drifting apart.

A package may be declared in several places (``transformers`` in the ``hf`` and ``server`` extras); every
declaration must carry the same ``>=`` floor, or this script fails: two different floors would leave the
checked one ambiguous. A package that is declared without a ``>=`` floor fails too.

    python .ci/floors.py trl transformers accelerate datasets > floors.txt
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
# "name[extra,...] >=1.2, <3 ; marker": the name, then the rest up to an environment marker.
REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*([^;]*)")


def normalize(name: str) -> str:
    """A distribution name as PEP 503 compares it (case, ``-``/``_``/``.`` runs are the same)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def declared_floors(pyproject: dict) -> dict[str, set[str]]:
    """Every ``>=`` floor declared for each package, across the dependencies and all optional extras."""
    project = pyproject["project"]
    requirements = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        requirements.extend(extra)
    floors: dict[str, set[str]] = {}
    for requirement in requirements:
        match = REQUIREMENT.match(requirement)
        if match is None:
            continue
        name = normalize(match.group(1))
        found = floors.setdefault(name, set())
        for spec in match.group(2).split(","):
            spec = spec.strip()
            if spec.startswith(">="):
                found.add(spec[2:].strip())
    return floors


def pins(names: list[str], pyproject_path: Path = PYPROJECT) -> list[str]:
    """``name==floor`` for each of ``names``; SystemExit with a reason if a floor is missing or ambiguous."""
    floors = declared_floors(tomllib.loads(pyproject_path.read_text()))
    lines = []
    for name in names:
        found = floors.get(normalize(name))
        if found is None:
            raise SystemExit(f"{name}: not declared in {pyproject_path}")
        if len(found) != 1:
            reason = "no >= floor" if not found else f"different floors {sorted(found)}"
            raise SystemExit(f"{name}: {reason} in {pyproject_path}")
        lines.append(f"{name}=={next(iter(found))}")
    return lines


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit(__doc__)
    print("\n".join(pins(argv)))


if __name__ == "__main__":
    main(sys.argv[1:])
