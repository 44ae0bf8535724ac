"""uq_scores: every estimator of a (target, metric) is scored on one prompt set, so their PRRs
are comparable; the prompts left out are counted. Checked against prr/concordance_auc computed
directly on the expected prompt set (the independent reference)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pipeline.evaluation import concordance_auc, prr
from pipeline.stages.evaluate import UQScoring, estimator_scores

PIDS = [f"p{i}" for i in range(6)]
LOSS = [0.0, 1.0, 0.0, 1.0, 0.5, 1.0]


def _frames(values: dict[str, list[float]]):
    quality = pd.DataFrame(
        {
            "prompt_id": PIDS,
            "method": "bayes",
            "metric": "hamming",
            "value": LOSS,
            "higher_is_better": False,
        }
    )
    unc = pd.DataFrame(
        [
            {"prompt_id": pid, "estimator": name, "value": v}
            for name, vs in values.items()
            for pid, v in zip(PIDS, vs)
        ]
    )
    return quality, unc


def _scores(values):
    quality, unc = _frames(values)
    scoring = UQScoring(
        targets=["bayes"], max_rejection=0.5, ties="average", n_bootstrap=0, ci_alpha=0.05, seed=0
    )
    out = estimator_scores(quality, unc, scoring)
    return out.set_index("estimator")


def test_a_missing_value_drops_the_prompt_for_every_estimator():
    nan = math.nan
    values = {
        "risk": [0.1, 0.9, 0.2, 0.8, 0.5, nan],  # no value on p5
        "msp": [0.3, 0.6, 0.1, 0.9, 0.2, 0.7],
        "ptrue": [nan] * 6,
    }  # computed on no prompt (outside generations)
    scores = _scores(values)
    assert scores.loc["risk", "n"] == scores.loc["msp", "n"] == 5
    assert scores.loc["risk", "n_dropped"] == scores.loc["msp", "n_dropped"] == 1
    assert scores.loc["ptrue", "n"] == 0 and math.isnan(scores.loc["ptrue", "prr"])
    assert math.isnan(scores.loc["risk", "prr_low"])  # n_bootstrap=0: no interval, no crash
    quality = -np.array(LOSS[:5])  # a loss: higher quality = lower loss
    for name in ("risk", "msp"):
        u = np.array(values[name][:5])
        assert scores.loc[name, "prr"] == pytest.approx(prr(u, quality, max_rejection=0.5))
        assert scores.loc[name, "auc"] == pytest.approx(concordance_auc(u, quality))


def test_complete_estimators_use_every_prompt():
    scores = _scores({"risk": [0.1, 0.9, 0.2, 0.8, 0.5, 0.7]})
    assert (scores.loc["risk", "n"], scores.loc["risk", "n_dropped"]) == (6, 0)
