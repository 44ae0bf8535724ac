"""A small typed registry (mbrs style): `@REG.register("name")` on a class or function, then
`REG["name"]`. One registry per family (mappers, metrics, references, UQ estimators, backends,
datasets); config validation reads its choices from them, so a new entry is selectable by name
in a config without touching any list elsewhere.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from pipeline.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """Named entries of one family. `discover` names packages whose modules register entries:
    they are imported on first use (so `import pipeline` stays cheap)."""

    def __init__(self, family: str, discover: tuple[str, ...] = ()) -> None:
        self.family = family
        self._entries: dict[str, T] = {}
        self._discover = discover
        self._discovered = not discover

    def _load(self) -> None:
        if self._discovered:
            return
        self._discovered = True
        for package in self._discover:
            pkg = importlib.import_module(package)
            for info in pkgutil.iter_modules(pkg.__path__):
                if not info.name.startswith("_"):
                    importlib.import_module(f"{package}.{info.name}")

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
