"""SciBench (Wang et al., ICML 2024) textbook problems: part of the paper's Science domain (§3.2).

Sources: the JSON files of github.com/mandyyyyii/scibench ``dataset/original/*.json`` (one per textbook;
``<book>_sol.json`` are the problems released with worked solutions; 692 problems in all), or the Hub copy
``xw27/scibench`` (the same JSON files as one ``train`` split). Fields: ``problem_text``,
``answer_number``, ``unit``, ``source`` (the book), ``problemid``, ``answer_latex``, ``comment``, sometimes
``solution``.

The question and the gold answer follow SciBench's released evaluation (``eval/eval_zero.py::run``):

* the question is ``problem_text + " The unit of the answer is <unit>."``;
* when the unit starts with a power of ten (``$10^{-19} \\mathrm{~J}$``), the power is removed from the
  unit shown (``post_process.py::remove_not``) and the gold becomes ``answer_number × 10^k``
  (``post_process.py::cal_not``), so the model answers in plain units. Unlike ``remove_not`` this
  implementation keeps the ``$…$`` delimiters balanced (``$\\mathrm{10^7} \\mathrm{~km}$`` → ``$\\mathrm{~km}$``
  rather than ``} \\mathrm{~km}$``) and omits the sentence when the unit is blank;
* ``answer_number`` oddities are normalised: thousands separators (``89,034.79``) and U+2212 minus signs.

Tolerance (``Problem.metadata["rel_tol"]``/``["abs_tol"]``, read by `recovery.grading`), ``tolerance=``:

* ``"paper"`` (default): relative 5 %, as the SciBench paper scores textbook answers (and as
  `recovery.grading.SOURCE_TOLERANCES` assumes for SciBench);
* ``"official"``: the released scorer ``eval/eval_zero.py::equiv``: ``math.isclose`` with ``abs_tol=0.1``
  when the (scaled) gold is ≥ 1, else ``rel_tol=0.1``;
* ``None``: no tolerance in the metadata (grading then falls back to its per-source table).

Ids are ``scibench/<book>/<problemid>`` (whitespace in ``problemid`` becomes ``_``). ``problemid`` is not
unique within a book (11 clashes, one of them an exact duplicate row in ``thermo_sol.json``), so repeats
get ``#2``, ``#3`` … in load order (files in name order, rows in file order).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Literal

from recovery.data.common import DatasetSpec, check_known, in_folder, reject, text_fields
from recovery.data.skips import Skips
from recovery.data.sources import DataError, HubCopy, memory_or_hub_rows, read_file_rows
from recovery.types import AnswerType, Problem

__all__ = [
    "SCIBENCH_BOOKS",
    "SCIBENCH_HUB_ID",
    "SCIBENCH_HUB",
    "PAPER_REL_TOL",
    "load_scibench",
    "scibench_problems",
    "split_unit",
    "normalize_answer_number",
    "official_tolerance",
]

#: Textbook → subject, as grouped in the SciBench paper (Table 1).
SCIBENCH_BOOKS: Mapping[str, str] = {
    "atkins": "chemistry",
    "chemmc": "chemistry",
    "quan": "chemistry",
    "matter": "chemistry",
    "fund": "physics",
    "class": "physics",
    "thermo": "physics",
    "diff": "math",
    "stat": "math",
    "calculus": "math",
}
SCIBENCH_HUB_ID = "xw27/scibench"
#: The Hub copy read when neither ``path`` nor ``dataset`` is given.
SCIBENCH_HUB = HubCopy(SCIBENCH_HUB_ID, "train")
#: SciBench paper: textbook answers are correct within a 5 % relative tolerance.
PAPER_REL_TOL = 0.05

_EXP = r"(?:\{\s*([-+\u2212]?\s*\d+)\s*\}|([-+\u2212]?\d+))"
# A leading power of ten, bare (10^{-19}, 10 ^ {-6}) or wrapped (\mathrm{10^7}), after an optional "$".
_POWER = re.compile(r"^(\$?)\s*(?:\\mathrm\s*\{\s*10\s*\^\s*" + _EXP + r"\s*\}|10\s*\^\s*" + _EXP + r")")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


def _tidy_unit(unit: str) -> str:
    """Collapse whitespace, drop empty ``$ $`` pairs and padding just inside a single ``$…$``."""
    text = " ".join(unit.split())
    text = re.sub(r"\$[\s~]*\$", " ", text)
    text = " ".join(text.split())
    match = re.fullmatch(r"\$[\s~]*(.*?)\s*\$", text)
    if match and "$" not in match.group(1):
        text = f"${match.group(1)}$"
    text = re.sub(r"^\$[\s~]+", "$", text)
    return "" if text in ("", "$") else text


def split_unit(unit: str) -> tuple[str, int]:
    """``(unit without its leading power of ten, exponent)``; exponent 0 when there is none.

    >>> split_unit(" $10^{-19} \\\\mathrm{~J}$")
    ('$\\\\mathrm{~J}$', -19)
    >>> split_unit(" $\\\\mathrm{10^7} \\\\mathrm{~km}$"), split_unit("$10^{16}$ photons"), split_unit(" $")
    (('$\\\\mathrm{~km}$', 7), ('photons', 16), ('', 0))
    """
    match = _POWER.match(unit.strip())
    if not match:
        return _tidy_unit(unit), 0
    exponent = next(g for g in match.groups()[1:] if g is not None)
    rest = match.group(1) + unit.strip()[match.end() :]
    return _tidy_unit(rest), int(exponent.replace("\u2212", "-").replace(" ", ""))


def normalize_answer_number(text: str) -> str | None:
    """``answer_number`` as a plain decimal string (minus signs and thousands separators fixed), or None.

    >>> normalize_answer_number("89,034.79"), normalize_answer_number("\\u22121.642876"), normalize_answer_number("n/a")
    ('89034.79', '-1.642876', None)
    """
    cleaned = _THOUSANDS.sub("", text.strip().replace("\u2212", "-").replace("$", "").strip())
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        return None
    return cleaned if value.is_finite() else None


def _scaled(number: str, exponent: int) -> str:
    """``number × 10^exponent`` written exactly: plain decimals for ordinary magnitudes, else ``1.91e-47``."""
    if exponent == 0:
        return number
    value = Decimal(number).scaleb(exponent)
    if value == 0:
        return "0"
    return format(value, "f") if -5 <= value.adjusted() <= 8 else format(value, "e")


def official_tolerance(gold: str) -> tuple[float, float]:
    """(rel_tol, abs_tol) of SciBench's ``eval_zero.py::equiv`` for this gold: abs 0.1 if ≥ 1, else rel 0.1."""
    return (0.0, 0.1) if float(gold) >= 1 else (0.1, 0.0)


