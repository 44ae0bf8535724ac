"""Hydra launcher plugins of the task-aware pipeline: submitit launchers with per-cell resources."""

from hydra_plugins.task_aware_launcher import config as _config  # noqa: F401  (registers configs)
