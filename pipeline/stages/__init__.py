"""The stages: each is one function from named input artifacts to named output artifacts, in
a module of its own (generate, map, decide, uq, evaluate, report), registered with `@stage`.

`run(cfg)` executes the requested stage(s) for one (experiment, model, dataset) cell. A stage is
skipped when its outputs carry the cache key of its config slice + its inputs' keys + its code
version (DESIGN.md s5), so a rerun after a crash or a config change redoes only what changed.
Config slices follow data: generate hashes the rendered prompts and the records, map its
mapper's settings, evaluate the evaluation settings and metrics. No stage names a task or a
latent space: they loop over what the task config declares (pipeline/tasks/).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from pipeline.registry import Registry
from pipeline.store import ArtifactError, ArtifactStore, cache_key

log = logging.getLogger("pipeline")

CELL_STAGES = ("generate", "map", "decide", "uq", "evaluate")


@dataclass(frozen=True)
class StageSpec:
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    config_slice: Callable[[DictConfig], dict]
    fn: Callable[..., dict[str, Any]]
    version: int = 1


STAGES: Registry[StageSpec] = Registry("stage", discover=("pipeline.stages",))


def stage(name: str, *, inputs: tuple[str, ...], outputs: tuple[str, ...],
          config: Callable[[DictConfig], dict], version: int = 1):
    """Register a stage. `version` is part of its cache key: bump it when a code change alters
    what the stage writes, so stored artifacts of the old code are recomputed, not reused."""
    def wrap(fn):
        STAGES.add(name, StageSpec(name, inputs, outputs, config, fn, version), replace=True)
        return fn

    return wrap


def plain(node) -> Any:
    """A config node (mapping or list) as plain Python, resolved against its whole config."""
    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node


def cell_dir(cfg: DictConfig) -> Path:
    return Path(cfg.output_root) / cfg.experiment / cfg.model.name / cfg.dataset.name


def stage_key(spec: StageSpec, cfg: DictConfig, store: ArtifactStore) -> tuple[str, dict, dict]:
    input_keys = {}
    for name in spec.inputs:
        key = store.key(name)
        if key is None:
            raise ArtifactError(
                f"stage {spec.name!r} needs artifact {name!r}, which is missing under {store.root}; "
                f"run the upstream stage first (stage=all runs everything in order)")
        input_keys[name] = key
    slice_ = spec.config_slice(cfg)
    return cache_key(slice_, input_keys, spec.version), slice_, input_keys


def run_stage(name: str, cfg: DictConfig, store: ArtifactStore) -> dict[str, Any]:
    """Run one stage unless its outputs are current. Returns {"skipped", "wall_time_s", "rows"}."""
    spec = STAGES[name]
    key, slice_, input_keys = stage_key(spec, cfg, store)
    if all(store.is_current(out, key) for out in spec.outputs):
        log.info("[%s] up to date (key %s), skipped", name, key)
        store.drop_shards(key=key)  # left behind by a crash after the last output was written
        return {"skipped": True, "wall_time_s": 0.0, "key": key}
    for out in spec.outputs:
        problem = store.damage(out)
        if store.key(out) == key and problem is not None:
            log.warning("[%s] %s has this run's key but %s: recomputing", name, out, problem)
    t0 = time.perf_counter()
    frames = spec.fn(cfg, store, key)
    wall = time.perf_counter() - t0
    missing = set(spec.outputs) - set(frames)
    if missing:
        raise RuntimeError(f"stage {name!r} did not produce {sorted(missing)}")
    rows = {}
    for out in spec.outputs:
        store.write(out, frames[out], key=key, config=slice_, inputs=input_keys, wall_time_s=wall)
        rows[out] = len(frames[out])
    store.drop_shards(key=key)  # merged into the artifacts, all written: nothing left to resume
    log.info("[%s] done in %.1f s: %s", name, wall, ", ".join(f"{k} {v} rows" for k, v in rows.items()))
    return {"skipped": False, "wall_time_s": wall, "rows": rows, "key": key}


def stages_to_run(cfg: DictConfig, store: ArtifactStore, names: tuple[str, ...]) -> list[str]:
    """The stages of `names` whose outputs are not current: a stage is current when its key
    (computable once its inputs are current) matches; everything after a stale stage reruns."""
    stale: list[str] = []
    for name in names:
        if stale:
            stale.append(name)
            continue
        try:
            key = stage_key(STAGES[name], cfg, store)[0]
        except ArtifactError:
            stale.append(name)
            continue
        if not all(store.is_current(out, key) for out in STAGES[name].outputs):
            stale.append(name)
    return stale


def run(cfg: DictConfig) -> dict[str, dict]:
    """Entry point of the Hydra app for one cell (and the report when not part of a sweep)."""
    from pipeline.assets import check_assets
    from pipeline.config import validate

    validate(cfg)
    if cfg.stage == "plan":
        from pipeline.plan import print_plan

        return {"plan": print_plan(cfg)}
    store = ArtifactStore(cell_dir(cfg))
    names = CELL_STAGES if cfg.stage == "all" else (() if cfg.stage == "report" else (cfg.stage,))
    # Every missing input of the stages that will run, named before any of them starts.
    todo = stages_to_run(cfg, store, names)
    check_assets(cfg, todo)
    if todo:
        from pipeline.devices import configure_torch_threads

        configure_torch_threads(cfg.backend.num_threads)
    results: dict[str, dict] = {}
    for name in names:
        results[name] = run_stage(name, cfg, store)
    if any(not r["skipped"] for r in results.values()):
        # W&B runs of a cell that did work, opened once the work is done: a killed job or a
        # rerun with nothing to do leaves no run behind for `make sync` to upload.
        _track_cell(cfg, results, store)
    if cfg.stage == "report" or (cfg.stage == "all" and not _in_sweep()):
        results["report"] = run_report(cfg)
    return results


def _in_sweep() -> bool:
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        return HydraConfig.get().mode == RunMode.MULTIRUN
    except (ImportError, ValueError):
        return False


def _track_cell(cfg: DictConfig, results: dict[str, dict], store: ArtifactStore) -> None:
    from pipeline.tracking import track_cell

    track_cell(cfg, results, store)


def run_report(cfg: DictConfig) -> dict[str, Any]:
    from pipeline.stages.report import run_report as report

    return report(cfg)
