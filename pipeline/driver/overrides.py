"""The keys of `python -m pipeline key=value ...`, checked before Hydra composes anything: an
unknown key is answered with one line naming the closest valid ones,

    unknown key 'datset'; did you mean dataset=?

and never with Hydra's "To append to your config use +datset=...": that advice, followed, added a
key no part of the pipeline reads (`+wandb.enable=false` left W&B on without a word). `+key=`,
`++key=` and `~key` name real keys too. The valid keys are the structured schemas' (pipeline/config.py,
which every conf/ group extends) and the config groups of conf/; below a free-form mapping
(mappers, metrics, uq.groups, dataset.overrides, ...) any key is accepted here and checked by
`validate`. Hydra's own keys (hydra.*, hydra/...) and its flags are left to Hydra.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from functools import lru_cache
from typing import Any

OPEN = "open"  # a mapping of free-form keys (or Any): every key below it is accepted here


class Parts(dict):
    """Settings by part name (mappers, metrics, uq.groups): a registered part's settings are
    known; another name may be a plugin's part (`plugins=`), left to `validate`."""


class _Lazy:
    """A Parts node built when first walked into (uq.groups' defaults import pandas)."""

    def __init__(self, factory: Any) -> None:
        self.factory, self.node = factory, None

    def get(self) -> Any:
        if self.node is None:
            self.node = _parts(self.factory())
        return self.node


def _parts(defaults: Any) -> Any:
    if (
        not isinstance(defaults, dict)
        or not defaults
        or not all(isinstance(v, dict) for v in defaults.values())
    ):
        return OPEN
    return Parts(
        {
            name: {k: OPEN if isinstance(v, (dict, list)) else None for k, v in settings.items()}
            for name, settings in defaults.items()
        }
    )


def _node(tp: Any) -> Any:
    """A dataclass: its fields' nodes; a mapping, list or Any: OPEN (a mapping filled by its
    default factory with settings by part: Parts); a scalar: None."""
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return {
            f.name: _Lazy(f.default_factory)
            if typing.get_origin(hints[f.name]) is dict
            and f.default_factory is not dataclasses.MISSING
            else _node(hints[f.name])
            for f in dataclasses.fields(tp)
        }
    origin = typing.get_origin(tp)
    if tp is Any or origin in (dict, list) or tp in (dict, list):
        return OPEN
    return None


def _get(node: Any) -> Any:
    return node.get() if isinstance(node, _Lazy) else node


def _conf_groups() -> set[str]:
    """Config groups of conf/ ("model", "hydra/launcher", ...), wherever conf/ is."""
    from pipeline.runtime.resources import conf_dir

    conf = conf_dir()
    return {str(p.relative_to(conf).as_posix()) for p in conf.rglob("*") if p.is_dir()}


@lru_cache(maxsize=1)
def schema() -> tuple[dict, frozenset]:
    """(the key tree of the top-level Config, the config group names)."""
    from pipeline.config import Config

    return _node(Config), frozenset(_conf_groups())


def _flat(tree: dict, prefix: str = "") -> list[str]:
    out = []
    for name, sub in tree.items():
        out.append(prefix + name)
        sub = _get(sub)
        if isinstance(sub, dict):
            out += _flat(sub, prefix + name + ".")
    return out


def _closest(word: str, names: list[str]) -> list[str]:
    """The names close to `word` (difflib), the runners-up only when about as close as the best."""

    def score(name: str) -> float:  # beam: beam_width, a prefix, counts as close
        ratio = difflib.SequenceMatcher(None, word, name).ratio()
        return max(ratio, 0.7) if len(word) >= 3 and name.startswith(word) else ratio

    scored = sorted(((score(n), n) for n in set(names)), reverse=True)
    best = scored[0][0] if scored else 0.0
    return [n for score, n in scored[:3] if score >= max(0.6, best - 0.1)]


