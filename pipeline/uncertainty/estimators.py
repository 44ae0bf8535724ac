"""UQ estimators, registered by name: lm-polygraph's (each a pure function of the statistics it
declares, built from the cached artifacts) and the paper's (the latent entropy and the Bayes
risk of the decide stage). `uq.estimators` picks any of them; `uq.estimator_kwargs.<name>`
passes settings to an lm-polygraph estimator's constructor.

Estimators of one `group` are computed together (lm-polygraph's share their statistics: NLI
matrices, embeddings), by the group's function (names, artifacts, cfg) -> UNCERTAINTY rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from pipeline.registry import Registry
from pipeline.uncertainty.bayes_risk import bayes_risk_frame
from pipeline.uncertainty.latent_entropy import latent_entropy_frame
from pipeline.uncertainty.polygraph import compute_uncertainty


@dataclass(frozen=True)
class Estimator:
    group: str
    description: str = ""
    # computed from the task's latents (the paper's own); False: a baseline it is compared with
    task_aware: bool = False


Group = Callable[[list[str], Mapping[str, pd.DataFrame], Any], pd.DataFrame]
ESTIMATORS: Registry[Estimator] = Registry("UQ estimator")
GROUPS: Registry[Group] = Registry("UQ estimator group")

for _name, _what in [("msp", "maximum sequence probability of the beam decode"),
                     ("semantic_entropy", "entropy over NLI clusters of the samples"),
                     ("kle", "kernel language entropy"), ("sar", "shifting attention to relevance"),
                     ("cocoa_msp", "CoCoA with MSP, of the beam decode"),
                     ("ptrue", "P(True) of the greedy answer")]:
    ESTIMATORS.add(_name, Estimator("lm_polygraph", f"lm-polygraph: {_what}"))
ESTIMATORS.add("latent_entropy", Estimator(
    "latent_entropy", "entropy of p(l | x) over the samples", task_aware=True))
ESTIMATORS.add("bayes_risk", Estimator(
    "bayes_risk", "the Bayes risk of the Bayes decision (ours)", task_aware=True))
ESTIMATORS.add("bayes_risk_fbeta", Estimator(
    "bayes_risk", "the F-beta Bayes risk 1 - E[F_beta] of the GFM action (ours; tasks declaring a "
    "bayes_fbeta decision)", task_aware=True))
# estimator -> the decision whose risk it is (decide stage's `method`)
RISK_OF = {"bayes_risk": "bayes", "bayes_risk_fbeta": "bayes_fbeta"}


@GROUPS.register("lm_polygraph")
def _lm_polygraph(names: list[str], artifacts: Mapping[str, pd.DataFrame], cfg) -> pd.DataFrame:
    from omegaconf import OmegaConf

    from pipeline.aux_models import build_equivalence, build_similarity
    from pipeline.generation.cell import model_tokenizer

    return compute_uncertainty(
        artifacts["samples"], artifacts["decodes"], artifacts["ptrue"], artifacts["dataset"],
        equivalence=build_equivalence(cfg), embedder=build_similarity(cfg),
        estimators=names, target_strategy="beam",  # MSP/CoCoA of the beam output (paper)
        tokenizer=model_tokenizer(cfg),  # SAR's relevance per token of the generating model
        estimator_kwargs=OmegaConf.to_container(cfg.uq.estimator_kwargs, resolve=True),
        nli_with_question=bool(cfg.uq.nli_with_question))


@GROUPS.register("latent_entropy")
def _latent_entropy(names: list[str], artifacts: Mapping[str, pd.DataFrame], cfg) -> pd.DataFrame:
    return latent_entropy_frame(artifacts["latents"])


@GROUPS.register("bayes_risk")
def _bayes_risk(names: list[str], artifacts: Mapping[str, pd.DataFrame], cfg) -> pd.DataFrame:
    decisions = artifacts["decisions"]
    methods = set(decisions["method"])
    # a decision the task does not declare (no F-beta action for classes) has no risk to report
    frames = [bayes_risk_frame(decisions, method=RISK_OF[name], estimator=name) for name in names
              if RISK_OF[name] in methods or RISK_OF[name] == "bayes"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["prompt_id", "estimator", "value"])


def uncertainty_rows(names: list[str], artifacts: Mapping[str, pd.DataFrame], cfg) -> pd.DataFrame:
    """UNCERTAINTY rows of every estimator in `names`, one group call per group."""
    groups: dict[str, list[str]] = {}
    for name in dict.fromkeys(names):
        groups.setdefault(ESTIMATORS[name].group, []).append(name)
    frames = [GROUPS[group](members, artifacts, cfg) for group, members in groups.items()]
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["prompt_id", "estimator", "value"])
    return out[["prompt_id", "estimator", "value"]].astype({"value": "float64"})
