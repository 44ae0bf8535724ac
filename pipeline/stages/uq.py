"""The uq stage: every estimator of `uq.estimators` (pipeline.uncertainty.estimators: those of
lm-polygraph on statistics built from the cached artifacts, the latent entropy and the Bayes
risk) -> uncertainty.parquet (prompt_id, estimator, value; higher = less confident)."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from pipeline.parts import cache_slice
from pipeline.stage import stage
from pipeline.store import ArtifactStore

INPUTS = ("dataset", "samples", "decodes", "ptrue", "latents", "decisions")


def group_settings(cfg: DictConfig) -> dict[str, Any]:
    """{group: its typed settings (uq.groups.<group>)} for the groups of uq.estimators."""
    from pipeline.uncertainty.estimators import group_config, groups_of

    return {group: group_config(cfg, group) for group in groups_of(list(cfg.uq.estimators))}


def uq_slice(cfg: DictConfig) -> dict:
    # the estimators asked for and their groups' settings, from the settings dataclasses
    return {"estimators": list(cfg.uq.estimators),
            "groups": {group: cache_slice(s) for group, s in group_settings(cfg).items()}}


# v2: SAR's similarity strings shorten a long question instead of losing the text to truncation.
# v3: SAR's relevance per token of the generating model's tokenizer (was per word).
@stage("uq", inputs=INPUTS, outputs=("uncertainty",), config=uq_slice, version=3,
       parts=("task.space",))
def uq_stage(cfg: DictConfig, store: ArtifactStore, key: str) -> dict[str, Any]:
    from pipeline import aux_models
    from pipeline.generation.cell import model_tokenizer, served
    from pipeline.uncertainty.estimators import UQContext, artifacts_read, uncertainty_rows

    names = list(cfg.uq.estimators)
    # what the asked estimators declare they read, nothing else (lm-polygraph's need the texts)
    artifacts = {name: store.read(name) for name in artifacts_read(names)}
    # a served model's tokenizer is the server's: SAR then weighs words, not tokens (nothing
    # local is loaded or converted for backend=openai)
    context = UQContext(cfg.device, cfg.cache_dir,
                        tokenizer=None if served(cfg) else lambda: model_tokenizer(cfg),
                        models=aux_models)
    return {"uncertainty": uncertainty_rows(names, artifacts, group_settings(cfg), context)}
