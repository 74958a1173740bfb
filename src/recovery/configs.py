"""Strict conversion of YAML/dict configs into dataclasses.

`from_mapping(SomeConfig, data)` builds nested dataclasses and rejects unknown keys and values of the
wrong type with an error that names the full key path and, for typos, the closest known key. Configs are
plain dataclasses: defaults, docstrings and ``__post_init__`` checks live with them.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")

#: A config field's metadata key: whether a change of its value can change a run's results. A field declared
#: with False (throughput, where work runs, names) may differ when a run is resumed; every other may not.
CHANGES_RESULTS = "changes_results"


def results_neutral(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING) -> Any:
    """A config field whose value never changes a run's results (declared as such, `CHANGES_RESULTS`)."""
    return dataclasses.field(default=default, default_factory=default_factory, metadata={CHANGES_RESULTS: False})


def results_neutral_keys(cls: type) -> frozenset[str]:
    """The fields of config dataclass ``cls`` declared `results_neutral`."""
    return frozenset(f.name for f in dataclasses.fields(cls) if f.metadata.get(CHANGES_RESULTS) is False)


class ConfigError(ValueError):
    """A config value is missing, unknown or of the wrong type; the message names the key path."""


def did_you_mean(value: str, known: Iterable[str], *, label: str = "known") -> str:
    """The tail of an error about an unknown ``value``: the closest known name, else all of them."""
    known = [str(k) for k in known]
    close = difflib.get_close_matches(str(value), known, n=1)
    return f"; did you mean {close[0]!r}?" if close else f"; {label}: {', '.join(sorted(known))}"


def load_yaml(path: str | Path, *, empty_ok: bool = True) -> dict[str, Any]:
    """Read a YAML mapping, with a clear one-line error for a missing file, invalid YAML (the parser's words
    and position kept whole), a non-mapping document and, unless ``empty_ok``, an empty file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: invalid YAML: {yaml_problem(err)}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    if data is None:
        if not empty_ok:
            raise ConfigError(f"{path}: the config file is empty")
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def yaml_problem(err: yaml.YAMLError) -> str:
    """The parser's message on one line: its problem and context, each with the line and column it names
    (1-based), e.g. "expected ',' or ']', but got '<stream end>' at line 2, column 1 (while parsing a flow
    sequence at line 1, column 7)"."""
    if not isinstance(err, yaml.MarkedYAMLError):
        return " ".join(str(err).split())

    def at(text: str | None, mark: Any) -> str:
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return f"{text}{where}" if text else ""

    problem = at(err.problem, err.problem_mark) or " ".join(str(err).split())
    context = at(err.context, err.context_mark)
    return f"{problem} ({context})" if context else problem


def from_mapping(cls: type[T], data: Mapping[str, Any] | None, *, where: str = "config") -> T:
    """Build dataclass ``cls`` from ``data``, recursively and strictly."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    custom = getattr(cls, "from_config_mapping", None)
    if custom is not None:  # a config whose YAML shape is not its fields' (see ModelConfig)
        return custom(data, where=where)
    return fields_from_mapping(cls, data, where=where)


def fields_from_mapping(cls: type[T], data: Mapping[str, Any], *, where: str = "config") -> T:
    """`from_mapping` by ``cls``'s fields alone (what a ``from_config_mapping`` builds on)."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = [k for k in data if k not in fields]
    if unknown:
        key = unknown[0]
        raise ConfigError(f"{where}: unknown key {key!r}{did_you_mean(key, fields, label='known keys')}")
    kwargs = {}
    for name, f in fields.items():
        if name in data:
            kwargs[name] = _convert(hints[name], data[name], f"{where}.{name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{where}: missing required key {name!r}")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as err:
        if isinstance(err, ConfigError):
            raise
        raise ConfigError(f"{where}: {err}") from None


def _convert(hint: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for option in (a for a in args if a is not type(None)):
            try:
                return _convert(option, value, where)
            except ConfigError as err:
                errors.append(str(err))
        raise ConfigError(errors[0] if len(errors) == 1 else f"{where}: {value!r} matches none of {hint}")
    if dataclasses.is_dataclass(hint):
        return from_mapping(hint, value, where=where)
    if origin in (list, tuple, typing.Sequence) or hint in (list, tuple):
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__}")
        item = args[0] if args else Any
        items = [_convert(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if (origin is tuple or hint is tuple) else items
    if origin in (dict, typing.Mapping) or hint in (dict,):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
        vt = args[1] if len(args) == 2 else Any
        return {str(k): _convert(vt, v, f"{where}.{k}") for k, v in value.items()}
    if origin is typing.Literal:
        if value not in args:
            raise ConfigError(f"{where}: {value!r} is not one of {', '.join(map(repr, args))}")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true/false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    return value


def to_mapping(config: Any) -> dict[str, Any]:
    """A dataclass config as plain dicts/lists (for YAML dumps and run manifests), in the shape `from_mapping`
    reads: a config with its own ``to_config_mapping`` gives that."""
    return _plain(config)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        custom = getattr(value, "to_config_mapping", None)
        if custom is not None:
            return custom()
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return copy.deepcopy(value)
