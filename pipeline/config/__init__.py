"""The configuration, from Hydra's composition to the objects every stage takes:

    structured.py the structured config (one dataclass per group; a typo fails at composition)
    checks.py    `validate(cfg)`: what Hydra's types cannot check, every problem in one error
    resolve.py   `resolve_cell(cfg)`: the one reading of the config into a frozen, typed `Cell`
                 with its `Task` (and `resolve_report(cfg)` for the report); which key went where

An entry point composes, validates and resolves; below it nothing reads the config.
"""

from __future__ import annotations

from pipeline.components.registry import load_plugins
from pipeline.config.checks import (
    CHOICES,
    MODEL_DTYPES,
    PATTERN_RULES,
    STAGES,
    VALUE_RULES,
    validate,
)
from pipeline.config.resolve import (
    Cell,
    ReportSettings,
    Task,
    UQSettings,
    group_config,
    mapper_config,
    metric_config,
    resolve_cell,
    resolve_report,
    resolve_task,
)
from pipeline.config.structured import (
    BackendConfig,
    Config,
    DatasetConfig,
    EvaluationConfig,
    GenerationConfig,
    ModelConfig,
    ReadingConfig,
    ReportFiguresConfig,
    TaskConfig,
    UQConfig,
    WandbConfig,
    register_configs,
)
from pipeline.runtime.errors import ConfigError

__all__ = [
    "CHOICES",
    "ConfigError",
    "MODEL_DTYPES",
    "PATTERN_RULES",
    "STAGES",
    "VALUE_RULES",
    "BackendConfig",
    "Cell",
    "Config",
    "DatasetConfig",
    "EvaluationConfig",
    "GenerationConfig",
    "ModelConfig",
    "ReadingConfig",
    "ReportFiguresConfig",
    "ReportSettings",
    "Task",
    "TaskConfig",
    "UQConfig",
    "UQSettings",
    "WandbConfig",
    "group_config",
    "load_plugins",
    "mapper_config",
    "metric_config",
    "register_configs",
    "resolve_cell",
    "resolve_report",
    "resolve_task",
    "validate",
]
