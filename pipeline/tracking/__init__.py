"""Weights & Biases tracking: per (experiment, model, dataset) cell, one run per stage (its
artifact lineage, pipeline.tracking.lineage) and one cell run (config, stage times, UQ scores,
the per-prompt table of pipeline.tracking.prompt_table, summary with the headline numbers of
pipeline.tracking.headline); one report run per report. Runs are grouped by experiment and
tagged `experiment:`, `model:`, `dataset:`.

Offline by default (`wandb sync` / `make sync` uploads later). The logged config never holds
secrets: keys come from the environment and any config key that looks like a credential is dropped.
"""

from __future__ import annotations

import json
import logging
import os
from typing import TYPE_CHECKING

from pipeline.artifacts.stage import CELL_STAGES, STAGES
from pipeline.artifacts.store import atomic_write_text
from pipeline.components.parts import thaw
from pipeline.tasks.contract import describe_reference
from pipeline.tracking.headline import headline, is_baseline_estimator
from pipeline.tracking.lineage import (
    CellId,
    log_stage_lineage,
    stage_run_config,
    use_stage_artifacts,
)
from pipeline.tracking.prompt_table import prompts_frame
from pipeline.tracking.redact import redact

if TYPE_CHECKING:  # the resolved cell (pipeline.config)
    from pipeline.config import Cell, ReportSettings

log = logging.getLogger("pipeline")


def _mode(cell: Cell | ReportSettings) -> str:
    return os.environ.get("WANDB_MODE") or cell.wandb.mode


class NullTracker:
    def log_stage(self, name: str, result: dict, store) -> None: ...
    def log_cell(self, store) -> None: ...
    def log_report(self, tables: dict, figures: dict) -> None: ...
    def use_cells(self, cells) -> None: ...
    def finish(self) -> None: ...


# The artifacts a cell run reads to build its tables and summary.
CELL_READS = (
    "dataset",
    "samples",
    "latents",
    "decisions",
    "uncertainty",
    "quality",
    "uq_scores",
    "audit",
)


def _init_run(
    cell: Cell | ReportSettings,
    *,
    name: str,
    job_type: str,
    config: dict,
    tags: list[str],
    group: str | None = None,
):
    """A run, quiet unless wandb.verbose; `group`: the cell's runs (its stages' lineage runs and
    its own) share one, which W&B's runs table shows as one row per cell (default: the
    experiment)."""
    import wandb

    if not cell.wandb.verbose:  # its adverts (Weave) and banners too
        os.environ.setdefault("WANDB_SILENT", "true")
        os.environ.setdefault("WANDB_DISABLE_WEAVE", "true")
    os.makedirs(cell.wandb.dir, exist_ok=True)
    return wandb.init(
        project=cell.wandb.project,
        entity=cell.wandb.entity,
        mode=_mode(cell),
        dir=cell.wandb.dir,
        name=name,
        group=group or cell.experiment,
        job_type=job_type,
        tags=tags,
        config=config,
        reinit="finish_previous",
        settings=wandb.Settings(silent=not cell.wandb.verbose),
    )


def cell_revisions(store) -> dict:
    """{part: entry} of every stage's manifest `revisions`, in stage order; a part two stages
    recorded differently is kept per stage ("nli_model (uq)")."""
    merged: dict = {}
    for stage in CELL_STAGES:
        manifest = store.manifest(STAGES[stage].outputs[0]) or {}
        for part, entry in (manifest.get("revisions") or {}).items():
            if merged.setdefault(part, entry) != entry:
                merged[f"{part} ({stage})"] = entry
    return merged


