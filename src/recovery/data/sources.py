"""Where rows come from: local JSON / JSONL / Parquet files, the Hugging Face Hub, or an object in memory.

Every loader in `recovery.data` reads through these helpers so that they all behave the same way:

* rows are plain mappings, each with its position in the source (stable ids are built from it) and a
  human-readable location (``file.jsonl line 7``) used in skip examples and error messages;
* a malformed line in a JSONL file is a counted skip (an error under ``strict=True``), while a file that
  cannot be read at all is a `DataError` naming the file;
* the Hub is reached only through ``datasets.load_dataset``, imported lazily (``datasets`` is the optional
  ``recovery[data]`` extra), and the function can be replaced by any callable with the same signature —
  that is how the tests exercise the Hub path without a network.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from recovery.data.skips import Skips

__all__ = [
    "DataError",
    "RowError",
    "Row",
    "HubLoader",
    "HubCopy",
    "read_file_rows",
    "hub_dataset",
    "iter_rows",
    "file_memory_or_hub_rows",
    "memory_or_hub_rows",
    "is_local_path",
    "reject",
]

Row = Mapping[str, Any]
#: ``datasets.load_dataset``-compatible callable: ``loader(path, name, split=..., revision=...)``.
HubLoader = Callable[..., Any]


_UNREADABLE = object()  # placeholder for a JSONL line that did not decode (already counted)


class DataError(ValueError):
    """A dataset cannot be read: missing file, unreadable format, unknown name. The message says which."""


class RowError(DataError):
    """One row is unusable and ``strict=True`` was asked for; the message names the file (or dataset) and row."""


def is_local_path(source: Any) -> bool:
    """Whether ``source`` names an existing local file or directory."""
    return isinstance(source, (str, Path)) and Path(source).expanduser().exists()


def reject(reason: str, where: str, skips: Skips | None, strict: bool) -> None:
    """Count a bad row under ``reason`` (with ``where`` as an example), or raise `RowError` when ``strict``."""
    if strict:
        raise RowError(f"{where}: {reason}")
    if skips is not None:
        skips.add(reason, where)


def _read_json_rows(path: Path) -> list[Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: cannot read JSON ({exc})") from exc
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        # BBH files are {"canary": ..., "examples": [...]}; accept the usual wrappers too.
        for key in ("examples", "data", "rows", "instances"):
            if isinstance(data.get(key), list):
                return data[key]
    raise DataError(f"{path}: expected a JSON list of objects or an object with an 'examples' list")


def _iter_jsonl(path: Path, skips: Skips | None, strict: bool) -> Iterator[tuple[str, Any]]:
    # A line that is not JSON is skipped here; it still takes a position, so later ids do not shift.
    # Lines are decoded one at a time, so one undecodable byte costs its line (a counted skip naming the file
    # and line), not the whole import.
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise DataError(f"{path}: cannot open ({exc})") from exc
    with handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            where = f"{path.name} line {number}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                reason = f"bad_utf8 (byte {raw[exc.start]:#04x} at column {exc.start + 1})"
                reject(reason if strict else "bad_utf8", where, skips, strict)
                yield where, _UNREADABLE
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                reject(f"bad_json ({exc.msg})" if strict else "bad_json", where, skips, strict)
                row = _UNREADABLE
            yield where, row


def _iter_parquet(path: Path) -> Iterator[tuple[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - pyarrow ships with the data extra
        raise DataError(f"{path}: reading Parquet needs pyarrow (pip install 'recovery[data]')") from exc
    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise DataError(f"{path}: cannot read Parquet ({exc})") from exc
    index = 0
    for batch in parquet.iter_batches(batch_size=1024):  # bounded memory on large trace dumps
        for row in batch.to_pylist():
            yield f"{path.name} row {index}", row
            index += 1


def read_file_rows(
    path: str | Path, *, skips: Skips | None = None, strict: bool = False
) -> Iterator[tuple[int, str, Row]]:
    """Yield ``(index, location, row)`` from a ``.json``, ``.jsonl``/``.ndjson`` or ``.parquet`` file.

    ``index`` counts every record of the file (blank JSONL lines excepted), including skipped ones, so it is
    a stable position. Records that are not JSON objects are skipped as ``not_an_object``, undecodable JSONL
    lines as ``bad_json`` (either raises `RowError` when ``strict``).
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        items: Iterable[tuple[str, Any]] = _iter_jsonl(path, skips, strict)
    elif suffix == ".json":
        items = ((f"{path.name} row {i}", row) for i, row in enumerate(_read_json_rows(path)))
    elif suffix == ".parquet":
        items = _iter_parquet(path)
    else:
        raise DataError(f"{path}: unsupported file type {path.suffix!r} (use .json, .jsonl or .parquet)")
    for index, (where, row) in enumerate(items):
        if isinstance(row, Mapping):
            yield index, where, row
        elif row is not _UNREADABLE:
            reject("not_an_object", where, skips, strict)


def _default_loader() -> HubLoader:
    try:
        from datasets import load_dataset
    except ImportError as exc:
        raise DataError("loading from the Hugging Face Hub needs `datasets` (pip install 'recovery[data]')") from exc
    return load_dataset


