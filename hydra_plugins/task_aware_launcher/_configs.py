"""Structured configs of the per-cell launchers (registered when the package imports)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hydra.core.config_store import ConfigStore

from hydra_plugins.hydra_submitit_launcher.config import LocalQueueConf, SlurmQueueConf


def _model_resources() -> dict[str, str]:
    # launcher parameter -> key of the cell's own config it is read from
    return {"gpus_per_node": "model.gpus"}


@dataclass
class PerCellSlurmConf(SlurmQueueConf):
    _target_: str = "hydra_plugins.task_aware_launcher._launchers.PerCellSlurmLauncher"
    per_cell: dict[str, str] = field(default_factory=_model_resources)


@dataclass
class PerCellLocalConf(LocalQueueConf):
    _target_: str = "hydra_plugins.task_aware_launcher._launchers.PerCellLocalLauncher"
    per_cell: dict[str, str] = field(default_factory=_model_resources)


ConfigStore.instance().store(
    group="hydra/launcher", name="per_cell_slurm", node=PerCellSlurmConf, provider="task_aware"
)
ConfigStore.instance().store(
    group="hydra/launcher", name="per_cell_local", node=PerCellLocalConf, provider="task_aware"
)
