"""The application: one Hydra job runs the requested stages of one (experiment, model, dataset)
cell (`pipeline.artifacts.stage`), records them in W&B (`pipeline.tracking`) and, outside a sweep, builds
the report (`pipeline.reporting`). `python -m pipeline` calls `run`.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from omegaconf import DictConfig

from pipeline.artifacts.stage import CELL_STAGES, run_stage, stages_to_run
from pipeline.artifacts.store import ArtifactStore, cell_lock
from pipeline.config import Cell, resolve_cell, validate
from pipeline.driver.assets import check_assets
from pipeline.reporting import build_report
from pipeline.runtime.errors import ConfigError, PipelineError
from pipeline.tracking import cell_needs_logging, track_cell

log = logging.getLogger("pipeline")


def run(cfg: DictConfig) -> dict[str, dict]:
    """Entry point of the Hydra app for one cell (and the report when not part of a sweep)."""

    validate(cfg)
    cell = resolve_cell(cfg)  # the one reading of the config: the stages take the cell
    if cfg.stage == "plan":
        from pipeline.driver.plan import print_plan

        return {"plan": print_plan(cell)}
    store = ArtifactStore(cell.root)
    names = CELL_STAGES if cfg.stage == "all" else (() if cfg.stage == "report" else (cfg.stage,))
    # Every missing input of the stages that will run, named before any of them starts (the
    # libraries first: a stage's key may read the tokenizer).
    check_assets(cell, names, libraries_only=True)
    todo = stages_to_run(cell, store, names)
    check_assets(cell, todo)
    if todo:
        from pipeline.runtime.devices import configure_torch_threads

        configure_torch_threads(cell.backend.num_threads)
    results: dict[str, dict] = {}
    if names:
        try:
            store.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"output_root={cell.output_root!r}: cannot create the cell folder "
                f"{store.root} ({exc.strerror}); choose a writable output_root"
            ) from None
        with cell_lock(store.root):  # a second run of this cell waits, then finds it current
            for name in names:
                results[name] = run_stage(name, cell, store)
            if any(not r["skipped"] for r in results.values()) or cell_needs_logging(cell, store):
                # W&B runs of a cell that did work, or whose logging a kill cut short, opened once
                # the work is done: a rerun with nothing new to log leaves no run for `make sync`.
                _track_cell(cell, results, store)
    if cfg.stage == "report" or (cfg.stage == "all" and not in_sweep()):
        results["report"] = run_report(cfg)
    return results


def in_sweep() -> bool:
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        return HydraConfig.get().mode == RunMode.MULTIRUN
    except (ImportError, ValueError):
        return False


def _track_cell(cell: Cell, results: dict[str, dict], store: ArtifactStore) -> None:
    track_cell(cell, results, store)


def run_report(cfg: DictConfig) -> dict[str, Any]:
    """Every table and figure of the paper from the artifacts of all cells of an experiment,
    run once after a sweep or by `stage=report`. No cell at all is an error (PipelineError):
    an empty report in results_dir would look like a finished one."""
    from pathlib import Path

    from pipeline.config import resolve_report
    from pipeline.reporting.collect import find_cells

    settings = resolve_report(cfg)  # a sweep's primary config: the report's keys only
    if not find_cells(settings.output_root, settings.experiment):
        searched = Path(settings.output_root) / settings.experiment
        raise PipelineError(
            f"report: no cells under {searched} (output_root={settings.output_root}, "
            f"experiment={settings.experiment}): nothing to report; run the cells first, e.g. "
            f"`python -m pipeline -m experiment={settings.experiment} output_root={settings.output_root}` "
            "(stage=all runs every stage and the report), or point output_root / experiment "
            "at where they ran"
            + (
                f"; report_models={list(settings.report_models)} then picks among them"
                if settings.report_models
                else ""
            )
        )
    t0 = time.perf_counter()
    out = build_report(settings)
    log.info(
        "[report] done in %.1f s: results in %s", time.perf_counter() - t0, settings.results_dir
    )
    return out