class WandbTracker(NullTracker):
    def __init__(
        self,
        cell: Cell | ReportSettings,
        name: str,
        job_type: str,
        tags: list[str] | None = None,
        group: str | None = None,
    ):
        import wandb

        # the configuration as resolved (Hydra's own node left out: job-time interpolations)
        # the configuration as resolved: a cell's, or the report's keys (ReportSettings)
        config = redact(thaw(cell.recorded))
        self.cell = cell
        self.wandb = wandb
        self.run = _init_run(
            cell,
            name=name,
            job_type=job_type,
            config=config,
            tags=tags or [f"experiment:{cell.experiment}"],
            group=group,
        )

    @property
    def upload(self) -> bool:
        return bool(self.cell.wandb.upload_artifacts)

    def log_stage(self, name: str, result: dict, store) -> None:
        data = {f"{name}/wall_time_s": result["wall_time_s"], f"{name}/skipped": result["skipped"]}
        for artifact, rows in result.get("rows", {}).items():
            data[f"{name}/{artifact}_rows"] = rows
        self.run.log(data)

    def log_cell(self, store) -> None:
        """The cell's inputs (its stage artifacts), UQ scores, per-prompt table and summary."""

        cell_id = CellId(self.cell.experiment, self.cell.model.name, self.cell.dataset.name)
        use_stage_artifacts(
            self.wandb, self.run, list(CELL_STAGES), cell_id, store, upload=self.upload
        )
        self._log_revisions(store)
        frames = {name: store.read(name) for name in CELL_READS if store.manifest(name) is not None}
        if "uq_scores" in frames:
            self._log_uq_scores(frames["uq_scores"])
        if "quality" in frames:
            self._log_quality_means(frames["quality"])
        if {"dataset", "samples", "latents", "decisions"} <= set(frames):
            self._log_prompts(frames)
        if {"uq_scores", "quality"} <= set(frames):
            self._log_headline(frames["uq_scores"], frames["quality"])
        if "audit" in frames:
            from pipeline.evaluation.audit import count_warnings

            for kind, n in count_warnings(frames["audit"]["warnings"]).items():
                self.run.summary[f"audit/{kind}"] = n  # prompts with that reading warning

    def _log_revisions(self, store) -> None:
        """The hub revisions the cell used (its stages' manifests' record: generate's model and
        dataset, the auxiliary models of map, uq and evaluate): in the run's config as
        `revisions`, and flat in its summary (revisions/model/resolved, revisions/nli_model/...)."""
        revisions = cell_revisions(store)
        if not revisions:
            return
        revisions = redact(revisions)
        self.run.config.update({"revisions": revisions}, allow_val_change=True)
        for part, entry in revisions.items():
            for k, v in entry.items() if isinstance(entry, dict) else [("sources", entry)]:
                self.run.summary[f"revisions/{part}/{k}"] = (
                    v if v is None or isinstance(v, (str, int, float, bool)) else json.dumps(v)
                )

    def _log_uq_scores(self, df) -> None:
        self.run.log({"uq_scores": self.wandb.Table(dataframe=df)})
        for row in df.itertuples():
            self.run.summary[f"prr/{row.target}/{row.metric}/{row.estimator}"] = row.prr
            self.run.summary[f"auc/{row.target}/{row.metric}/{row.estimator}"] = row.auc

    def _log_quality_means(self, quality) -> None:
        means = quality.groupby(["metric", "method"])["value"].mean()
        for (metric, method), value in means.items():
            self.run.summary[f"quality/{metric}/{method}"] = float(value)

    def _log_prompts(self, frames: dict) -> None:
        space = self.cell.task.latent_space()
        table = prompts_frame(
            space, frames, describe_reference, max_prompts=self.cell.wandb.max_prompts_logged
        )
        if len(table) > self.wandb.Table.MAX_ROWS:
            log.warning(
                "[wandb] the prompts table has %d rows; W&B keeps the first %d of a logged "
                "table (set wandb.max_prompts_logged to choose)",
                len(table),
                self.wandb.Table.MAX_ROWS,
            )
        self.run.log({"prompts": self.wandb.Table(dataframe=table)})
        self.run.summary["prompts_logged"] = len(table)

    def _log_headline(self, uq_scores, quality) -> None:
        numbers = headline(uq_scores, quality, list(self.cell.task.metrics), is_baseline_estimator)
        for key, value in numbers.items():
            self.run.summary[key] = value

    def use_cells(self, cells) -> None:
        """Report run: each cell's evaluate artifact (what the report read) is an input."""
        for c in cells:
            use_stage_artifacts(
                self.wandb,
                self.run,
                ["evaluate"],
                CellId(self.cell.experiment, c.model, c.dataset),
                c.store,
                upload=self.upload,
            )

    def log_report(self, tables: dict, figures: dict) -> None:
        for name, df in tables.items():
            df = df.copy()
            df.columns = [
                "/".join(map(str, c)).strip("/") if isinstance(c, tuple) else str(c)
                for c in df.columns
            ]
            self.run.log({f"table/{name}": self.wandb.Table(dataframe=df)})
        for name, path in figures.items():
            self.run.log({f"figure/{name}": self.wandb.Image(str(path))})

    def finish(self) -> None:
        self.run.finish()


