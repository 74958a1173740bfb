"""One mechanism for every registry of things a config or a command names (datasets, interventions, backends,
rewards, analyses), and the plug-ins that add to them.

A `Registry` is a mapping from a name to a small spec, filled with the built-ins where the thing is defined
(``DATASETS = Registry("dataset", {...})``) and added to with one statement (``DATASETS["jsonl"] = spec``,
or `Registry.register`). `Registry.lookup` is the one way to find an entry by name: an unknown name is one
error listing the known ones (with the closest, when one is close) and any plug-in that failed to load.

Plug-ins: a pip-installed distribution declares entry points in the ``recovery.plugins`` group, each a
module (imported) or a callable (called with no arguments) that registers its extensions with the same
statements. They are loaded once per process, the first time any registry is read (looked up, listed,
iterated) — never when a module is imported, so a light entry point stays light — and so a ``recovery``
command started from a shell sees them. A plug-in that fails to load is one logged line naming its entry
point and the error; the built-ins and the other plug-ins are not affected.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterator, Mapping, MutableMapping
from importlib.metadata import entry_points
from types import ModuleType
from typing import Generic, TypeVar

__all__ = ["PLUGIN_GROUP", "Registry", "load_plugins", "loading_plugin", "plugin_failures"]

PLUGIN_GROUP = "recovery.plugins"

logger = logging.getLogger(__name__)

Spec = TypeVar("Spec")


class _Plugins:
    """The process's plug-in state: loaded yet, the one loading now, the failures (one line each)."""

    loaded = False
    loading: str | None = None
    failures: list[str] = []


def load_plugins() -> None:
    """Load every ``recovery.plugins`` entry point, once per process (later calls do nothing)."""
    if _Plugins.loaded:
        return
    _Plugins.loaded = True  # first: a plug-in reading a registry while it registers does not load them again
    for point in entry_points(group=PLUGIN_GROUP):
        _Plugins.loading = point.dist.name if point.dist is not None else point.name
        try:
            target = point.load()
            if callable(target) and not isinstance(target, ModuleType):
                target()
        except Exception as err:  # noqa: BLE001 — any failure of a plug-in is reported, never fatal
            reason = (str(err).strip().splitlines() or [""])[0]
            line = f"plug-in {point.name!r} ({point.value}, from {_Plugins.loading}) failed to load: "
            line += f"{type(err).__name__}: {reason}" if reason else type(err).__name__
            _Plugins.failures.append(line)
            logger.warning(line)
        finally:
            _Plugins.loading = None


def loading_plugin() -> str | None:
    """The distribution name of the plug-in being loaded now (None outside plug-in loading): the family its
    extensions are listed under."""
    return _Plugins.loading


def plugin_failures() -> tuple[str, ...]:
    """One line per plug-in that failed to load, naming its entry point and the error."""
    return tuple(_Plugins.failures)


class Registry(MutableMapping[str, Spec], Generic[Spec]):
    """Name → spec for one kind of thing (``kind``: "dataset", "intervention" …). Reading it loads the
    plug-ins first (`load_plugins`); writing it does not. ``error`` is the exception class `lookup` raises for
    an unknown name."""

    def __init__(
        self,
        kind: str,
        entries: Mapping[str, Spec] | None = None,
        *,
        error: type[Exception] = ValueError,
        plural: str | None = None,
    ) -> None:
        self.kind, self.plural, self.error = kind, plural or f"{kind}s", error
        self._entries: dict[str, Spec] = dict(entries or {})

    def __getitem__(self, name: str) -> Spec:
        load_plugins()
        return self._entries[name]

    def __setitem__(self, name: str, spec: Spec) -> None:
        self._entries[name] = spec

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        load_plugins()
        return iter(list(self._entries))

    def __len__(self) -> int:
        load_plugins()
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        load_plugins()
        return name in self._entries

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._entries)})"

    def register(self, name: str, spec: Spec) -> Spec:
        """Make ``spec`` nameable as ``name``; returns it. The same spec again is harmless (a module imported
        again); another spec under a taken name is a `ValueError`."""
        known = self._entries.get(name)
        if known is not None and known != spec:
            raise ValueError(f"{self.kind} {name!r} is already registered ({known!r})")
        self._entries[name] = spec
        return spec

    def lookup(self, name: str) -> Spec:
        """The entry called ``name``; ``error`` with `unknown`'s message for any other."""
        if name in self:
            return self._entries[name]
        raise self.error(self.unknown(name))

    def names(self) -> list[str]:
        """Every registered name, in registration order."""
        return list(self)

    def unknown(self, name: str) -> str:
        """The one-line message for an unknown ``name``: the known names, the closest one, and any plug-in that
        failed to load (it may have been the one to provide ``name``)."""
        known = sorted(self)
        close = difflib.get_close_matches(str(name), known, n=1)
        message = f"unknown {self.kind} {name!r}; known {self.plural}: {', '.join(known)}"
        message += f" (did you mean {close[0]!r}?)" if close else ""
        failures = plugin_failures()
        return message + (f"; {'; '.join(failures)}" if failures else "")
