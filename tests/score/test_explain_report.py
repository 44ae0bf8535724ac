"""`pipeline.report`: the riskiest prompts explained, risk-coverage and calibration data checked
by direct computation on the bundled example sets."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pipeline
from pipeline.explain import calibration_bins, quality_target, risk_coverage

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "byo"


@pytest.fixture(scope="module")
def scored():
    return pipeline.score(EXAMPLES / "sets.jsonl", task="sets")


def test_risk_coverage_is_the_mean_quality_of_the_least_risky(scored):
    target = quality_target(scored)
    col, _, higher = target
    curves = risk_coverage(scored, target)
    q = scored[col].to_numpy(float)
    for name, c in curves.groupby("ranking"):
        assert c["quality"].iloc[0] == pytest.approx(q.mean())  # full coverage: everyone
    # brute force for our risk: keep the k prompts of least risk
    order = np.argsort(scored["bayes_risk"].to_numpy(float), kind="stable")
    ours = curves[curves["ranking"] == "bayes_risk"]
    for k, quality in zip(range(len(q), 0, -1), ours["quality"]):
        assert quality == pytest.approx(q[order[:k]].mean())
    oracle = curves[curves["ranking"] == "oracle"]["quality"].to_numpy()
    for name, c in curves.groupby("ranking"):
        better = oracle >= c["quality"].to_numpy() - 1e-12 if higher else \
            oracle <= c["quality"].to_numpy() + 1e-12
        assert better.all(), name


def test_calibration_bins_hold_every_prompt(scored):
    target = quality_target(scored)
    bins = calibration_bins(scored, target, n_bins=3)
    assert bins["n"].sum() == len(scored)
    predicted = 1 - scored["confidence"].to_numpy(float)
    assert (bins["predicted"] * bins["n"]).sum() / len(scored) == pytest.approx(predicted.mean())
    assert list(bins["predicted"]) == sorted(bins["predicted"])


def test_report_writes_the_riskiest_prompts_and_both_figures(scored, tmp_path):
    written = pipeline.report(scored, tmp_path, n=2)
    assert set(written) == {"riskiest", "risk_coverage", "calibration"}
    text = (tmp_path / "riskiest.md").read_text()
    riskiest = scored.sort_values("bayes_risk", ascending=False).iloc[0]
    assert f"{riskiest.prompt_id}: Bayes risk {riskiest.bayes_risk:.3f}" in text
    assert "latent distribution:" in text and "confidence" in text
    assert (tmp_path / "risk_coverage.png").stat().st_size > 10_000
    assert len(pd.read_csv(tmp_path / "calibration.csv")) >= 1


def test_without_references_the_report_says_so_and_draws_nothing(tmp_path):
    df = pipeline.score([["a", "a", "b"], ["c", "d", "e"]], task="classes")
    written = pipeline.report(df, tmp_path)
    assert set(written) == {"riskiest"}
    assert "No references" in (tmp_path / "riskiest.md").read_text()
