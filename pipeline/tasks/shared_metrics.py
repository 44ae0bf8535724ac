"""Metrics of decision texts against reference texts: COMET (translation) and AlignScore
(summaries). Each needs a checkpoint (`metrics.comet.model`, `metrics.alignscore.ckpt`); without
one the metric is skipped and the log says so."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.components.parts import one_of, pin
from pipeline.tasks.contract import METRICS, Metric, MetricContext


@dataclass
class CometSettings:
    model: str | None = None  # e.g. Unbabel/wmt22-comet-da (hub) or a local checkpoint
    # a hub checkpoint's revision (branch, tag or commit); null: its latest commit (recorded)
    revision: str | None = pin()


@dataclass
class AlignScoreSettings:
    ckpt: str | None = None  # AlignScore-large.ckpt (hub URL or local file)
    model: str = "roberta-large"  # its backbone
    model_revision: str | None = pin()  # the backbone's hub revision; null: the latest (recorded)
    # Which text is AlignScore's claim (the other its context). "reference": lm-polygraph's
    # AlignScore default (target_is_claims), "is the reference supported by the summary?";
    # "generation": the summary checked against the reference (docs/fidelity.md).
    claim: str = "reference"

    def __post_init__(self) -> None:
        one_of(self, "claim", ("reference", "generation"))


def _comet(settings: CometSettings, context: MetricContext):
    from pipeline.aux_models.factories import comet_scorer

    return (
        comet_scorer(settings.model, context.device, settings.revision) if settings.model else None
    )


def _alignscore(settings: AlignScoreSettings, context: MetricContext):
    from pipeline.aux_models.factories import alignscore_scorer

    return (
        alignscore_scorer(
            settings.ckpt, settings.model, context.device, settings.claim, settings.model_revision
        )
        if settings.ckpt
        else None
    )


METRICS.add(
    "comet",
    Metric(
        "COMET",
        higher_is_better=True,
        scorer=_comet,
        Config=CometSettings,
        config_key="metrics.comet.model",
    ),
)
METRICS.add(
    "alignscore",
    Metric(
        "AlignScore",
        higher_is_better=True,
        scorer=_alignscore,
        Config=AlignScoreSettings,
        config_key="metrics.alignscore.ckpt",
    ),
)