def _parent(key: str, tree: dict) -> tuple[int, dict]:
    """How many leading parts of the key are known mappings, and the last of them."""
    parts, node, depth = key.split("."), tree, 0
    for part in parts[:-1]:
        sub = _get(node.get(part))
        if not isinstance(sub, dict):
            break
        node, depth = sub, depth + 1
    return depth, node


def _suggest(key: str, tree: dict, groups: frozenset) -> list[str]:
    """The closest valid keys: among the siblings of the first unknown part, else any key
    whose last part is close to the key's last part (a key under the wrong parent)."""
    parts = key.split(".")
    depth, node = _parent(key, tree)
    prefix = "".join(p + "." for p in parts[:depth])
    names = list(node) + ([g for g in groups if not g.startswith("hydra")] if not depth else [])
    found = [prefix + n for n in _closest(parts[depth], names)]
    if not found:  # num_samples=5: generation.n_samples
        last: dict[str, list[str]] = {}
        for full in _flat(tree):
            last.setdefault(full.rsplit(".", 1)[-1], []).append(full)
        found = [full for n in _closest(parts[-1], list(last)) for full in last[n]]
    return list(dict.fromkeys(found))[:3]


def known(key: str, tree: dict | None = None, groups: frozenset | None = None) -> bool:
    """A key of the schema (or below a free-form mapping), or a config group."""
    if tree is None or groups is None:
        tree, groups = schema()
    if key in groups:
        return True
    node: Any = tree
    for part in key.split("."):
        node = _get(node)
        if node == OPEN or (isinstance(node, Parts) and part not in node):
            return True
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _parsed(argv: list[str], deletions: bool) -> list:
    """Hydra's parse of the command line's overrides (with `~key` deletions or not); [] for
    none, or for a syntax error (Hydra says where)."""
    candidates = [
        a for a in argv if not a.startswith("-") and ("=" in a or (deletions and a.startswith("~")))
    ]
    if not candidates:
        return []
    try:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        return OverridesParser.create().parse_overrides(candidates)
    except Exception:  # noqa: BLE001  a syntax error: Hydra says where
        return []


