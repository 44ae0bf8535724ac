"""The tasks: one folder each, holding everything the task is.

    pipeline/tasks/<name>/
        task.yaml    the Hydra config `task=<name>`: the parts below by name, the prompt, options
        space.py     the latent space (numpy only; `pipeline.latent` re-exports it by its public name)
        task.py      its g_T (MAPPERS), its reference kind (REFERENCES), its metrics (METRICS)
        reading.py   how a response is read (where the task has its own reader)
        metrics.py   its metrics' maths (task.py registers them)

Its tests mirror the folder: tests/tasks/<name>/. What several tasks share lives in the
components (pipeline.mapping, pipeline.evaluation) and the generic modules here (contract,
builders, text_metrics), none of which imports a task folder (tests/test_generic_layers.py).

The contract every task is written against (the registries, `Mapper`, `Metric`, `Reference`, ...)
is `pipeline.tasks.contract`, re-exported here on first use: this package imports nothing on its
own, so a space module under it stays importable alone and `import pipeline.latent` instant. A
plugin task has the same shape in its own folder (docs/extending.md).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

# The contract's public names (kept in step with pipeline.tasks.contract.__all__ by a test)
__all__ = [
    "MAPPERS",
    "METRICS",
    "REFERENCES",
    "MapContext",
    "Mapper",
    "MapperInstance",
    "Metric",
    "MetricContext",
    "Reference",
    "ReferenceKind",
    "describe_reference",
    "reference_of",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("pipeline.tasks.contract"), name)
    raise AttributeError(f"module 'pipeline.tasks' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


def task_folders(root: Path | str | None = None) -> dict[str, Path]:
    """{task name: its folder} of the task folders in `root` (folders holding a task.yaml;
    default: the built-in tasks, this package's folder)."""
    here = Path(root) if root is not None else Path(__file__).resolve().parent
    return {p.parent.name: p.parent for p in sorted(here.glob("*/task.yaml"))}


def config_source(folder: Path | str) -> str:
    """How Hydra's search path names a config folder: a folder of task folders (each holding a
    task.yaml, as pipeline/tasks/ does) as `taskfolders://` (hydra_plugins/task_aware_tasks),
    any other as `file://`."""
    path = Path(folder).resolve()
    scheme = "taskfolders" if task_folders(path) and not (path / "task").is_dir() else "file"
    return f"{scheme}://{path}"
