"""Hydra callbacks: after a sweep (local or SLURM) finishes, build the report once."""

from __future__ import annotations

import logging
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from pipeline.driver.job import run_report
from pipeline.runtime.errors import PipelineError

log = logging.getLogger("pipeline")


class ReportAfterSweep(Callback):
    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if config.stage not in ("all", "report"):
            return
        try:
            run_report(config)
        except PipelineError as err:  # its message is the whole story (no cells, ...)
            log.error("%s", err)
            raise SystemExit(2) from None
        except Exception:
            # Hydra turns a callback's exception into a warning and exits 0: a sweep whose
            # report failed must not look finished.
            log.exception("[report] failed after the sweep")
            raise SystemExit(1) from None