def syntax_problem(argv: list[str]) -> str | None:
    """An override Hydra's grammar cannot read (`a=b=c`, `x=[1,`, a URL with `=` in its query
    left unquoted), in one line with the fix; None when every one parses."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for arg in argv:
        if arg.startswith("-") or not ("=" in arg or arg.startswith("~")):
            continue
        try:
            parser.parse_overrides([arg])
        except Exception as exc:  # noqa: BLE001  Hydra's grammar error, said in one line
            reason = " ".join(str(exc).split("\n")[0].split())[:160]
            key = arg.split("=", 1)[0]
            return (
                f"{arg!r} cannot be read as an override ({reason}); quote a value holding "
                f"= [ ] ( ) or spaces: {key}='...'"
            )
    return None


def unknown_key_problem(argv: list[str]) -> str | None:
    """The first override of the command line whose key is neither a config key nor a config
    group, in one line with the closest valid keys; None when every key is known (or the line
    is left to Hydra: its flags, its own keys, a syntax it reports itself)."""
    parsed = _parsed(argv, deletions=True)
    tree, groups = schema()
    for override in parsed:
        key = override.key_or_group
        if key == "hydra" or key.startswith(("hydra.", "hydra/")) or known(key, tree, groups):
            continue
        close = _suggest(key, tree, groups)
        depth, parent = _parent(key, tree)
        if close:
            hint = "did you mean " + " or ".join(f"{k}=" for k in close) + "?"
        elif depth:
            hint = f"{'.'.join(key.split('.')[:depth])} has {', '.join(sorted(parent))}"
        else:
            hint = "no config key or group has that name; `python -m pipeline --cfg job` lists them"
        return f"unknown key {key!r}; {hint}"
    return None


def _field(key: str) -> tuple[Any, bool] | None:
    """(the schema's type of `key`, whether it may be null), Optional unwrapped; None where the
    key is no field of the schema (a group choice, a free-form mapping's key, a plugin's)."""
    import types

    from pipeline.config import Config

    tp: Any = Config
    optional = False
    for part in key.split("."):
        if not dataclasses.is_dataclass(tp):
            return None
        hints = typing.get_type_hints(tp)
        if part not in hints:
            return None
        tp, optional = hints[part], False
        if typing.get_origin(tp) in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            optional = len(args) < len(typing.get_args(tp))
            tp = args[0] if len(args) == 1 else Any
    return tp, optional


def _scalar_type(key: str) -> type | None:
    """The type of the schema's scalar field `key` (int, float, bool or str; Optional
    unwrapped), or None where the key is no typed scalar field."""
    found = _field(key)
    return found[0] if found is not None and found[0] in (int, float, bool, str) else None


def _article(tp: type) -> str:
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}[tp]


def _type_problem(key: str, value: Any, tp: type) -> str | None:
    """What OmegaConf would refuse for a field of type `tp` (its own nodes decide: yes/no for a
    bool, "3" for an int), plus a float that is not finite; None where `value` fits."""
    import math

    from omegaconf.errors import ValidationError
    from omegaconf.nodes import BooleanNode, FloatNode, IntegerNode, StringNode

    node = {int: IntegerNode, float: FloatNode, bool: BooleanNode, str: StringNode}[tp]
    try:
        got = node(value)._value()
    except ValidationError:
        if tp is int and isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return f"{key}={value!r}: an integer is expected; write {int(value)}"
        what = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}
        return f"{key}={value!r}: {what[tp]} is expected"
    if tp is float and got is not None and not math.isfinite(got):
        return f"{key}={value!r}: a finite number is expected"
    return None


def value_type_problem(argv: list[str]) -> str | None:
    """The first override whose value does not fit its field's type (generation.n_samples=2.0,
    dataset.limit=1e9, dataset.max_new_tokens=nan, model.temperature=inf), in one line with
    the fix; None when all fit. Hydra would say it with a traceback-like page and exit 1."""
    _, groups = schema()
    for override in _parsed(argv, deletions=True):
        key = override.key_or_group
        if key.startswith("hydra"):
            continue
        if key in groups:  # a config group: its choice can be neither removed nor null
            if override.is_delete():
                return f"~{key} removes the {key} choice the pipeline needs; choose one instead"
            if not override.is_sweep_override() and override.value() is None:
                return f"{key}=null: choose a {key} (e.g. the one of conf/{key}/)"
            continue
        if (found := _field(key)) is None:
            continue
        tp, optional = found
        if override.is_delete():  # a nested setting that must be there (top-level lists may go)
            if not optional and (tp in (int, float, bool, str) or "." in key):
                return f"~{key} removes a setting the pipeline reads; set it instead ({key}=...)"
            continue
        if typing.get_origin(tp) is list and not override.is_sweep_override():
            value = override.value()
            if value is None and not optional:
                return f"{key}=null: this setting cannot be null; give a list, e.g. {key}=[a,b]"
            if value is not None and not isinstance(value, list):
                return f"{key}={value!r}: a list is expected, e.g. {key}=[{value}]"
            continue
        if dataclasses.is_dataclass(tp):  # a string may choose a config group (task=ticks)
            if not override.is_sweep_override() and not isinstance(override.value(), (dict, str)):
                return (
                    f"{key} is a group of settings, not a value: set one of them, e.g. "
                    f"{key}.{dataclasses.fields(tp)[0].name}=..."
                )
            continue
        if tp not in (int, float, bool, str):
            continue
        if override.is_sweep_override():
            values = [v for v in override.sweep_iterator()]
        else:
            values = [override.value()]
        for value in values:
            if value is None and not optional:
                return f"{key}=null: this setting cannot be null; give {_article(tp)}"
            if (problem := _type_problem(key, value, tp)) is not None:
                return problem
    return None
