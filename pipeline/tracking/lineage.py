"""Stage outputs as W&B Artifacts with lineage.

Each stage of a cell is one artifact `<stage>-<experiment>-<model>-<dataset>` (type = the stage
name) whose files are *references* to the stage's parquet files and manifests (`file://`, not
uploaded; `wandb.upload_artifacts=true` uploads them). A stage's W&B run (job_type = the stage)
uses the artifacts of the stages it read and logs its own, so the lineage graph reads
generate -> map -> decide -> uq -> evaluate per cell, and the report run uses each cell's
evaluate artifact. W&B versions an artifact by the digest of its files, so a stage skipped as
cached logs the same digest again and W&B keeps the existing version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.artifacts.schema import PRODUCER
from pipeline.artifacts.stage import CELL_STAGES, STAGES
from pipeline.tracking.redact import redact

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class CellId:
    experiment: str
    model: str
    dataset: str

    @property
    def run_name(self) -> str:
        return f"{self.experiment}/{self.model}/{self.dataset}"

    @property
    def tags(self) -> list[str]:
        return [f"experiment:{self.experiment}", f"model:{self.model}", f"dataset:{self.dataset}"]


def artifact_name(stage: str, cell: CellId) -> str:
    """Stable per cell and stage; only the characters W&B allows in artifact names."""
    return _UNSAFE.sub("-", f"{stage}-{cell.experiment}-{cell.model}-{cell.dataset}")


def input_stages(stage: str) -> list[str]:
    """The stages whose artifacts `stage` reads, in pipeline order."""

    producers = {PRODUCER[name] for name in STAGES[stage].inputs}
    return [s for s in CELL_STAGES if s in producers]


def stage_files(stage: str, store) -> list[Path]:
    """The files a stage wrote in the cell: each output's parquet and its manifest."""
    files = []
    for out in STAGES[stage].outputs:
        files += [store.path(out), store.manifest_path(out)]
    return files


def has_outputs(stage: str, store) -> bool:
    return all(path.exists() for path in stage_files(stage, store))


def stage_artifact(wandb, stage: str, cell: CellId, store, *, upload: bool):
    """A draft artifact of the stage's files in `store`: references, or copies when `upload`."""
    outputs = STAGES[stage].outputs
    revisions = (store.manifest(outputs[0]) or {}).get("revisions")
    artifact = wandb.Artifact(
        artifact_name(stage, cell),
        type=stage,
        metadata={
            "experiment": cell.experiment,
            "model": cell.model,
            "dataset": cell.dataset,
            "cache_key": store.key(outputs[0]),
            "rows": {out: (store.manifest(out) or {}).get("rows") for out in outputs},
            **({"revisions": redact(revisions)} if revisions else {}),
        },
    )
    for path in stage_files(stage, store):
        if upload:
            artifact.add_file(str(path), name=path.name)
        else:
            artifact.add_reference(path.resolve().as_uri(), name=path.name)
    return artifact


def use(run, artifact) -> None:
    """Declare a draft artifact an input of `run`. Offline, `run.use_artifact` refuses, so the
    same record it writes for a draft (log the artifact, then use it after commit, which `wandb
    sync` replays) is written directly; W&B resolves it to the version with that digest."""
    if run.offline:
        run._log_artifact(artifact, is_user_created=True, use_after_commit=True)
    else:
        run.use_artifact(artifact)


def log_stage_lineage(wandb, run, stage: str, cell: CellId, store, *, upload: bool) -> None:
    """In the stage's run: use the artifacts of its input stages, log its own."""
    for upstream in input_stages(stage):
        use(run, stage_artifact(wandb, upstream, cell, store, upload=upload))
    run.log_artifact(stage_artifact(wandb, stage, cell, store, upload=upload))


def use_stage_artifacts(
    wandb, run, stages: list[str], cell: CellId, store, *, upload: bool
) -> list[str]:
    """Declare the artifacts of `stages` (those present in `store`) inputs of `run`."""
    used = []
    for stage in stages:
        if has_outputs(stage, store):
            use(run, stage_artifact(wandb, stage, cell, store, upload=upload))
            used.append(artifact_name(stage, cell))
    return used


def stage_run_config(stage: str, result: dict[str, Any], store) -> dict[str, Any]:
    """What a stage's run logs as its config: the stage's config slice (redacted) and key, and
    the hub revisions it read where its manifest records them (generate's)."""

    manifest = store.manifest(STAGES[stage].outputs[0]) or {}
    return {
        "stage": stage,
        "skipped": bool(result.get("skipped")),
        "cache_key": manifest.get("cache_key"),
        "inputs": manifest.get("inputs", {}),
        "stage_config": redact(manifest.get("config", {})),
        **({"revisions": redact(manifest["revisions"])} if "revisions" in manifest else {}),
    }
