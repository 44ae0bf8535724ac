"""The configuration resolved once: Hydra's composed config -> a frozen, typed `Cell` with its
`Task` (lightning-hydra-template instantiates at the entry point; lm-evaluation-harness builds a
Task once). Every entry point (a pipeline cell, the scorer, the server, the API, the doctor)
calls `resolve_cell(cfg)` after `validate(cfg)`; stages and components take the objects and
never the config, so a setting has one source: the table below.

    config key                               -> object
    experiment, stage, output_root,          -> Cell.<same name>
      results_dir, cache_dir, device
    model.* / backend.* / dataset.* /        -> Cell.model / .backend / .dataset / .generation /
      generation.* / evaluation.* / wandb.*     .evaluation / .wandb (the schema's dataclasses,
      report_figures.*                          frozen: pipeline.config), .report_figures
    reading.unreadable, reading.truncated    -> Cell.reading (ReadingRule)
    uq.estimators                            -> Cell.uq.estimators
    uq.groups.<group>                        -> Cell.uq.groups[group] (the group's typed settings)
    task.name / .space / .mapper /           -> Task.<same name>
      .reference / .prompt / .metrics
    task.space_options + the task.options    -> Task.space_options (the space's keywords; a key
      the space's constructor names             given both ways must agree)
    mappers.<task.mapper> + task.extractor/  -> Task.mapper_settings (the mapper's Config)
      task.equivalence + task.options it names
    metrics.<m> + task.options it names      -> Task.metric_settings[m] (each metric's Config)
    task.extractor, task.equivalence         -> Task.extractor, Task.equivalence (read by the
                                                evaluation's judge and the estimators' NLI)
    task.decisions, task.options             -> Task.decisions, Task.options
    plugins, report_models, rehearsal        -> Cell.<same name> (tuples, read-only mappings)

Cache keys are computed from these objects with the same values the config held (scripts/
cache_slices.py checks every stage's slice over 43 configurations), so artifacts written before
stay current.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pipeline.artifacts.schema import producer_of
from pipeline.components.parts import (
    SHARED_TASK_SETTINGS,
    TASK_PART_NODES,
    FrozenDict,
    freeze,
    part_config,
    thaw,
)
from pipeline.config import structured
from pipeline.runtime.errors import ConfigError
from pipeline.stages.map import ReadingRule
from pipeline.tasks.contract import MAPPERS, METRICS
from pipeline.uncertainty.estimators import GROUPS, groups_of

C = TypeVar("C")


@dataclass(frozen=True)
class Task:
    """A task resolved: its registered parts (pipeline/tasks/) and their typed settings."""

    name: str
    space: str
    space_options: Mapping[str, Any]
    mapper: str
    mapper_settings: Any
    reference: str
    prompt: str
    metrics: tuple[str, ...]
    metric_settings: Mapping[str, Any]
    decisions: Mapping[str, Mapping[str, Any]]
    options: Mapping[str, Any]
    extractor: Any
    equivalence: Any
    _spaces: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def latent_space(self) -> Any:
        """The task's latent space, built once."""
        if "space" not in self._spaces:
            from pipeline.latent import get_space

            self._spaces["space"] = get_space(self.space, **thaw(self.space_options))
        return self._spaces["space"]

    def decision_spaces(self) -> dict[str, Any]:
        """{extra decision (task.decisions): its latent space}, built once."""
        if "decisions" not in self._spaces:
            from pipeline.latent import get_space

            self._spaces["decisions"] = {
                name: get_space(spec["space"], **thaw(spec.get("options", {})))
                for name, spec in self.decisions.items()
            }
        return dict(self._spaces["decisions"])

    @property
    def reference_kind(self) -> Any:
        from pipeline.data.references import REFERENCES

        return REFERENCES[self.reference]


@dataclass(frozen=True)
class UQSettings:
    """The estimators asked for (`uq.estimators`) and their groups' typed settings."""

    estimators: tuple[str, ...]
    groups: Mapping[str, Any]


@dataclass(frozen=True)
class Cell:
    """One (experiment, model, dataset) cell resolved: what every stage and component reads."""

    experiment: str
    stage: str
    output_root: str
    results_dir: str
    cache_dir: str
    device: str
    model: Any
    backend: Any
    dataset: Any
    task: Task
    generation: Any
    uq: UQSettings
    evaluation: Any
    reading: ReadingRule
    wandb: Any
    report_models: tuple[str, ...]
    report_figures: Any
    plugins: tuple[str, ...]
    rehearsal: Mapping[str, Any] | None
    # the whole configuration as plain, resolved values: recorded (W&B run config), never read
    # for a setting
    recorded: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def root(self) -> Path:
        """The cell's folder: <output_root>/<experiment>/<model>/<dataset>."""
        return Path(self.output_root) / self.experiment / self.model.name / self.dataset.name

    @property
    def name(self) -> str:
        """ "experiment/model/dataset": recorded in every manifest a stage writes."""
        return f"{self.experiment}/{self.model.name}/{self.dataset.name}"

    @property
    def producer(self) -> str:
        return producer_of(self.experiment)


