"""lm-eval metrics of the `task_aware` filter's answers: per document what `process_results`
returns, and the aggregations lm-eval prints in its results table and writes to its JSON.

Per document (the filtered response is a `ScoredAnswer`): `bayes_risk` (mean), `confidence`
(mean), `bayes_<metric>` for each of the task's quality metrics (mean; the project's metric on
the Bayes answer, e.g. exact_match_error for classes, f1 and hamming for sets) and, for the
PRR and concordance AUC of the Bayes risk against the task's first metric, one item per
document (position, risk, quality, higher_is_better) that the aggregations `prr`, `prr_low`,
`prr_high`, `auc`, `auc_low`, `auc_high` turn into the number and its percentile-bootstrap
bounds, computed by the evaluate stage's own function with `taskaware-score`'s settings, so the
numbers equal `taskaware-score` on the samples file lm-eval logs.

lm-eval's stderr: it bootstraps only the aggregations it knows (mean, median, f1, bleu, ...;
`lm_eval.api.metrics.stderr_for_metric`) and prints N/A for others, so a PRR has no stderr
column: its interval is the `prr_low` / `prr_high` rows instead (95 %, 1000 resamples; the
bootstrap re-ranks the resampled documents, which a stderr of a mean cannot express).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

Item = tuple[int, float, float, bool]  # (position, Bayes risk, quality, higher_is_better)


def process_results(doc: dict, results: Sequence[Any]) -> dict[str, Any]:
    """The per-document values of the metrics above, from the filtered response."""
    answer = results[0]
    risk = float(getattr(answer, "bayes_risk", math.nan))
    out: dict[str, Any] = {
        "bayes_risk": risk,
        "confidence": float(getattr(answer, "confidence", math.nan)),
    }
    quality = getattr(answer, "quality", {}) or {}
    for metric, (value, _) in quality.items():
        out[f"bayes_{metric}"] = value
    primary = getattr(answer, "primary", None)
    if primary in quality:
        value, higher = quality[primary]
        item: Item = (int(answer.position), risk, value, higher)
        for name in ("prr", "prr_low", "prr_high", "auc", "auc_low", "auc_high"):
            out[f"{name}_bayes_risk"] = item
    return out


@functools.lru_cache(maxsize=8)
def _scores(items: tuple[Item, ...]) -> dict[str, float]:
    """PRR and AUC of the risk against the quality with bootstrap bounds, as the scorer's
    summary computes them (pipeline.stages.evaluate.estimator_scores, experiment=score)."""
    import pandas as pd

    from pipeline.scorer.run import _scorer_evaluation
    from pipeline.stages.evaluate import UQScoring, estimator_scores

    if not items:
        return {k: math.nan for k in ("prr", "prr_low", "prr_high", "auc", "auc_low", "auc_high")}
    quality = pd.DataFrame(
        [
            {
                "prompt_id": str(p),
                "method": "bayes",
                "metric": "quality",
                "value": q,
                "higher_is_better": h,
            }
            for p, _, q, h in items
        ]
    )
    uncertainty = pd.DataFrame(
        [{"prompt_id": str(p), "estimator": "bayes_risk", "value": r} for p, r, _, _ in items]
    )
    scoring = UQScoring.of(_scorer_evaluation(), targets=["bayes"])
    row = estimator_scores(quality, uncertainty, scoring).iloc[0]
    return {k: float(row[k]) for k in ("prr", "prr_low", "prr_high", "auc", "auc_low", "auc_high")}


def _aggregate(name: str):
    def aggregate(items: Sequence[Item]) -> float:
        return _scores(tuple(tuple(i) for i in items))[name]

    aggregate.__name__ = name
    return aggregate


prr, prr_low, prr_high = _aggregate("prr"), _aggregate("prr_low"), _aggregate("prr_high")
auc, auc_low, auc_high = _aggregate("auc"), _aggregate("auc_low"), _aggregate("auc_high")
