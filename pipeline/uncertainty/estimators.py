"""UQ estimators, registered by name: lm-polygraph's (each a pure function of the statistics it
declares, built from the cached artifacts) and the paper's (the latent entropy and the Bayes
risk of the decide stage). `uq.estimators` picks any of them.

Estimators of one `group` are computed together (lm-polygraph's share their statistics: NLI
matrices, embeddings), by the group's function (names, artifacts, settings, context) ->
UNCERTAINTY rows. A group declares the artifacts it reads and its typed settings
(`register_group(name, reads=..., Config=...)`; `uq.groups.<name>` in the config, e.g.
`uq.groups.lm_polygraph.similarity`); the uq stage loads exactly the artifacts of the estimators
asked for, and its cache key holds their groups' settings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from pipeline.components.methods import BASELINE
from pipeline.components.parts import NoSettings, one_of, option_defaults, pin
from pipeline.components.registry import Registry
from pipeline.mapping.settings import EquivalenceConfig
from pipeline.runtime.errors import ConfigError
from pipeline.uncertainty.bayes_risk import bayes_risk_frame
from pipeline.uncertainty.latent_entropy import latent_entropy_frame
from pipeline.uncertainty.polygraph import (
    EXTRA_INPUTS,
    POLYGRAPH_ESTIMATORS,
    PTRUE_BEAM,
    PTRUE_BEAM_SPEC,
    compute_uncertainty,
    has_ptrue_beam,
)


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
    # one of the paper's compared estimators; False: an extra of ours (own rows, never ranked
    # or marked best against the paper's)
    in_paper: bool = True
    # what it reads beyond the samples' texts, in words ("" for nothing more)
    reads: str = ""
    # a sensitivity row: shown only in the UQ tables and figures whose target is this decision
    # method (None: wherever it was scored), with `note` under each table that shows it
    target: str | None = None
    note: str = ""


@dataclass(frozen=True)
class UQContext:
    """What a cell gives an estimator group besides its settings: where its models run, where
    they cache, the generating model's tokenizer (loaded on first call), and the factories of
    the auxiliary models (`pipeline.aux_models.factories`: embedder, cross-encoder, equivalence judge),
    handed in by the stage so that this layer imports none of them. None of it changes a value
    computed from the group's settings and inputs."""

    device: str = "auto"
    cache_dir: str = "."
    tokenizer: Callable[[], Any] | None = None
    models: Any = None


GroupFn = Callable[[list[str], Mapping[str, pd.DataFrame], Any, UQContext], pd.DataFrame]


@dataclass(frozen=True)
class Group:
    fn: GroupFn
    reads: tuple[str, ...]  # the artifacts it reads (pipeline.artifacts.schema names)
    Config: type = NoSettings  # its typed settings (uq.groups.<name>)


ESTIMATORS: Registry[Estimator] = Registry("UQ estimator", discover=("pipeline.tasks.*.task",))
GROUPS: Registry[Group] = Registry("UQ estimator group")


def register_group(
    name: str, *, reads: tuple[str, ...], Config: type = NoSettings
) -> Callable[[GroupFn], GroupFn]:
    """Decorator: `fn(names, artifacts, settings, context)` computes the estimators `names` of
    group `name` from `artifacts` (exactly those of `reads`, by name), an instance of `Config`
    and the cell's UQContext."""

    def deco(fn: GroupFn) -> GroupFn:
        GROUPS.add(name, Group(fn, tuple(reads), Config))
        return fn

    return deco


def group_option_defaults() -> dict[str, dict[str, Any]]:
    """{group name: its own settings' defaults}: the `uq.groups` node of the config."""
    return option_defaults((n, GROUPS[n].Config) for n in GROUPS.names())


def groups_of(names: list[str]) -> list[str]:
    """The groups of the estimators `names`, in order of first use."""
    return list(dict.fromkeys(ESTIMATORS[n].group for n in names))


def artifacts_read(names: list[str]) -> tuple[str, ...]:
    """The artifacts the estimators `names` read, in a stable order."""
    reads = [a for n in dict.fromkeys(names) for a in GROUPS[ESTIMATORS[n].group].reads]
    return tuple(dict.fromkeys(reads))


