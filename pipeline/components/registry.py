"""A small typed registry (mbrs style): `@REG.register("name")` on a class or function, then
`REG["name"]`. One registry per family (mappers, metrics, references, UQ estimators, backends,
datasets); config validation reads its choices from them, so a new entry is selectable by name
in a config without touching any list elsewhere.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar

from pipeline.runtime.errors import ConfigError

T = TypeVar("T")


def _expand(where: str) -> list[str]:
    """The modules `where` stands for (see Registry)."""
    if "*" in where:
        head, _, tail = where.partition(".*")
        package = importlib.import_module(head)
        names = [
            f"{head}.{info.name}{tail}"
            for info in pkgutil.iter_modules(package.__path__)
            if info.ispkg and not info.name.startswith("_")
        ]
        return [name for name in names if importlib.util.find_spec(name) is not None]
    module = importlib.import_module(where)
    if not hasattr(module, "__path__"):
        return [where]
    return [
        f"{where}.{info.name}"
        for info in pkgutil.iter_modules(module.__path__)
        if not info.name.startswith("_")
    ]


def _registering_module() -> tuple[str, str | None]:
    """(module name, file) of the code registering an entry: the innermost caller outside this
    file that is a module's body or lies outside the `pipeline` package (a plugin calling one
    of the project's helpers is the plugin; a built-in task's module body is itself)."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name != __name__ and (
            frame.f_code.co_name == "<module>" or not name.startswith("pipeline")
        ):
            return name, frame.f_globals.get("__file__")
        frame = frame.f_back
    return "", None


REGISTRIES: list[Registry] = []  # every registry made, in order (plugin code keys, pipeline.config)


class Registry(Generic[T]):
    """Named entries of one family. `discover` names where entries are registered, imported on
    first use (so `import pipeline` stays cheap): a package (its modules), a module, or a pattern
    with one `*` standing for each subpackage ("pipeline.tasks.*.task": every task folder's
    task.py, where it has one)."""

    def __init__(self, family: str, discover: tuple[str, ...] = ()) -> None:
        self.family = family
        self._entries: dict[str, T] = {}
        self._origins: dict[str, tuple[str, str | None]] = {}  # name -> (module, file)
        REGISTRIES.append(self)
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
        origin = _registering_module()
        if name in self._entries and not replace and self._entries[name] is not obj:
            # one file imported twice under two module names (pytest's rootdir-relative names
            # for a plugin folder without a parent __init__.py) replaces its own entry
            again = origin[1] is not None and origin[1] == self._origins.get(name, ("", None))[1]
            if not again:
                raise ValueError(
                    f"{self.family} {name!r} is already registered (pass replace=True)"
                )
        self._entries[name] = obj
        self._origins[name] = origin
        return obj

    def origin(self, name: str) -> str | None:
        """The module that registered `name` (None if it is not registered)."""
        found = self._origins.get(name)
        return None if found is None else found[0]

    def __getitem__(self, name: str) -> T:
        self._load()
        try:
            return self._entries[name]
        except KeyError:
            raise ConfigError(
                f"unknown {self.family} {name!r}; registered: {', '.join(self.names())}"
            ) from None

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


# ---------------------------------------------------------------------------------------------
# plugins: modules a config names (`plugins=[...]`) whose registrations it then uses


def load_plugins(plugins: Sequence[str]) -> None:
    """Import the modules `plugins` names (the config's `plugins`: their registrations become
    selectable by name), from the working directory too: as `python -m` finds them, so do the
    console scripts."""
    import importlib
    import os
    import sys

    plugins = list(plugins or ())
    if plugins and os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())
    for module in plugins:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name != module and not module.startswith(exc.name + "."):
                raise ConfigError(
                    f"plugins: {module!r} imports {exc.name!r}, which is not "
                    f"installed: pip install it (or fix the import)"
                ) from None
            raise ConfigError(
                f"plugins: cannot import {module!r} ({exc}); it must be importable "
                f"from the working directory ({os.getcwd()}) or an installed "
                "package (or add its folder to PYTHONPATH)"
            ) from None
        except Exception as exc:  # noqa: BLE001  the plugin's own error, said in one line
            where = ""
            if isinstance(exc, SyntaxError):
                where = f" at {exc.filename}:{exc.lineno}"
            else:
                tb = exc.__traceback__
                while tb is not None and tb.tb_next is not None:
                    tb = tb.tb_next
                if tb is not None:
                    where = f" at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
            raise ConfigError(
                f"plugins: importing {module!r} failed with "
                f"{type(exc).__name__}{where}: {exc}; fix the plugin"
            ) from None