def scibench_problems(
    rows: Iterable[tuple[int, str, Mapping[str, Any]]],
    *,
    file_stem: str | None = None,
    tolerance: Literal["paper", "official"] | None = "paper",
    books: Sequence[str] | None = None,
    seen: dict[str, int] | None = None,
    skips: Skips | None = None,
    strict: bool = False,
) -> list[Problem]:
    """Problems from ``(index, location, row)`` triples of SciBench rows (see the module docstring).

    ``seen`` carries the problem-id counts across calls so repeated ids get ``#2`` suffixes.
    """
    if tolerance not in ("paper", "official", None):
        raise ValueError(f"tolerance must be 'paper', 'official' or None, got {tolerance!r}")
    seen = {} if seen is None else seen
    problems = []
    for index, where, row in rows:
        fields = text_fields(
            row, ("problem_text", "answer_number", "source"), where, skips, strict, numbers=("answer_number",)
        )
        if fields is None:
            continue
        text, raw_answer, book_raw = fields
        book = book_raw.strip()
        if books is not None and book not in books:
            continue
        number = normalize_answer_number(raw_answer)
        if number is None:
            reject("answer_not_numeric", where, skips, strict)
            continue
        unit_raw = row.get("unit") if isinstance(row.get("unit"), str) else ""
        unit, exponent = split_unit(unit_raw)
        answer = _scaled(number, exponent)
        question = text.rstrip() + (f" The unit of the answer is {unit}." if unit else "")
        problemid = "_".join(str(row.get("problemid") or index).split())  # " page 61-10" → "page_61-10"
        base = f"scibench/{book}/{problemid}"
        seen[base] = seen.get(base, 0) + 1
        problem_id = base if seen[base] == 1 else f"{base}#{seen[base]}"
        metadata: dict[str, Any] = {
            "book": book,
            "subject": SCIBENCH_BOOKS.get(book, "unknown"),
            "problemid": problemid,
            "unit": unit,
            "unit_raw": unit_raw,
            "power_of_ten": exponent,
            "answer_number": raw_answer,
            "answer_latex": row.get("answer_latex") or "",
            "has_solution": bool(row.get("solution")),
            "index": index,
        }
        if file_stem is not None:
            metadata["file"] = file_stem
        if tolerance == "paper":
            metadata.update(rel_tol=PAPER_REL_TOL, abs_tol=0.0)
        elif tolerance == "official":
            metadata["rel_tol"], metadata["abs_tol"] = official_tolerance(answer)
        problems.append(
            Problem(
                domain="science",
                question=question,
                answer=answer,
                answer_type=AnswerType.NUMERIC,
                source=f"scibench/{book}",
                metadata=metadata,
                id=problem_id,
            )
        )
    return problems