# lm-polygraph's, declared once in pipeline.uncertainty.polygraph (class, label, description)
for _name, (_class, _label, _order, _what) in POLYGRAPH_ESTIMATORS.items():
    ESTIMATORS.add(
        _name,
        Estimator(
            "lm_polygraph",
            f"lm-polygraph {_class}: {_what}",
            label=_label,
            table_order=_order,
            reads=EXTRA_INPUTS.get(_name, ""),
        ),
    )
# P(True) asked about the beam decode (generation.ptrue_beam=true): a sensitivity row beside
# P(True) on the greedy decode, not in the paper's comparison (after every other row; its own
# colour in the figures leaves theirs as they were). It comes with ptrue wherever the ptrue
# artifact holds it (`_lm_polygraph`), so the one generation setting turns it on.
ESTIMATORS.add(
    PTRUE_BEAM,
    Estimator(
        "lm_polygraph",
        f"lm-polygraph {PTRUE_BEAM_SPEC[0]}: {PTRUE_BEAM_SPEC[2]}",
        label=PTRUE_BEAM_SPEC[1],
        table_order=9,
        in_paper=False,
        reads="P(True) of the beam decode (generation.ptrue_beam=true)",
        target=BASELINE,
        note=f"{PTRUE_BEAM_SPEC[1]}: a sensitivity row (generation.ptrue_beam=true), P(True) asked "
        "about the beam output, the answer MSP and CoCoA score; the P(True) row beside it "
        "(lm-polygraph's default, the greedy text) is the one compared.",
    ),
)
ESTIMATORS.add(
    "latent_entropy",
    Estimator(
        "latent_entropy",
        "entropy of p(l | x) over the samples",
        task_aware=True,
        label="Latent Entropy",
        table_order=6,
    ),
)
ESTIMATORS.add(
    "bayes_risk",
    Estimator(
        "bayes_risk",
        "the Bayes risk of the Bayes decision (ours)",
        task_aware=True,
        decision="bayes",
        label="R_Bayes (ours)",
        table_order=7,
    ),
)
# a task's own estimators are registered in its folder (pipeline/tasks/<task>/task.py), e.g. the
# F-beta decision's risk


def risk_estimator(decision: str) -> str | None:
    """The estimator that is the risk of decision method `decision` (e.g. the Bayes risk)."""
    return next((n for n in ESTIMATORS.names() if ESTIMATORS[n].decision == decision), None)


def entropy_estimators() -> list[str]:
    """Task-aware estimators that are not a decision's risk (the latent entropy)."""
    return [
        n for n in ESTIMATORS.names() if ESTIMATORS[n].task_aware and ESTIMATORS[n].decision is None
    ]


def shown_for(name: str, target: str) -> bool:
    """Whether estimator `name`'s row belongs in the UQ tables and figures of `target` (a
    sensitivity row only in those of its own target; unknown names everywhere)."""
    own = ESTIMATORS[name].target if name in ESTIMATORS else None
    return own is None or own == target


def estimator_note(name: str) -> str:
    """What a table that shows estimator `name`'s row says of it ("" for nothing)."""
    return ESTIMATORS[name].note if name in ESTIMATORS else ""


def estimator_label(name: str) -> str:
    return (ESTIMATORS[name].label or name) if name in ESTIMATORS else name


def extra_estimators() -> set[str]:
    """Estimators of ours the paper does not compare (never ranked against its)."""
    return {n for n in ESTIMATORS.names() if not ESTIMATORS[n].in_paper}


def table_estimators() -> list[str]:
    """Every registered estimator in the order of the paper's UQ tables."""
    return sorted(ESTIMATORS.names(), key=lambda n: (ESTIMATORS[n].table_order, n))


@dataclass
class PolygraphSettings:
    """lm-polygraph's estimators: their semantic-equivalence judge (task.equivalence, shared with
    the map stage), SAR's and CoCoA's similarity, SE/KLE's NLI premises, constructor arguments."""

    equivalence: EquivalenceConfig = field(default_factory=EquivalenceConfig)  # task.equivalence
    # cross_encoder: lm-polygraph's default (`cross_encoder` below); embedder: the cosine of
    # task.equivalence.embedder (the offline stand-in)
    similarity: str = "embedder"
    cross_encoder: str = "cross-encoder/stsb-roberta-large"
    # its hub revision (branch, tag or commit); null: the latest commit (recorded)
    cross_encoder_revision: str | None = pin()
    # SE/KLE NLI premises: question + answer (true) or the bare answers (false, lm-polygraph's)
    nli_with_question: bool = True
    kwargs: dict[str, Any] = field(default_factory=dict)  # estimator name -> constructor args

    def __post_init__(self) -> None:
        one_of(self, "similarity", ("embedder", "cross_encoder"))


