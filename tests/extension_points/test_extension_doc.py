"""docs/architecture.md's "Where to add …" section is what the extension-point tests do: each of its code
blocks is marked with the test that runs it, and is in that test — its code verbatim (indentation aside), its
imports among the test's imports. A block that drifts from its test, or a test that stops doing what the doc
says, fails here."""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
SECTION = re.compile(r"^## Where to add …$(?P<body>.*?)^## ", re.S | re.M)
# A block marked ``<!-- test: PATH -->`` on the line before its opening fence (both maybe indented in a list).
BLOCK = re.compile(
    r"^(?P<indent> *)<!-- test: (?P<test>\S+) -->\n(?P=indent)```(?P<lang>\w*)\n(?P<code>.*?)\n *```", re.S | re.M
)
EXTENSION_POINTS = ("dataset", "intervention", "backend", "reward", "analysis", "style")


def blocks() -> list[tuple[str, str, str]]:
    """(test path, language, code) of every marked block of the section, in order."""
    section = SECTION.search(DOC.read_text(encoding="utf-8"))
    assert section, "docs/architecture.md has no '## Where to add …' section"
    return [(m["test"], m["lang"], textwrap.dedent(m["code"])) for m in BLOCK.finditer(section["body"])]


def imported(tree: ast.AST) -> set[tuple[str, str]]:
    """(module, name) of every import in ``tree``: ``("", "json")`` for ``import json``."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(("", alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.update((node.module or "", alias.name) for alias in node.names)
    return names


def without_imports(code: str) -> str:
    """``code`` less its top-level import statements (and the blank lines around what is left)."""
    tree = ast.parse(code)
    lines = code.splitlines()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            lines[node.lineno - 1 : node.end_lineno] = [""] * (node.end_lineno - node.lineno + 1)
    return "\n".join(lines).strip("\n")


def contains(text: str, block: str) -> bool:
    """Whether ``block``'s lines are consecutive lines of ``text``, at one indentation."""
    lines, wanted = text.splitlines(), block.splitlines()
    return any(textwrap.dedent("\n".join(lines[i : i + len(wanted)])) == block for i in range(len(lines)))


def test_every_extension_point_has_its_test_and_its_steps():
    tests = {test for test, _, _ in blocks()}
    assert tests == {f"tests/extension_points/test_extension_{point}.py" for point in EXTENSION_POINTS}
    assert all((ROOT / test).is_file() for test in tests)


def marked() -> list:
    counts: dict[str, int] = {}
    params = []
    for test, lang, code in blocks():
        point = Path(test).stem.removeprefix("test_extension_")
        counts[point] = counts.get(point, 0) + 1
        params.append(pytest.param(test, lang, code, id=f"{point}-{counts[point]}-{lang}"))
    return params


@pytest.mark.parametrize(("test", "lang", "code"), marked())
def test_each_block_is_in_its_test(test, lang, code):
    source = (ROOT / test).read_text(encoding="utf-8")
    if lang == "python":
        assert imported(ast.parse(code)) <= imported(ast.parse(source)), (
            f"an import of the doc's block is not in {test}"
        )
        code = without_imports(code)
    assert contains(source, code), f"{test} does not hold this block of docs/architecture.md:\n{code}"