@dataclass(frozen=True)
class ReportSettings:
    """What the report of an experiment reads (a sweep's primary config has no cell: only these
    keys are read from it)."""

    experiment: str
    output_root: str
    results_dir: str
    report_models: tuple[str, ...]
    report_figures: Any
    evaluation: Any
    wandb: Any
    recorded: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


# the keys a report run records in W&B (the report reads artifacts, not one cell's settings)
REPORT_KEYS = ("experiment", "output_root", "results_dir", "report_models", "evaluation", "metrics")


def resolve_report(cfg: Any) -> ReportSettings:
    """The report's settings from a composed config, each key resolved on its own (a sweep's
    cell keys may not resolve outside a cell)."""
    from omegaconf import OmegaConf

    def typed(key: str, cls: type) -> Any:  # a sweep's primary config may leave cell keys unset
        node = cfg.get(key)
        values = (
            OmegaConf.to_container(node, resolve=True, throw_on_missing=False)
            if OmegaConf.is_config(node)
            else dict(node or {})
        )
        return freeze(cls(**{k: v for k, v in values.items() if v != "???"}))

    recorded = {
        k: OmegaConf.to_container(cfg[k], resolve=True) if OmegaConf.is_config(cfg[k]) else cfg[k]
        for k in REPORT_KEYS
        if k in cfg
    }
    return ReportSettings(
        experiment=str(cfg.experiment),
        output_root=str(cfg.output_root),
        results_dir=str(cfg.results_dir),
        report_models=tuple(cfg.get("report_models") or ()),
        report_figures=typed("report_figures", structured.ReportFiguresConfig),
        evaluation=typed("evaluation", structured.EvaluationConfig),
        wandb=typed("wandb", structured.WandbConfig),
        recorded=freeze(recorded),
    )


def resolve_task(cfg: Any) -> Task:
    """The task of a composed config (its parts' settings checked: ConfigError naming the key)."""
    from omegaconf import OmegaConf

    from pipeline.mapping.settings import EquivalenceConfig, ExtractorConfig

    t = cfg.task
    return Task(
        name=str(t.name),
        space=str(t.space),
        space_options=freeze(space_settings(cfg)),
        mapper=str(t.mapper),
        mapper_settings=freeze(mapper_config(cfg)),
        reference=str(t.reference),
        prompt=str(t.prompt),
        metrics=tuple(t.metrics),
        metric_settings=FrozenDict({m: freeze(metric_config(cfg, m)) for m in t.metrics}),
        decisions=freeze(OmegaConf.to_container(t.decisions, resolve=True) or {}),
        options=freeze(task_options(cfg)),
        extractor=freeze(part_config(ExtractorConfig, t.extractor, "task.extractor")),
        equivalence=freeze(part_config(EquivalenceConfig, t.equivalence, "task.equivalence")),
    )


def resolve_cell(cfg: Any) -> Cell:
    """The cell of a composed (and validated) config: the one place that reads it."""
    from omegaconf import OmegaConf

    groups = {f.name: f.type for f in dataclasses.fields(structured.Config)}

    def typed(key: str) -> Any:  # the group's schema dataclass, whatever built the config
        return freeze(part_config(getattr(structured, groups[key]), cfg.get(key), key))

    reading = cfg.get("reading") or {}
    estimators = tuple(cfg.uq.estimators)
    recorded = OmegaConf.to_container(cfg, resolve=True)
    recorded.pop("hydra", None)
    return Cell(
        experiment=str(cfg.experiment),
        stage=str(cfg.stage),
        output_root=str(cfg.output_root),
        results_dir=str(cfg.results_dir),
        cache_dir=str(cfg.cache_dir),
        device=str(cfg.device),
        model=typed("model"),
        backend=typed("backend"),
        dataset=typed("dataset"),
        task=resolve_task(cfg),
        generation=typed("generation"),
        uq=UQSettings(
            estimators,
            FrozenDict({g: freeze(group_config(cfg, g)) for g in groups_of(list(estimators))}),
        ),
        evaluation=typed("evaluation"),
        reading=ReadingRule(
            str(reading.get("unreadable", "discard")), str(reading.get("truncated", "read"))
        ),
        wandb=typed("wandb"),
        report_models=tuple(cfg.get("report_models") or ()),
        report_figures=typed("report_figures"),
        plugins=tuple(cfg.get("plugins") or ()),
        rehearsal=freeze(recorded.get("rehearsal")),
        recorded=freeze(recorded),
    )


