"""The stage contract: a stage is one function from named input artifacts to named output
artifacts, registered with `@stage` (the stage modules live in `pipeline/stages/`), and run by
`run_stage` against a cell's `ArtifactStore`.

A stage is skipped when its outputs carry the cache key of its config slice + its inputs' keys + its code
version (docs/design.md s5), so a rerun after a crash or a config change redoes only what changed.
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
from typing import TYPE_CHECKING, Any

from pipeline.artifacts.schema import PIPELINE_PRODUCER, PRODUCER, SCORER_PRODUCER
from pipeline.artifacts.store import ArtifactError, ArtifactStore, cache_key
from pipeline.components.parts import thaw
from pipeline.components.registry import Registry, plugin_code
from pipeline.runtime.progress import heartbeat
from pipeline.runtime.revisions import model_revisions, recording_models
from pipeline.runtime.stopping import check_stop

if TYPE_CHECKING:  # the resolved cell every stage gets (pipeline.config, built at the entry point)
    from pipeline.config import Cell

log = logging.getLogger("pipeline")

CELL_STAGES = ("generate", "map", "decide", "uq", "evaluate")
# A stage's result may carry, under this key, fields for its outputs' manifests beside the frames
# (e.g. generate's {"revisions": ...}: which hub commits it read); they are metadata, never part
# of the cache key. The auxiliary models a stage asked for join its "revisions" (run_stage).
MANIFEST_FIELDS = "manifest_fields"


@dataclass(frozen=True)
class StageSpec:
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    config_slice: Callable[[Cell], dict]
    fn: Callable[..., dict[str, Any]]
    version: int = 1
    # the cell's attributes naming the parts the stage uses beyond those its slice names
    # ("task.mapper"; a plugin's code in them enters the key: `pipeline.components.registry.plugin_code`)
    parts: tuple[str, ...] = ()


STAGES: Registry[StageSpec] = Registry("stage", discover=("pipeline.stages",))


def stage(
    name: str,
    *,
    inputs: tuple[str, ...],
    outputs: tuple[str, ...],
    config: Callable[[Cell], dict],
    version: int = 1,
    parts: tuple[str, ...] = (),
):
    """Register a stage: `fn(cell, store, key)` returns its output frames; `config(cell)` is its
    config slice. `version` is part of its cache key: bump it when a code change alters what the
    stage writes, so stored artifacts of the old code are recomputed, not reused. `parts`: the
    cell's attributes that name the parts (space, mapper, metrics) it uses."""

    def wrap(fn):
        STAGES.add(name, StageSpec(name, inputs, outputs, config, fn, version, parts), replace=True)
        return fn

    return wrap


plain = thaw  # a resolved setting as plain Python (dicts, lists): what a slice holds


def cell_name(cell_or_root: Cell | Path) -> str:
    """ "experiment/model/dataset" of a cell (or of its folder): recorded in every manifest a
    stage writes, so an artifact copied between cells says where it was made."""
    if isinstance(cell_or_root, (str, Path)):
        return "/".join(Path(cell_or_root).parts[-3:])
    return cell_or_root.name


def _attribute(cell: Cell, path: str) -> Any:
    value: Any = cell
    for name in path.split("."):
        value = getattr(value, name)
    return value


def stage_key(spec: StageSpec, cell: Cell, store: ArtifactStore) -> tuple[str, dict, dict]:
    input_keys = {}
    for name in spec.inputs:
        key = store.key(name)
        if key is None:
            raise ArtifactError(
                f"stage {spec.name!r} needs artifact {name!r}, which is missing under {store.root}; "
                f"run the upstream stage first (stage=all runs everything in order)"
            )
        input_keys[name] = key
    slice_ = spec.config_slice(cell)
    if cell.plugins:  # a plugin's code, where the stage uses its parts
        names = _strings(slice_) | _strings([thaw(_attribute(cell, p)) for p in spec.parts])
        if code := plugin_code(cell.plugins, names):
            slice_ = {**slice_, "plugin_code": code}
    return cache_key(slice_, input_keys, spec.version), slice_, input_keys


def _strings(node: Any) -> set[str]:
    """Every string in a plain config value (keys and values)."""
    if isinstance(node, str):
        return {node}
    if isinstance(node, dict):
        return set().union(*(_strings(k) | _strings(v) for k, v in node.items()))
    if isinstance(node, (list, tuple)):
        return set().union(*map(_strings, node))
    return set()


