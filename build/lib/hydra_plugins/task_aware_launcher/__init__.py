"""Hydra launcher plugins of the task-aware pipeline: submitit launchers with per-cell resources.

They need submitit and hydra-submitit-launcher (the `paper` extra). Hydra imports every plugin
module when it composes a config; without those two, this package registers nothing and says
nothing (a core install composes configs without a warning). Hydra skips modules named with a
leading "_", so only this file is imported by the scan; the launcher classes it re-exports are
the ones Hydra registers (`_target_` names them by their module, `_launchers`).
"""

try:
    import hydra_plugins.hydra_submitit_launcher.submitit_launcher  # noqa: F401
except ImportError:  # no submitit: `hydra/launcher=slurm` then fails naming the extra to install
    pass
else:
    from hydra_plugins.task_aware_launcher import _configs  # noqa: F401  (registers the configs)
    from hydra_plugins.task_aware_launcher._launchers import (  # noqa: F401
        PerCellLocalLauncher,
        PerCellSlurmLauncher,
    )
