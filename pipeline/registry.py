"""A small typed registry (mbrs style): `@REG.register("name")` on a class or function, then
`REG["name"]`. One registry per family (mappers, metrics, references, UQ estimators, backends,
datasets); config validation reads its choices from them, so a new entry is selectable by name
in a config without touching any list elsewhere.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from pipeline.errors import ConfigError

T = TypeVar("T")


def _expand(where: str) -> list[str]:
    """The modules `where` stands for (see Registry)."""
    if "*" in where:
        head, _, tail = where.partition(".*")
        package = importlib.import_module(head)
        names = [f"{head}.{info.name}{tail}" for info in pkgutil.iter_modules(package.__path__)
                 if info.ispkg and not info.name.startswith("_")]
        return [name for name in names if importlib.util.find_spec(name) is not None]
    module = importlib.import_module(where)
    if not hasattr(module, "__path__"):
        return [where]
    return [f"{where}.{info.name}" for info in pkgutil.iter_modules(module.__path__)
            if not info.name.startswith("_")]


class Registry(Generic[T]):
    """Named entries of one family. `discover` names where entries are registered, imported on
    first use (so `import pipeline` stays cheap): a package (its modules), a module, or a pattern
    with one `*` standing for each subpackage ("pipeline.tasks.*.task": every task folder's
    task.py, where it has one)."""

    def __init__(self, family: str, discover: tuple[str, ...] = ()) -> None:
        self.family = family
        self._entries: dict[str, T] = {}
        self._discover = discover
        self._discovered = not discover

    def _load(self) -> None:
        if self._discovered:
            return
        self._discovered = True
        for where in self._discover:
            for module in _expand(where):
                importlib.import_module(module)

    def register(self, name: str, *, replace: bool = False) -> Callable[[T], T]:
        """Decorator: register the decorated object under `name`."""
        def deco(obj: T) -> T:
            self.add(name, obj, replace=replace)
            return obj
        return deco

    def add(self, name: str, obj: T, *, replace: bool = False) -> T:
        if not isinstance(name, str) or not name:
            raise ValueError(f"{self.family} names are non-empty strings, got {name!r}")
        if name in self._entries and not replace and self._entries[name] is not obj:
            raise ValueError(f"{self.family} {name!r} is already registered (pass replace=True)")
        self._entries[name] = obj
        return obj

    def __getitem__(self, name: str) -> T:
        self._load()
        try:
            return self._entries[name]
        except KeyError:
            raise ConfigError(f"unknown {self.family} {name!r}; registered: "
                              f"{', '.join(self.names())}") from None

    def get(self, name: str, default: T | None = None) -> T | None:
        self._load()
        return self._entries.get(name, default)

    def registered_so_far(self, name: str) -> T | None:
        """The entry `name` if it is registered yet, without importing the `discover` places (for
        checks made while those are being imported)."""
        return self._entries.get(name)

    def names(self) -> tuple[str, ...]:
        self._load()
        return tuple(sorted(self._entries))

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        self._load()
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.family!r}: {', '.join(self.names())})"
