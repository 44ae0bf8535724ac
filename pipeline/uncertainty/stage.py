"""The uq stage for one cell: lm-polygraph's estimators on stats built from the cached
artifacts, plus the latent entropy and the Bayes risk (the paper's estimator)."""

from __future__ import annotations

import logging

import pandas as pd
from omegaconf import DictConfig

log = logging.getLogger("pipeline")

POLYGRAPH = ("msp", "semantic_entropy", "kle", "sar", "cocoa_msp", "ptrue")


def uq_cell(cfg: DictConfig, artifacts: dict[str, pd.DataFrame]) -> pd.DataFrame:
    from pipeline.aux_models import build_embedder, build_equivalence
    from pipeline.uncertainty import bayes_risk_frame, compute_uncertainty, latent_entropy_frame

    names = list(cfg.uq.estimators)
    unknown = sorted(set(names) - set(POLYGRAPH) - {"latent_entropy", "bayes_risk"})
    if unknown:
        raise ValueError(f"uq.estimators has unknown {unknown}; choose from "
                         f"{', '.join(POLYGRAPH)}, latent_entropy, bayes_risk")
    frames = []
    polygraph = [n for n in names if n in POLYGRAPH]
    if polygraph:
        eq = cfg.task.equivalence
        frames.append(compute_uncertainty(
            artifacts["samples"], artifacts["decodes"], artifacts["ptrue"], artifacts["dataset"],
            equivalence=build_equivalence(cfg), embedder=build_embedder(eq.embedder, cfg),
            estimators=polygraph, target_strategy="beam"))  # MSP/CoCoA of the beam output (paper)
    if "latent_entropy" in names:
        frames.append(latent_entropy_frame(artifacts["latents"]))
    if "bayes_risk" in names:
        frames.append(bayes_risk_frame(artifacts["decisions"], method="bayes"))
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["prompt_id", "estimator", "value"])
    return out[["prompt_id", "estimator", "value"]].astype({"value": "float64"})
