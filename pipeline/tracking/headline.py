"""The headline numbers of a cell, under stable summary names (README, W&B section):

    headline/metric             the task's main metric: the first of task.metrics that was scored
    headline/prr_bayes_risk     PRR of the Bayes risk for the Bayes decision's quality in it
    headline/prr_best_baseline  the best PRR among the baseline estimators (not task-aware)
    headline/best_baseline      that estimator's name ("" when no baseline has a PRR)
    headline/quality_bayes      mean quality of the Bayes decision in the main metric
    headline/quality_beam       mean quality of the beam decode in the main metric

Targets are the Bayes decision's quality (`target == OURS` rows of uq_scores; pipeline.components.methods:
OURS is the Bayes decision, BASELINE beam; the risk estimator is OURS's).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from pipeline.components.methods import BASELINE, OURS, method_column
from pipeline.uncertainty.estimators import ESTIMATORS, risk_estimator

PREFIX = "headline"


def main_metric(metrics: Sequence[str], scored: set[str]) -> str | None:
    """The first metric the task declares that has scores (None when none has)."""
    return next((m for m in metrics if m in scored), None)


def _mean_quality(quality, metric: str, method: str) -> float:
    rows = quality[(quality["metric"] == metric) & (quality["method"] == method)]["value"]
    return float(rows.mean()) if len(rows) else math.nan


def headline(
    uq_scores, quality, metrics: Sequence[str], is_baseline: Callable[[str], bool]
) -> dict[str, Any]:
    """Summary entries `headline/...` of a cell (NaN where a number is not defined, e.g. a PRR
    on prompts of equal quality); {} when no metric was scored."""
    metric = main_metric(metrics, set(quality["metric"]) | set(uq_scores["metric"]))
    if metric is None:
        return {}
    risk = risk_estimator(OURS)
    scores = uq_scores[(uq_scores["target"] == OURS) & (uq_scores["metric"] == metric)]
    ours = scores[scores["estimator"] == risk]["prr"]
    baselines = scores[scores["estimator"].map(is_baseline) & scores["prr"].notna()]
    best = baselines.loc[baselines["prr"].idxmax()] if len(baselines) else None
    return {
        f"{PREFIX}/metric": metric,
        f"{PREFIX}/prr_{risk}": float(ours.iloc[0]) if len(ours) else math.nan,
        f"{PREFIX}/prr_best_baseline": math.nan if best is None else float(best["prr"]),
        f"{PREFIX}/best_baseline": "" if best is None else str(best["estimator"]),
        f"{PREFIX}/quality_{method_column(OURS)}": _mean_quality(quality, metric, OURS),
        f"{PREFIX}/quality_{method_column(BASELINE)}": _mean_quality(quality, metric, BASELINE),
    }


def is_baseline_estimator(name: str) -> bool:
    """A registered estimator of the paper's comparison not marked task-aware (unknown names
    count as baselines; an extra of ours, e.g. a sensitivity row, is none)."""
    estimator = ESTIMATORS.get(name)
    return not (estimator is not None and (estimator.task_aware or not estimator.in_paper))
