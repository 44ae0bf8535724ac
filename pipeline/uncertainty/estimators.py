"""UQ estimators, registered by name: lm-polygraph's (each a pure function of the statistics it
declares, built from the cached artifacts) and the paper's (the latent entropy and the Bayes
risk of the decide stage). `uq.estimators` picks any of them; `uq.estimator_kwargs.<name>`
passes settings to an lm-polygraph estimator's constructor.

Estimators of one `group` are computed together (lm-polygraph's share their statistics: NLI
matrices, embeddings), by the group's function (names, artifacts, cfg) -> UNCERTAINTY rows. A
group declares the artifacts it reads (`register_group(name, reads=...)`); the uq stage loads
exactly those of the estimators asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from pipeline.registry import Registry
from pipeline.uncertainty.bayes_risk import bayes_risk_frame
from pipeline.uncertainty.latent_entropy import latent_entropy_frame
from pipeline.uncertainty.polygraph import POLYGRAPH_ESTIMATORS, compute_uncertainty


@dataclass(frozen=True)
class Estimator:
    group: str
    description: str = ""
    # computed from the task's latents (the paper's own); False: a baseline it is compared with
    task_aware: bool = False
    # the decide stage's method whose Bayes risk this is (risk estimators only)
    decision: str | None = None
    label: str = ""  # in tables and figures (default: the name)
    table_order: int = 99  # row position in the paper's UQ tables (Tables 3-8)


GroupFn = Callable[[list[str], Mapping[str, pd.DataFrame], Any], pd.DataFrame]


@dataclass(frozen=True)
class Group:
    fn: GroupFn
    reads: tuple[str, ...]  # the artifacts it reads (pipeline.schema names)


ESTIMATORS: Registry[Estimator] = Registry("UQ estimator")
GROUPS: Registry[Group] = Registry("UQ estimator group")


def register_group(name: str, *, reads: tuple[str, ...]) -> Callable[[GroupFn], GroupFn]:
    """Decorator: `fn(names, artifacts, cfg)` computes the estimators `names` of group `name`
    from `artifacts` (exactly those of `reads`, by name)."""
    def deco(fn: GroupFn) -> GroupFn:
        GROUPS.add(name, Group(fn, tuple(reads)))
        return fn
    return deco


def artifacts_read(names: list[str]) -> tuple[str, ...]:
    """The artifacts the estimators `names` read, in a stable order."""
    reads = [a for n in dict.fromkeys(names) for a in GROUPS[ESTIMATORS[n].group].reads]
    return tuple(dict.fromkeys(reads))

# lm-polygraph's, declared once in pipeline.uncertainty.polygraph (class, label, description)
for _name, (_class, _label, _order, _what) in POLYGRAPH_ESTIMATORS.items():
    ESTIMATORS.add(_name, Estimator("lm_polygraph", f"lm-polygraph {_class}: {_what}",
                                    label=_label, table_order=_order))
ESTIMATORS.add("latent_entropy", Estimator(
    "latent_entropy", "entropy of p(l | x) over the samples", task_aware=True,
    label="Latent Entropy", table_order=6))
ESTIMATORS.add("bayes_risk", Estimator(
    "bayes_risk", "the Bayes risk of the Bayes decision (ours)", task_aware=True, decision="bayes",
    label="R_Bayes (ours)", table_order=7))
ESTIMATORS.add("bayes_risk_fbeta", Estimator(
    "bayes_risk", "the F-beta Bayes risk 1 - E[F_beta] of the GFM action (ours; tasks declaring a "
    "bayes_fbeta decision)", task_aware=True, decision="bayes_fbeta", label="R_Bayes F1 (ours)",
    table_order=8))


def risk_estimator(decision: str) -> str | None:
    """The estimator that is the risk of decision method `decision` (e.g. the Bayes risk)."""
    return next((n for n in ESTIMATORS.names() if ESTIMATORS[n].decision == decision), None)


def entropy_estimators() -> list[str]:
    """Task-aware estimators that are not a decision's risk (the latent entropy)."""
    return [n for n in ESTIMATORS.names()
            if ESTIMATORS[n].task_aware and ESTIMATORS[n].decision is None]


def estimator_label(name: str) -> str:
    return (ESTIMATORS[name].label or name) if name in ESTIMATORS else name


def table_estimators() -> list[str]:
    """Every registered estimator in the order of the paper's UQ tables."""
    return sorted(ESTIMATORS.names(), key=lambda n: (ESTIMATORS[n].table_order, n))


@register_group("lm_polygraph", reads=("dataset", "samples", "decodes", "ptrue"))
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


@register_group("latent_entropy", reads=("latents",))
def _latent_entropy(names: list[str], artifacts: Mapping[str, pd.DataFrame], cfg) -> pd.DataFrame:
    return latent_entropy_frame(artifacts["latents"])


@register_group("bayes_risk", reads=("decisions",))
def _bayes_risk(names: list[str], artifacts: Mapping[str, pd.DataFrame], cfg) -> pd.DataFrame:
    decisions = artifacts["decisions"]
    methods = set(decisions["method"])
    # a decision the task does not declare (no F-beta action for classes) has no risk to report
    risk_of = {name: ESTIMATORS[name].decision for name in names}
    frames = [bayes_risk_frame(decisions, method=risk_of[name], estimator=name) for name in names
              if risk_of[name] in methods or risk_of[name] == "bayes"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["prompt_id", "estimator", "value"])


def uncertainty_rows(names: list[str], artifacts: Mapping[str, pd.DataFrame], cfg) -> pd.DataFrame:
    """UNCERTAINTY rows of every estimator in `names`, one group call per group."""
    groups: dict[str, list[str]] = {}
    for name in dict.fromkeys(names):
        groups.setdefault(ESTIMATORS[name].group, []).append(name)
    frames = [GROUPS[group].fn(members, {a: artifacts[a] for a in GROUPS[group].reads}, cfg)
              for group, members in groups.items()]
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["prompt_id", "estimator", "value"])
    return out[["prompt_id", "estimator", "value"]].astype({"value": "float64"})