_SOURCE_DIGESTS: dict[tuple[str, int], str] = {}  # (module, id) -> digest of its file as loaded


def _module_file(name: str) -> str | None:
    """Module `name`'s source file: the loaded module's, else where importing it would find it
    (a module a plugin loads later, inside a function); None for neither."""
    module = sys.modules.get(name)
    if module is not None:
        return getattr(module, "__file__", None)
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return None
    return spec.origin if spec is not None and spec.has_location else None


def _file_digest(name: str) -> str:
    """SHA-256 of module `name`'s file: as first asked for in this process while it is loaded
    (the code that runs: a file edited after the import is not what this process executes),
    the file as it is now while it is not (it is what a later import will run)."""
    import hashlib
    from pathlib import Path

    module = sys.modules.get(name)
    if module is None:
        return hashlib.sha256(Path(_module_file(name)).read_bytes()).hexdigest()
    cached = (name, id(module))
    if cached not in _SOURCE_DIGESTS:
        _SOURCE_DIGESTS[cached] = hashlib.sha256(Path(module.__file__).read_bytes()).hexdigest()
    return _SOURCE_DIGESTS[cached]


def _local_imports(name: str, folder) -> set[str]:
    """The loaded modules under `folder` that module `name` imports (its own source read:
    `import x`, `from . import y`, `from .z import w`, `importlib.import_module("x")` and
    `__import__("x")` with a literal name; a name built at run time is not seen)."""
    import ast
    from pathlib import Path

    file = Path(_module_file(name))
    package = name if file.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(file.read_bytes())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            try:
                base = (
                    importlib.util.resolve_name("." * node.level + (node.module or ""), package)
                    if node.level
                    else node.module
                )
            except (ImportError, ValueError):
                continue
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and (
                getattr(node.func, "attr", None) == "import_module"
                or getattr(node.func, "id", None) == "__import__"
            )
        ):
            try:
                targets = [importlib.util.resolve_name(node.args[0].value, package)]
            except (ImportError, ValueError):
                continue
        else:
            continue
        for target in targets:
            if target == "pipeline" or target.startswith("pipeline."):
                continue  # the project's own code: versioned by the stages' code versions
            where = _module_file(target)
            if where is not None and Path(where).resolve().is_relative_to(folder):
                found.add(target)
    return found


def _source_digest(name: str, folder) -> str:
    """SHA-256 over module `name` and every module of `folder` it imports, transitively."""
    import hashlib
    from pathlib import Path

    todo, seen = [name], {name}
    while todo:
        for child in _local_imports(todo.pop(), folder) - seen:
            seen.add(child)
            todo.append(child)
    digest = hashlib.sha256()
    for module in sorted(seen):
        rel = Path(_module_file(module)).resolve().relative_to(folder).as_posix()
        digest.update(f"{rel}:{_file_digest(module)}\n".encode())
    return digest.hexdigest()[:20]


def plugin_code(plugins: Sequence[str], names: set[str]) -> dict[str, str]:
    """{module: SHA-256 of its source} for each module of a plugin (`plugins`) that registered
    one of `names` (the parts a stage uses), over the module and the modules it imports from
    its plugin's folder. In the stage's cache key: editing a plugin's code reruns the stages
    that use the parts it defines, and only those. {} without plugins (keys as before)."""
    from pathlib import Path

    plugins = list(plugins or ())
    if not plugins or not names:
        return {}
    load_plugins(plugins)
    folders = {}
    for plugin in plugins:
        file = getattr(sys.modules.get(plugin), "__file__", None)
        if file is not None:
            folders[plugin] = Path(file).resolve().parent
    out = {}
    for origin in sorted(
        {
            registry.origin(name)
            for registry in REGISTRIES
            for name in names
            if registry.registered_so_far(name) is not None
        }
        - {None, ""}
    ):
        file = getattr(sys.modules.get(origin), "__file__", None)
        if file is None:
            continue
        where = Path(file).resolve()
        plugin = next(
            (
                p
                for p, f in folders.items()
                if origin == p or origin.startswith(p + ".") or where.is_relative_to(f)
            ),
            None,
        )
        if plugin is not None:  # its imports followed anywhere under the folder it was found
            out[origin] = _source_digest(origin, _import_root(plugin, folders[plugin]))
    return out


def _import_root(plugin: str, folder):
    """The sys.path folder `plugin` was imported from (the working directory for `my_tasks.x`
    in it): the user's code beside the plugin (a sibling package it imports) is followed too."""
    root = folder
    for _ in range(plugin.count(".") + (1 if folder.name == plugin.rpartition(".")[2] else 0)):
        root = root.parent
    return root
