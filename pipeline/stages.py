"""The stages: each is one function from named input artifacts to named output artifacts.

`run(cfg)` executes the requested stage(s) for one (experiment, model, dataset) cell. A stage is
skipped when its outputs carry the cache key of its config slice + its inputs' keys (DESIGN.md s5),
so a rerun after a crash or a config change redoes only what changed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

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


STAGES: dict[str, StageSpec] = {}


def stage(name: str, *, inputs: tuple[str, ...], outputs: tuple[str, ...],
          config: Callable[[DictConfig], dict], version: int = 1):
    """Register a stage. `version` is part of its cache key: bump it when a code change alters
    what the stage writes, so stored artifacts of the old code are recomputed, not reused."""
    def wrap(fn):
        STAGES[name] = StageSpec(name, inputs, outputs, config, fn, version)
        return fn

    return wrap


def _plain(node) -> Any:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node


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
        # One W&B run per cell that did work, opened once the work is done: a killed job or a
        # rerun with nothing to do leaves no run behind for `make sync` to upload.
        tracker = _tracker(cfg)
        try:
            for name, result in results.items():
                tracker.log_stage(name, result, store)
            tracker.log_cell(store)
        finally:
            tracker.finish()
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


def _tracker(cfg: DictConfig):
    from pipeline.tracking import make_tracker

    return make_tracker(cfg)


def run_report(cfg: DictConfig) -> dict[str, Any]:
    from pipeline.reporting import build_report

    t0 = time.perf_counter()
    out = build_report(cfg)
    log.info("[report] done in %.1f s: results in %s", time.perf_counter() - t0, cfg.results_dir)
    return out


# ---------------------------------------------------------------------------------------------
# generate


def _generate_slice(cfg: DictConfig) -> dict:
    from pipeline.generation.stage import tensor_parallel_size

    backend = _plain(cfg.backend)
    for k in ("python", "device", "num_threads", "kv_cache_memory_bytes",
              "gpu_memory_utilization"):  # memory and placement: not the samples' distribution
        backend.pop(k, None)
    # batch_size stays: in bf16 the batch's shape changes the matmuls' rounding and so the
    # samples (SmolLM2, 8 prompts x 20 samples: 91 of 160 equal between batch sizes 4 and 1),
    # so a resume with another batch size must not reuse shards made with this one. vLLM
    # schedules its own batches: only the transformers batch sizes are keyed.
    if cfg.backend.name == "vllm":
        backend.pop("batch_size", None)
    model = _plain(cfg.model)
    for k in ("gpus", "tensor_parallel_size"):  # placement; the effective TP is keyed below
        model.pop(k, None)
    if cfg.backend.name == "vllm":  # sharding the model changes reduction order, so the bits
        backend["tensor_parallel_size"] = tensor_parallel_size(cfg.model)
    return {"model": model, "backend": backend, "dataset": _plain(cfg.dataset),
            "generation": _plain(cfg.generation), "task_space": cfg.task.space}


# generate v2: the packaged SmolLM2 under vLLM (transformers 5) had lost whitespace in tokenization.
@stage("generate", inputs=(), outputs=("dataset", "samples", "decodes", "ptrue"),
       config=_generate_slice, version=2)
def generate_stage(cfg: DictConfig, store: ArtifactStore, key: str) -> dict[str, Any]:
    from pipeline.generation.stage import generate_cell

    return generate_cell(cfg, store, key)


# ---------------------------------------------------------------------------------------------
# map


def _map_slice(cfg: DictConfig) -> dict:
    task = _plain(cfg.task)
    for how_not_what in ("kggen_python", "max_concurrency", "max_retries", "max_failed_share"):
        # how calls are made, not what they return: not in the key
        task["extractor"].pop(how_not_what, None)
    return {"task": task}


# map v2: KGGen through its own venv with KGGen's clustering. v3: rule-based set, triple and
# number extraction rebuilt on labelled corpora (docs/extraction.md).
@stage("map", inputs=("dataset", "samples", "decodes"), outputs=("latents",), config=_map_slice, version=3)
def map_stage(cfg: DictConfig, store: ArtifactStore, key: str) -> dict[str, Any]:
    from pipeline.mapping.stage import map_cell

    return {"latents": map_cell(cfg, store.read("dataset"), store.read("samples"),
                                store.read("decodes"))}


# ---------------------------------------------------------------------------------------------
# decide


def _decide_slice(cfg: DictConfig) -> dict:
    return {"space": cfg.task.space, "fbeta": cfg.task.fbeta, "real_loss": cfg.task.real_loss}


@stage("decide", inputs=("latents", "samples", "decodes"), outputs=("decisions",),
       config=_decide_slice)
def decide_stage(cfg: DictConfig, store: ArtifactStore, key: str) -> dict[str, Any]:
    from pipeline.decide import decide_all

    space_kwargs = {"loss": cfg.task.real_loss} if cfg.task.space == "reals" else {}
    if cfg.task.space == "sets-fbeta":
        space_kwargs = {"beta": cfg.task.fbeta}
    decisions = decide_all(cfg.task.space, store.read("latents"), store.read("samples"),
                           store.read("decodes"), fbeta=cfg.task.fbeta, **space_kwargs)
    return {"decisions": decisions}


# ---------------------------------------------------------------------------------------------
# uq


def _uq_slice(cfg: DictConfig) -> dict:
    return {"uq": _plain(cfg.uq), "equivalence": _plain(cfg.task.equivalence),
            "embedder": cfg.task.embedder, "space": cfg.task.space}


# uq v2: SAR's similarity strings shorten a long question instead of losing the text to truncation
@stage("uq", inputs=("dataset", "samples", "decodes", "ptrue", "latents", "decisions"),
       outputs=("uncertainty",), config=_uq_slice, version=2)
def uq_stage(cfg: DictConfig, store: ArtifactStore, key: str) -> dict[str, Any]:
    from pipeline.uncertainty.stage import uq_cell

    return {"uncertainty": uq_cell(cfg, {name: store.read(name) for name in STAGES["uq"].inputs})}


# ---------------------------------------------------------------------------------------------
# evaluate


def _evaluate_slice(cfg: DictConfig) -> dict:
    return {"evaluation": _plain(cfg.evaluation), "metrics": list(cfg.task.metrics),
            "space": cfg.task.space}


@stage("evaluate", inputs=("dataset", "latents", "decisions", "uncertainty"),
       outputs=("quality", "uq_scores"), config=_evaluate_slice)
def evaluate_stage(cfg: DictConfig, store: ArtifactStore, key: str) -> dict[str, Any]:
    from pipeline.aux_models import text_scorers
    from pipeline.evaluate import quality_rows, uq_score_rows

    ev = cfg.evaluation
    quality = quality_rows(cfg.task.space, list(cfg.task.metrics), store.read("dataset"),
                           store.read("decisions"), store.read("latents"), f1_mean=ev.f1_mean,
                           kl_eps=ev.kl_eps, text_scorers=text_scorers(cfg))
    scores = uq_score_rows(quality, store.read("uncertainty"), targets=list(ev.targets),
                           max_rejection=ev.max_rejection, ties=ev.ties,
                           n_bootstrap=ev.n_bootstrap, ci_alpha=ev.ci_alpha, seed=ev.seed)
    return {"quality": quality, "uq_scores": scores}