def hub_dataset(
    repo_id: str,
    *,
    name: str | None = None,
    split: str,
    revision: str | None = None,
    loader: HubLoader | None = None,
) -> Any:
    """``loader(repo_id, name, split=split, revision=revision)`` — by default ``datasets.load_dataset``.

    Failures (no network, unknown config) are re-raised as `DataError` with the repository named, and a
    hint to pass local files instead.
    """
    load = loader or _default_loader()
    try:
        return load(repo_id, name, split=split, revision=revision)
    except DataError:
        raise
    except Exception as exc:  # noqa: BLE001 - datasets raises many types (ConnectionError, ValueError, ...)
        config = f" config {name!r}" if name else ""
        raise DataError(
            f"cannot load {repo_id!r}{config} split {split!r} from the Hub ({type(exc).__name__}: {exc}); "
            "pass path=... to read local files instead"
        ) from exc


def iter_rows(
    rows: Iterable[Any], *, label: str, skips: Skips | None = None, strict: bool = False
) -> Iterator[tuple[int, str, Row]]:
    """``(index, location, row)`` for an in-memory dataset (a ``datasets.Dataset``, a list of dicts, ...)."""
    for index, row in enumerate(rows):
        where = f"{label} row {index}"
        if isinstance(row, Mapping):
            yield index, where, row
        else:
            reject("not_an_object", where, skips, strict)


@dataclass(frozen=True)
class HubCopy:
    """Where a dataset's rows are on the Hugging Face Hub, in ``datasets.load_dataset``'s terms: the repository,
    the split (None: the loader picks the repository's usual one), the revision (None: the default branch) and
    the function that loads them (None: ``datasets.load_dataset``; tests pass one that needs no network).

    Each loader that can fall back to the Hub declares its default copy beside its Hub id; a run config
    changes it with the flat dataset options of `OPTIONS` (`with_options`).

    >>> HubCopy("lukaemon/bbh", "test").with_options({"revision": "abc", "limit": 3}).revision
    'abc'
    """

    repo_id: str
    split: str | None = None
    revision: str | None = None
    loader: HubLoader | None = None

    #: The dataset options (``load_problems(name, **options)``, a run config's ``dataset``) naming a field.
    OPTIONS: ClassVar[Mapping[str, str]] = {
        "hub_id": "repo_id",
        "split": "split",
        "revision": "revision",
        "loader": "loader",
    }

    @classmethod
    def check_values(cls, options: Mapping[str, Any]) -> None:
        """Raise `DataError` naming the first Hub option in ``options`` whose value cannot make a copy: ``hub`` a
        `HubCopy`, ``loader`` a function, the others text (a run config gives text, never the objects)."""
        hub, loader = options.get("hub"), options.get("loader")
        if hub is not None and not isinstance(hub, HubCopy):
            raise DataError(f"option 'hub' takes a HubCopy, not {type(hub).__name__} (give hub_id, split, revision)")
        if loader is not None and not callable(loader):
            raise DataError(
                f"option 'loader' takes a function such as datasets.load_dataset, not {type(loader).__name__}"
            )
        for option, takes in (("hub_id", str), ("split", str | None), ("revision", str | None)):
            if option in options and not isinstance(options[option], takes):
                raise DataError(f"option {option!r} takes text, not {type(options[option]).__name__}")

    def with_options(self, options: MutableMapping[str, Any]) -> HubCopy:
        """This copy with the fields that ``options`` sets, which are taken out of ``options``."""
        changes = {field: options.pop(option) for option, field in self.OPTIONS.items() if option in options}
        return replace(self, **changes) if changes else self

    def label(self, name: str | None = None) -> str:
        """How its rows are located in skips and errors: ``repo[split] row 3``, ``repo/name[split] row 3``."""
        return f"{self.repo_id}{'' if name is None else '/' + name}[{self.split}]"

    def rows(self, name: str | None = None) -> Any:
        """The copy's rows (config ``name``, if any) through `hub_dataset`."""
        if self.split is None:
            raise DataError(f"{self.repo_id!r}: no split given for its Hub copy (set split=...)")
        return hub_dataset(self.repo_id, name=name, split=self.split, revision=self.revision, loader=self.loader)


def memory_or_hub_rows(
    dataset: Iterable[Any] | None,
    hub: HubCopy,
    *,
    skips: Skips | None = None,
    strict: bool = False,
    narrow: Callable[[Any], Any] | None = None,
) -> Iterator[tuple[int, str, Row]]:
    """``(index, location, row)`` of ``dataset`` (rows in memory, located as ``dataset row 3``), or, when it is
    None, of the Hub copy ``hub`` (located as ``hub_id[split] row 3``).

    The loaders' fallback when no local ``path`` is given. The Hub is reached here, not on first iteration,
    so a failed download is a `DataError` from the loader call itself. ``narrow``, when given, maps the rows
    (in memory or from the Hub) to those worth reading before any row reaches Python, e.g. a ``datasets``
    column filter.
    """
    if dataset is not None:
        label, data = "dataset", dataset
    else:
        label, data = hub.label(), hub.rows()
    if narrow is not None:
        data = narrow(data)
    return iter_rows(data, label=label, skips=skips, strict=strict)


def file_memory_or_hub_rows(
    path: str | Path | None,
    dataset: Iterable[Any] | None,
    hub: HubCopy,
    *,
    skips: Skips | None = None,
    strict: bool = False,
    **keywords: Any,
) -> Iterator[tuple[int, str, Row]]:
    """``(index, location, row)`` of the local file ``path`` (JSONL/JSON/Parquet, `read_file_rows`) when it is
    given, else `memory_or_hub_rows` of ``dataset`` or the Hub copy ``hub`` (``keywords``: its others). The
    choice of a loader that reads one file in its source's schema."""
    if path is not None:
        return read_file_rows(path, skips=skips, strict=strict)
    return memory_or_hub_rows(dataset, hub, skips=skips, strict=strict, **keywords)
