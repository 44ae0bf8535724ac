"""`python -m pipeline [stage=...] [experiment=...] [model=...] [dataset=...] [-m ...]`."""

from __future__ import annotations

import logging
import sys

import hydra
from omegaconf import DictConfig

from pipeline.app import in_sweep, run
from pipeline.config import register_configs
from pipeline.errors import PipelineError

register_configs()
log = logging.getLogger("pipeline")


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> None:
    try:
        run(cfg)
    except PipelineError as err:
        # The message says what is wrong and how to fix it: no traceback for the user. In a
        # sweep the job still fails (Hydra reports it and the other jobs are unaffected).
        log.error("%s", err)
        if in_sweep():
            raise
        sys.exit(2)


if __name__ == "__main__":
    main()
