"""The report stage: every table and figure of the paper from the artifacts of all cells of an
experiment (pipeline.reporting), run once after a sweep or by `stage=report`."""

from __future__ import annotations

import logging
import time
from typing import Any

from omegaconf import DictConfig

log = logging.getLogger("pipeline")


def run_report(cfg: DictConfig) -> dict[str, Any]:
    from pipeline.reporting import build_report

    t0 = time.perf_counter()
    out = build_report(cfg)
    log.info("[report] done in %.1f s: results in %s", time.perf_counter() - t0, cfg.results_dir)
    return out
