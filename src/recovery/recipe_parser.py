"""`RecipeParser`: the `trl.TrlParser` of the training stages and of the tiny reasoner's trainer, reading a
recipe's checkpointing keys under the names the installed transformers knows; and transformers' import-time
print kept off the command line.

transformers renamed ``gradient_checkpointing`` / ``gradient_checkpointing_kwargs`` to
``activation_checkpointing`` / ``activation_checkpointing_kwargs`` after 5.22 (the declared floor) and warns
(``FutureWarning``) whenever a training config is built with the old names set, which TRL's configs always
are: they default ``gradient_checkpointing`` to True under the old name. The recipes and the demo write the
new names; on a transformers that has only the old ones, the parser reads them under those. Either name is
accepted in a recipe, a dict or on the command line, so a recipe written for either version reads the same
on both. When a recipe names neither, the new key takes TRL's default for the old one: the same setting as
TRL intends, without the warning.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import logging
import sys
from collections.abc import Iterable, Mapping
from typing import Any

logger = logging.getLogger(__name__)

#: transformers' deprecated training argument → its new name.
RENAMED = {
    "gradient_checkpointing": "activation_checkpointing",
    "gradient_checkpointing_kwargs": "activation_checkpointing_kwargs",
}

_INTEGRATIONS = "transformers.integrations.integration_utils"


def import_transformers_quietly() -> None:
    """Import transformers' integrations module with its stdout captured. On its first import it prints
    ``[INFO] Running in WANDB offline mode`` when ``WANDB_MODE=offline``, on stdout, before whatever the
    command prints: a one-line recipe error would no longer be one line. The text goes to this module's
    debug log instead."""
    if _INTEGRATIONS in sys.modules:
        return
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        importlib.import_module(_INTEGRATIONS)
    if captured.getvalue().strip():
        logger.debug("transformers printed on import: %s", captured.getvalue().strip())


def installed_names(config_types: Iterable[type]) -> dict[str, str]:
    """Each checkpointing key, old or new, → the name the installed training config has: the new one where
    the config declares it, else the old one. Empty when no config declares either."""
    names = {f.name for config_type in config_types for f in dataclasses.fields(config_type)}
    mapping: dict[str, str] = {}
    for old, new in RENAMED.items():
        if new in names:
            mapping[old] = mapping[new] = new
        elif old in names:
            mapping[old] = mapping[new] = old
    return mapping


def renamed(values: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """``values`` with every checkpointing key under its installed name (`installed_names`); a key given
    under both names is a `ValueError`, naming both."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        name = names.get(key, key)
        if name in out:
            both = " and ".join(sorted(k for k in values if names.get(k, k) == name))
            raise ValueError(f"{both} are the same setting: give one of them")
        out[name] = value
    return out


def renamed_flags(argv: Iterable[str], names: Mapping[str, str]) -> list[str]:
    """Command-line flags (``--key``, ``--key=value``) with every checkpointing key under its installed name."""
    out = []
    for arg in argv:
        if arg.startswith("--"):
            key, sep, value = arg[2:].partition("=")
            arg = f"--{names.get(key, key)}{sep}{value}"
        out.append(arg)
    return out


import_transformers_quietly()  # before trl imports it
from trl import TrlParser  # noqa: E402


class RecipeParser(TrlParser):
    """`trl.TrlParser` over ``dataclass_types`` that reads the checkpointing keys under their installed names
    (this module's docstring) from a ``--config`` YAML, the command line and `parse_dict`."""

    def __init__(self, dataclass_types: Any, **kwargs: Any) -> None:
        super().__init__(dataclass_types, **kwargs)
        self.names = installed_names(self.dataclass_types)
        self.defaults = self._new_name_defaults()
        self.set_defaults(**self.defaults)

    def _new_name_defaults(self) -> dict[str, Any]:
        """TRL's default of an old name, given to the new one (so neither reads as set under the old name)."""
        defaults = {}
        for config_type in self.dataclass_types:
            fields = {f.name: f for f in dataclasses.fields(config_type)}
            for old, new in RENAMED.items():
                if new in fields and old in fields and fields[old].default not in (None, dataclasses.MISSING):
                    defaults[new] = fields[old].default
        return defaults

    def parse_dict(self, args: dict[str, Any], allow_extra_keys: bool = False) -> tuple[Any, ...]:
        return super().parse_dict({**self.defaults, **renamed(args, self.names)}, allow_extra_keys=allow_extra_keys)

    def set_defaults_with_config(self, **kwargs: Any) -> list[str]:
        return super().set_defaults_with_config(**renamed(kwargs, self.names))

    def parse_args_and_config(self, args: Iterable[str] | None = None, *rest: Any, **kwargs: Any) -> tuple[Any, ...]:
        argv = list(args) if args is not None else sys.argv[1:]
        return super().parse_args_and_config(renamed_flags(argv, self.names), *rest, **kwargs)


__all__ = ["RENAMED", "RecipeParser", "import_transformers_quietly", "installed_names", "renamed", "renamed_flags"]