def run_stage(name: str, cell: Cell, store: ArtifactStore) -> dict[str, Any]:
    """Run one stage unless its outputs are current. Returns {"skipped", "wall_time_s", "rows"}."""
    check_stop()  # a stop asked for whose exception was swallowed (a finaliser) ends here
    spec = STAGES[name]
    key, slice_, input_keys = stage_key(spec, cell, store)
    if outputs_current(spec, cell, store, key):
        log.info("[%s] up to date (key %s), skipped", name, key)
        store.drop_shards(key=key)  # left behind by a crash after the last output was written
        return {"skipped": True, "wall_time_s": 0.0, "key": key}
    check_inputs_belong(spec, cell, store, input_keys)
    for out in spec.outputs:
        problem = store.damage(out)
        if store.key(out) == key and problem is not None:
            log.warning("[%s] %s has this run's key but %s: recomputing", name, out, problem)
    t0 = time.perf_counter()
    # a line at least every 30 s while the stage runs; the auxiliary models it is handed noted
    with heartbeat(f"[{name}]"), recording_models() as used:
        frames = dict(spec.fn(cell, store, key))
    wall = time.perf_counter() - t0
    fields = dict(frames.pop(MANIFEST_FIELDS, None) or {})
    if auxiliary := model_revisions(used):  # the checkpoints they loaded: metadata, no key
        fields["revisions"] = {**fields.get("revisions", {}), **auxiliary}
    missing = set(spec.outputs) - set(frames)
    if missing:
        raise RuntimeError(f"stage {name!r} did not produce {sorted(missing)}")
    rows = {}
    for out in spec.outputs:
        store.write(
            out,
            frames[out],
            key=key,
            config=slice_,
            inputs=input_keys,
            wall_time_s=wall,
            extra={**fields, "cell": cell.name, "producer": cell.producer},
        )
        rows[out] = len(frames[out])
    store.drop_shards(key=key)  # merged into the artifacts, all written: nothing left to resume
    check_stop()  # the work done is kept; the next stage does not start
    log.info(
        "[%s] done in %.1f s: %s", name, wall, ", ".join(f"{k} {v} rows" for k, v in rows.items())
    )
    return {"skipped": False, "wall_time_s": wall, "rows": rows, "key": key}


def made_here(cell: Cell, store: ArtifactStore, name: str) -> bool:
    """Whether artifact `name`'s manifest says it was made for this cell by this program (the
    pipeline or the scorer): a key alone does not say it, a copied folder carries its keys."""
    manifest = store.manifest(name) or {}
    return manifest.get("cell") == cell.name and manifest.get("producer") == cell.producer


def outputs_current(spec: StageSpec, cell: Cell, store: ArtifactStore, key: str) -> bool:
    return all(store.is_current(out, key) and made_here(cell, store, out) for out in spec.outputs)


def check_inputs_belong(
    spec: StageSpec, cell: Cell, store: ArtifactStore, input_keys: dict[str, str]
) -> None:
    """Refuse inputs this configuration would not have made. Every manifest names the cell it
    was made for and who made it: this pipeline's stages, the scorer (`pipeline.score`), or
    another program writing a cell's inputs itself (its own `producer`). An input made for
    another cell, or by the scorer in a pipeline cell (its work folder copied in) or the
    reverse, is refused; one written by a stage of this program must also carry the key that
    stage computes for this cell now (another configuration's, e.g. task=sphere on a classes
    cell's samples, is named instead of being read)."""
    here, runner = cell.name, cell.producer
    wanted: dict[str, str] = {}  # producer -> its key now (generate's renders every prompt)
    for name, have in input_keys.items():
        producer = PRODUCER.get(name)
        if producer not in STAGES.names():
            continue
        manifest = store.manifest(name) or {}
        maker, made_for = manifest.get("producer"), manifest.get("cell")
        ours = maker in (PIPELINE_PRODUCER, SCORER_PRODUCER)
        rebuild = f"run stage={producer} first (or stage=all, which reruns what changed)"
        if made_for != here or (ours and maker != runner) or not maker:
            said = (
                f"made for cell {made_for} by {_who(maker, producer)}"
                if maker and made_for
                else "its manifest does not say who made it for which cell (written before "
                "manifests said so, or by hand)"
            )
            raise ArtifactError(
                f"stage {spec.name!r}: input {name!r} under {store.root} was made for another "
                f"cell or by another program ({said}; this is {here}, run by "
                f"{_who(runner, producer)}): {rebuild}"
            )
        if not ours or (producer == "generate" and runner == SCORER_PRODUCER):
            continue  # another program's inputs (the scorer's: keyed by the file it read)
        if producer not in wanted:
            wanted[producer] = stage_key(STAGES[producer], cell, store)[0]
        want = wanted[producer]
        if have != want:
            raise ArtifactError(
                f"stage {spec.name!r}: input {name!r} under {store.root} was made by another "
                f"configuration (key {have}; this configuration's {producer} gives {want}): "
                f"{rebuild}"
            )


def _who(maker: str, stage_name: str) -> str:
    if maker == SCORER_PRODUCER:
        return f"the scorer ({SCORER_PRODUCER})"
    return f"the pipeline's stage {stage_name}" if maker == PIPELINE_PRODUCER else repr(maker)


def stages_to_run(cell: Cell, store: ArtifactStore, names: tuple[str, ...]) -> list[str]:
    """The stages of `names` whose outputs are not current: a stage is current when its key
    (computable once its inputs are current) matches; everything after a stale stage reruns."""
    stale: list[str] = []
    for name in names:
        if stale:
            stale.append(name)
            continue
        try:
            key = stage_key(STAGES[name], cell, store)[0]
        except ArtifactError:
            stale.append(name)
            continue
        if not outputs_current(STAGES[name], cell, store, key):
            stale.append(name)
    return stale
