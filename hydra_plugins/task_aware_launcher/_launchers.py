"""hydra-submitit-launcher's launchers with resources per cell of a sweep.

The plugin's launchers ask the cluster for the same resources for every job of a sweep (one
`executor.update_parameters` before one `map_array`). A sweep over models of 4B and 72B
parameters needs one GPU for the first and four for the second, so these launchers read, for
each job, the config keys named in `per_cell` (e.g. `gpus_per_node: model.gpus`) from that
job's own composed config, group the jobs by the values, and submit one job array per group.
All arrays are submitted before any result is awaited, so the groups run side by side.

Hydra only instantiates launchers that live in the `hydra_plugins` namespace package, hence
this module's location.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, filter_overrides
from omegaconf import OmegaConf

from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import (
    BaseSubmititLauncher,
    LocalLauncher,
    SlurmLauncher,
)

log = logging.getLogger(__name__)


class _PerCellMixin(BaseSubmititLauncher):
    def __init__(self, per_cell: dict[str, str] | None = None, **params: Any) -> None:
        super().__init__(**params)
        per_cell = OmegaConf.to_container(per_cell) if OmegaConf.is_config(per_cell) else per_cell
        self.per_cell: dict[str, str] = dict(per_cell or {})

    def cell_resources(self, overrides: Sequence[str]) -> dict[str, Any]:
        """Launcher parameters of one job, read from its own composed config."""
        if not self.per_cell:
            return {}
        assert self.hydra_context is not None and self.config is not None
        cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        out = {}
        for param, key in self.per_cell.items():
            value = OmegaConf.select(cfg, key, default=None)
            if value is not None:
                out[param] = value
        return out

    def _executor(self, resources: dict[str, Any]) -> Any:
        """A submitit executor with the sweep's parameters, `resources` on top (as the plugin)."""
        import submitit

        params = {**self.params, **resources}
        init_keys = {"max_num_timeout", "submitit_folder"}
        init_params = {"folder": params["submitit_folder"]}
        if "max_num_timeout" in params:
            init_params[f"{self._EXECUTOR}_max_num_timeout"] = params["max_num_timeout"]
        executor = submitit.AutoExecutor(cluster=self._EXECUTOR, **init_params)
        base = set(OmegaConf.structured(BaseQueueConf).keys())
        executor.update_parameters(
            **{
                k if k in base else f"{self._EXECUTOR}_{k}": v
                for k, v in params.items()
                if k not in init_keys
            }
        )
        return executor

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        assert self.config is not None
        if not job_overrides:
            return []
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        log.info(f"Submitit '{self._EXECUTOR}' sweep output dir : {sweep_dir}")
        groups: dict[tuple, list[tuple[int, list[str]]]] = {}
        for offset, overrides in enumerate(job_overrides):
            resources = self.cell_resources(overrides)
            groups.setdefault(tuple(sorted(resources.items())), []).append(
                (initial_job_idx + offset, list(overrides))
            )
        submitted = []
        for resources, members in groups.items():
            label = ", ".join(f"{k}={v}" for k, v in resources) or "sweep defaults"
            log.info(f"\tjob array with {label}:")
            params = []
            for idx, overrides in members:
                log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
                params.append(
                    (overrides, "hydra.sweep.dir", idx, f"job_id_for_{idx}", Singleton.get_state())
                )
            jobs = self._executor(dict(resources)).map_array(self, *zip(*params))
            submitted.extend(zip((idx for idx, _ in members), jobs))
        # Results in the sweep's job order, whatever array each job went to.
        return [job.results()[0] for _, job in sorted(submitted, key=lambda item: item[0])]


class PerCellSlurmLauncher(_PerCellMixin, SlurmLauncher):
    """`hydra/launcher=slurm`: SLURM job arrays grouped by each cell's resources."""


class PerCellLocalLauncher(_PerCellMixin, LocalLauncher):
    """submitit's local executor with the same per-cell grouping (GPUs become
    CUDA_VISIBLE_DEVICES of each job)."""
