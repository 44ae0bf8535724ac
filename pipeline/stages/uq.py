"""The uq stage: every estimator of `uq.estimators` (pipeline.uncertainty.estimators: those of
lm-polygraph on statistics built from the cached artifacts, the latent entropy and the Bayes
risk) -> uncertainty.parquet (prompt_id, estimator, value; higher = less confident)."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from pipeline.stage import plain, stage
from pipeline.store import ArtifactStore

INPUTS = ("dataset", "samples", "decodes", "ptrue", "latents", "decisions")


def uq_slice(cfg: DictConfig) -> dict:
    from pipeline.uncertainty.estimators import ESTIMATORS

    groups = {ESTIMATORS[name].group for name in cfg.uq.estimators}
    # lm-polygraph's statistics come from the equivalence judge and its embedder
    return {"uq": plain(cfg.uq),
            "equivalence": plain(cfg.task.equivalence) if "lm_polygraph" in groups else None}


# v2: SAR's similarity strings shorten a long question instead of losing the text to truncation.
# v3: SAR's relevance per token of the generating model's tokenizer (was per word).
@stage("uq", inputs=INPUTS, outputs=("uncertainty",), config=uq_slice, version=3)
def uq_stage(cfg: DictConfig, store: ArtifactStore, key: str) -> dict[str, Any]:
    from pipeline.uncertainty.estimators import artifacts_read, uncertainty_rows

    names = list(cfg.uq.estimators)
    # what the asked estimators declare they read, nothing else (lm-polygraph's need the texts)
    artifacts = {name: store.read(name) for name in artifacts_read(names)}
    return {"uncertainty": uncertainty_rows(names, artifacts, cfg)}
