"""Weights & Biases tracking: one run per (experiment, model, dataset) cell plus one report run.

Offline by default (`wandb sync` / `make sync` uploads later). The logged config never holds
secrets: keys come from the environment and any config key that looks like a credential is dropped.
"""

from __future__ import annotations

import os
import re
from typing import Any

from omegaconf import DictConfig, OmegaConf

_SECRET = re.compile(r"(api[_-]?key|token|secret|password|credential)", re.IGNORECASE)


def redact(obj: Any) -> Any:
    """Copy of a plain config without credential-like keys (env var *names* are kept)."""
    if isinstance(obj, dict):
        return {k: redact(v) for k, v in obj.items()
                if not (_SECRET.search(str(k)) and not str(k).endswith("_env"))}
    if isinstance(obj, list):
        return [redact(v) for v in obj]
    return obj


def _mode(cfg: DictConfig) -> str:
    return os.environ.get("WANDB_MODE") or cfg.wandb.mode


class NullTracker:
    def log_stage(self, name: str, result: dict, store) -> None: ...
    def log_cell(self, store) -> None: ...
    def log_report(self, tables: dict, figures: dict) -> None: ...
    def finish(self) -> None: ...


# What a report run logs as its config: the report reads artifacts, not one cell's settings
# (the sweep's primary config has no cell, and its cell keys may not even resolve).
REPORT_KEYS = ("experiment", "output_root", "results_dir", "report_models", "evaluation")


class WandbTracker(NullTracker):
    def __init__(self, cfg: DictConfig, name: str, job_type: str):
        import wandb

        # Hydra's own node (present in callbacks) holds job-time interpolations: not ours to log.
        keys = REPORT_KEYS if job_type == "report" else [k for k in cfg.keys() if k != "hydra"]
        ours = OmegaConf.masked_copy(cfg, list(keys))
        config = redact(OmegaConf.to_container(ours, resolve=True))
        os.makedirs(cfg.wandb.dir, exist_ok=True)
        self.wandb = wandb
        self.run = wandb.init(project=cfg.wandb.project, entity=cfg.wandb.entity, mode=_mode(cfg),
                              dir=cfg.wandb.dir, name=name, group=cfg.experiment,
                              job_type=job_type, config=config, reinit="finish_previous")

    def log_stage(self, name: str, result: dict, store) -> None:
        data = {f"{name}/wall_time_s": result["wall_time_s"], f"{name}/skipped": result["skipped"]}
        for artifact, rows in result.get("rows", {}).items():
            data[f"{name}/{artifact}_rows"] = rows
        self.run.log(data)

    def log_cell(self, store) -> None:
        for artifact in ("uq_scores",):
            if store.manifest(artifact) is not None:
                df = store.read(artifact)
                self.run.log({artifact: self.wandb.Table(dataframe=df)})
                for row in df.itertuples():
                    self.run.summary[f"prr/{row.target}/{row.metric}/{row.estimator}"] = row.prr
                    self.run.summary[f"auc/{row.target}/{row.metric}/{row.estimator}"] = row.auc
        if store.manifest("quality") is not None:
            q = store.read("quality")
            means = q.groupby(["metric", "method"])["value"].mean()
            for (metric, method), value in means.items():
                self.run.summary[f"quality/{metric}/{method}"] = float(value)

    def log_report(self, tables: dict, figures: dict) -> None:
        for name, df in tables.items():
            df = df.copy()
            df.columns = ["/".join(map(str, c)).strip("/") if isinstance(c, tuple) else str(c)
                          for c in df.columns]
            self.run.log({f"table/{name}": self.wandb.Table(dataframe=df)})
        for name, path in figures.items():
            self.run.log({f"figure/{name}": self.wandb.Image(str(path))})

    def finish(self) -> None:
        self.run.finish()


def make_tracker(cfg: DictConfig, *, report: bool = False) -> NullTracker:
    if not cfg.wandb.enabled or _mode(cfg) == "disabled":
        return NullTracker()
    if report:
        return WandbTracker(cfg, f"{cfg.experiment}/report", "report")
    return WandbTracker(cfg, f"{cfg.experiment}/{cfg.model.name}/{cfg.dataset.name}", "cell")