def _json_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    for folder in (path, path / "original", path / "dataset" / "original"):
        files = sorted(p for p in folder.glob("*.json") if p.is_file())
        if files:
            return files
    raise DataError(f"{path}: no SciBench *.json files (expected dataset/original/<book>.json)")


def load_scibench(
    *,
    path: str | Path | None = None,
    dataset: Iterable[Mapping[str, Any]] | None = None,
    books: Sequence[str] | None = None,
    include_sol: bool = True,
    tolerance: Literal["paper", "official"] | None = "paper",
    hub: HubCopy = SCIBENCH_HUB,
    skips: Skips | None = None,
    strict: bool = False,
) -> list[Problem]:
    """Load SciBench textbook problems (domain ``science``, answer type numeric).

    ``path``: a ``dataset/original`` folder (or the repository root, or one ``<book>.json``); without it
    the rows of ``dataset`` (e.g. a ``datasets.Dataset`` already in memory), else the Hub copy ``hub``
    (`HubCopy`, by default `SCIBENCH_HUB`). ``books`` limits to
    some textbooks; ``include_sol=False`` drops the ``<book>_sol.json`` files (local files only: the Hub
    copy does not say which file a row came from). See the module docstring for ``tolerance``.
    """
    check_known(books, SCIBENCH_BOOKS, "SciBench book(s)")
    seen: dict[str, int] = {}
    if path is None:
        rows = memory_or_hub_rows(dataset, hub, skips=skips, strict=strict)
        return scibench_problems(rows, tolerance=tolerance, books=books, seen=seen, skips=skips, strict=strict)
    problems: list[Problem] = []
    for file in _json_files(Path(path).expanduser()):
        if not include_sol and file.stem.endswith("_sol"):
            continue
        rows = read_file_rows(file, skips=skips, strict=strict)
        problems.extend(
            scibench_problems(
                rows, file_stem=file.stem, tolerance=tolerance, books=books, seen=seen, skips=skips, strict=strict
            )
        )
    return problems


def _load(path: str | Path | None, book: str | None, limit: int | None, **options: Any) -> list[Problem]:
    if book is not None:
        options["books"] = [book]
    return load_scibench(path=in_folder(path, "scibench"), **options)[:limit]


SCIBENCH = DatasetSpec(
    "SciBench textbook problems, 692 (scibench/<book> for one book)",
    _load,
    tuple(SCIBENCH_BOOKS),
    hub=SCIBENCH_HUB,
    options_of=(load_scibench,),
)