# The config's readers: the typed settings of each part from the composed config (also what
# `validate` checks before anything runs).


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
        values = dict(
            (
                OmegaConf.to_container(values, resolve=True)
                if OmegaConf.is_config(values)
                else values
            )
            or {}
        )
        clash = sorted(set(shared) & set(values))
        if clash:
            raise ConfigError(
                f"{where}.{clash[0]}: set it as task.{clash[0]} (shared by every "
                "stage that uses it)"
            )
        hints = typing.get_type_hints(config_class)
        for key in shared:
            values[key] = OmegaConf.to_container(cfg.task[key], resolve=True)
            part_config(hints[key], values[key], f"task.{key}")  # a bad value named where it is set
        if node in TASK_PART_NODES:
            values.update(_from_task_options(cfg, config_class, where, values))
    except OmegaConfBaseException as exc:  # e.g. an ${oc.env:...} whose variable is unset
        raise ConfigError(
            f"{where}: a setting it reads cannot be resolved: {str(exc).splitlines()[0]}"
        ) from None
    return part_config(config_class, values, where)


def task_options(cfg: Any) -> dict[str, Any]:
    """`task.options`, resolved ({} where the config has none)."""
    from omegaconf import OmegaConf

    options = OmegaConf.select(cfg, "task.options", default=None)
    return dict(
        (OmegaConf.to_container(options, resolve=True) if OmegaConf.is_config(options) else options)
        or {}
    )


def _from_task_options(
    cfg: Any, config_class: type, where: str, values: dict[str, Any]
) -> dict[str, Any]:
    """The part's fields that `task.options` names, refusing one also set to another value under
    the part's own node (its default there is no setting: option_defaults writes it)."""
    options = task_options(cfg)
    defaults = {
        f.name: (f.default if f.default is not dataclasses.MISSING else None)
        for f in dataclasses.fields(config_class)
    }
    taken = {k: v for k, v in options.items() if k in defaults and k not in SHARED_TASK_SETTINGS}
    for key, value in taken.items():
        if key in values and values[key] not in (value, defaults[key]):
            raise ConfigError(
                f"{where}.{key}={values[key]!r} and task.options.{key}={value!r}: set it "
                f"once, as task.options.{key} (every part of the task reads it there)"
            )
    return taken


def mapper_config(cfg: Any, name: str | None = None) -> Any:
    """The typed settings of mapper `name` (default: the cell's task.mapper): `mappers.<name>`
    and the shared task nodes its fields name (extractor, equivalence)."""
    name = name or cfg.task.mapper
    return settings_from(cfg, MAPPERS[name].Config, "mappers", name)


def metric_config(cfg: Any, name: str) -> Any:
    """The typed settings of metric `name` (`metrics.<name>`)."""
    return settings_from(cfg, METRICS[name].Config, "metrics", name)


def group_config(cfg: Any, name: str) -> Any:
    """The typed settings of estimator group `name`: `uq.groups.<name>` and the shared task
    nodes its fields name (equivalence)."""
    return settings_from(cfg, GROUPS[name].Config, "uq.groups", name)


def _space_keywords(cfg: Any) -> set[str]:
    """The keywords the task's space constructor takes."""
    import inspect

    from pipeline.latent import space_class

    return set(inspect.signature(space_class(cfg.task.space).__init__).parameters) - {"self"}


def space_settings(cfg: Any) -> dict[str, Any]:
    """The keyword arguments of the task's space: `task.space_options`, and the `task.options`
    its constructor names (a key given both ways must agree)."""
    from omegaconf import OmegaConf

    settings = dict(OmegaConf.to_container(cfg.task.space_options, resolve=True) or {})
    keywords = _space_keywords(cfg)
    for key, value in task_options(cfg).items():
        if key in keywords:
            if key in settings and settings[key] != value:
                raise ConfigError(
                    f"task.space_options.{key}={settings[key]!r} and task.options.{key}="
                    f"{value!r}: set it once, as task.options.{key}"
                )
            settings[key] = value
    return settings


def option_readers(cfg: Any) -> dict[str, list[str]]:
    """{task.options key: the parts of the task that read it} (the space by its constructor, the
    mapper and metrics by their settings' fields); a key no part reads has an empty list."""
    import dataclasses

    fields_of = {
        f"mappers.{cfg.task.mapper}": MAPPERS[cfg.task.mapper].Config,
        **{f"metrics.{m}": METRICS[m].Config for m in cfg.task.metrics},
    }
    space = _space_keywords(cfg)
    return {
        key: [
            *([f"the space {cfg.task.space}"] if key in space else []),
            *(
                part
                for part, config in fields_of.items()
                if key in {f.name for f in dataclasses.fields(config)}
            ),
        ]
        for key in task_options(cfg)
    }