def tracking_enabled(cell: Cell | ReportSettings) -> bool:
    return bool(cell.wandb.enabled) and _mode(cell) != "disabled"


def make_tracker(cell: Cell | ReportSettings, *, report: bool = False) -> NullTracker:
    if not tracking_enabled(cell):
        return NullTracker()
    if report:
        return WandbTracker(
            cell,
            f"{cell.experiment}/report",
            "report",
            tags=[f"experiment:{cell.experiment}", "report"],
        )

    cell_id = CellId(cell.experiment, cell.model.name, cell.dataset.name)
    return WandbTracker(cell, cell_id.run_name, "cell", tags=cell_id.tags, group=cell_id.run_name)


def log_stage_run(cell: Cell, stage: str, result: dict, store) -> None:
    """One short run per stage of a cell (job_type = the stage): it uses the artifacts of the
    stages it read and logs its own output artifact (pipeline.tracking.lineage)."""
    import wandb

    cell_id = CellId(cell.experiment, cell.model.name, cell.dataset.name)
    run = _init_run(
        cell,
        name=f"{cell_id.run_name}/{stage}",
        job_type=stage,
        config=stage_run_config(stage, result, store),
        tags=cell_id.tags,
        group=cell_id.run_name,
    )
    try:
        log_stage_lineage(
            wandb, run, stage, cell_id, store, upload=bool(cell.wandb.upload_artifacts)
        )
        run.summary.update(
            {
                "wall_time_s": result["wall_time_s"],
                "skipped": result["skipped"],
                **{f"{out}_rows": n for out, n in result.get("rows", {}).items()},
            }
        )
    finally:
        run.finish()


LOGGED = ".wandb-logged.json"  # in the cell folder: the artifact keys its W&B runs hold


def _artifact_keys(store) -> dict[str, str]:
    from pipeline.artifacts.schema import ARTIFACTS

    return {name: key for name in ARTIFACTS if (key := store.key(name))}


def cell_needs_logging(cell: Cell, store) -> bool:
    """Whether the cell's artifacts are not yet in W&B: its last logging did not finish (killed
    during it, or before it began) or the artifacts changed since."""
    if not tracking_enabled(cell):
        return False
    try:
        logged = json.loads((store.root / LOGGED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return True
    return logged != _artifact_keys(store)


def track_cell(cell: Cell, results: dict[str, dict], store) -> None:
    """W&B for one cell: a run per stage (ran or skipped as cached: the lineage holds every
    stage), then the cell's run (config, stage times, tables, summary). The keys logged are
    recorded once every run has closed, so a kill during logging logs the cell again next time."""
    if not tracking_enabled(cell):
        return
    (store.root / LOGGED).unlink(missing_ok=True)
    for stage, result in results.items():
        log_stage_run(cell, stage, result, store)
    tracker = make_tracker(cell)
    try:
        for stage, result in results.items():
            tracker.log_stage(stage, result, store)
        tracker.log_cell(store)
        where = getattr(tracker.run, "url", None) if not tracker.run.offline else None
    finally:
        tracker.finish()
    atomic_write_text(store.root / LOGGED, json.dumps(_artifact_keys(store), sort_keys=True))
    run_name = CellId(cell.experiment, cell.model.name, cell.dataset.name).run_name
    if where:
        log.info(
            "[wandb] %s: %d runs (group %s) at %s", run_name, len(results) + 1, run_name, where
        )
    else:
        log.info(
            "[wandb] %s: %d runs (group %s) written offline under %s; upload them with "
            "`make sync` (wandb sync --sync-all in that folder)",
            run_name,
            len(results) + 1,
            run_name,
            os.path.join(str(cell.wandb.dir), "wandb"),
        )