@register_group(
    "lm_polygraph", reads=("dataset", "samples", "decodes", "ptrue"), Config=PolygraphSettings
)
def _lm_polygraph(
    names: list[str],
    artifacts: Mapping[str, pd.DataFrame],
    settings: PolygraphSettings,
    context: UQContext,
) -> pd.DataFrame:
    if context.models is None:
        raise ConfigError(
            "the lm_polygraph estimators need the auxiliary models: pass "
            "UQContext(models=pipeline.aux_models.factories) (the uq stage does)"
        )
    build_embedder, cross_encoder = context.models.build_embedder, context.models.cross_encoder
    equivalence_judge = context.models.equivalence_judge
    if "ptrue" in names and PTRUE_BEAM not in names and has_ptrue_beam(artifacts["ptrue"]):
        names = [*names, PTRUE_BEAM]  # generation.ptrue_beam=true: its sensitivity row too
    similarity = (
        cross_encoder(settings.cross_encoder, context.device, settings.cross_encoder_revision)
        if settings.similarity == "cross_encoder"
        else build_embedder(settings.equivalence.embedder, device=context.device)
    )
    return compute_uncertainty(
        artifacts["samples"],
        artifacts["decodes"],
        artifacts["ptrue"],
        artifacts["dataset"],
        equivalence=equivalence_judge(settings.equivalence, context.device, context.cache_dir),
        embedder=similarity,
        estimators=names,
        target_strategy="beam",  # MSP/CoCoA of the beam output (paper)
        # SAR's relevance per token of the generating model
        tokenizer=context.tokenizer() if context.tokenizer else None,
        estimator_kwargs=settings.kwargs,
        nli_with_question=settings.nli_with_question,
    )


@register_group("latent_entropy", reads=("latents",))
def _latent_entropy(
    names: list[str], artifacts: Mapping[str, pd.DataFrame], settings, context: UQContext
) -> pd.DataFrame:
    return latent_entropy_frame(artifacts["latents"])


@register_group("bayes_risk", reads=("decisions",))
def _bayes_risk(
    names: list[str], artifacts: Mapping[str, pd.DataFrame], settings, context: UQContext
) -> pd.DataFrame:
    decisions = artifacts["decisions"]
    methods = set(decisions["method"])
    # a decision the task does not declare (no F-beta action for classes) has no risk to report
    risk_of = {name: ESTIMATORS[name].decision for name in names}
    frames = [
        bayes_risk_frame(decisions, method=risk_of[name], estimator=name)
        for name in names
        if risk_of[name] in methods or risk_of[name] == "bayes"
    ]
    return (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(columns=["prompt_id", "estimator", "value"])
    )


def uncertainty_rows(
    names: list[str],
    artifacts: Mapping[str, pd.DataFrame],
    settings: Mapping[str, Any] | None = None,
    context: UQContext | None = None,
) -> pd.DataFrame:
    """UNCERTAINTY rows of every estimator in `names`, one group call per group, each with its
    settings `settings[group]` (its dataclass defaults when absent)."""
    groups: dict[str, list[str]] = {}
    for name in dict.fromkeys(names):
        groups.setdefault(ESTIMATORS[name].group, []).append(name)
    from pipeline.runtime.progress import progress

    settings, context = settings or {}, context or UQContext()
    frames = []
    with progress(len(names), "[uq] estimators", unit="estimator", lines=False) as bar:
        for group, members in groups.items():  # the heartbeat shows which group runs
            bar.desc = f"[uq] estimators ({group}: {', '.join(members)})"
            frames.append(
                GROUPS[group].fn(
                    members,
                    {a: artifacts[a] for a in GROUPS[group].reads},
                    settings.get(group) or GROUPS[group].Config(),
                    context,
                )
            )
            bar.update(len(members))
    out = (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(columns=["prompt_id", "estimator", "value"])
    )
    return out[["prompt_id", "estimator", "value"]].astype({"value": "float64"})
