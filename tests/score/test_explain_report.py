"""`pipeline.report`: the riskiest prompts explained, risk-coverage and calibration data checked
by direct computation on the bundled example sets."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pipeline
from pipeline.scorer.report import calibration_bins, quality_target, risk_coverage

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "byo"


@pytest.fixture(scope="module")
def scored():
    return pipeline.score(EXAMPLES / "sets.jsonl", task="sets")


def test_risk_coverage_is_the_mean_quality_of_the_least_risky(scored):
    target = quality_target(scored)
    col, _, higher = target
    curves = risk_coverage(scored, target)
    q = scored[col].to_numpy(float)
    for _name, c in curves.groupby("ranking"):
        assert c["quality"].iloc[0] == pytest.approx(q.mean())  # full coverage: everyone
    # brute force for our risk: keep the k prompts of least risk
    order = np.argsort(scored["bayes_risk"].to_numpy(float), kind="stable")
    ours = curves[curves["ranking"] == "bayes_risk"]
    for k, quality in zip(range(len(q), 0, -1), ours["quality"]):
        assert quality == pytest.approx(q[order[:k]].mean())
    oracle = curves[curves["ranking"] == "oracle"]["quality"].to_numpy()
    for name, c in curves.groupby("ranking"):
        better = (
            oracle >= c["quality"].to_numpy() - 1e-12
            if higher
            else oracle <= c["quality"].to_numpy() + 1e-12
        )
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
    riskiest = scored.sort_values("confidence", kind="stable").iloc[0]
    assert f"{riskiest.prompt_id}: Bayes risk {riskiest.bayes_risk:.3f}" in text
    assert "latent distribution:" in text and "confidence" in text
    assert (tmp_path / "risk_coverage.png").stat().st_size > 10_000
    assert len(pd.read_csv(tmp_path / "calibration.csv")) >= 1


def test_without_references_the_report_says_so_and_draws_nothing(tmp_path):
    df = pipeline.score([["a", "a", "b"], ["c", "d", "e"]], task="classes")
    written = pipeline.report(df, tmp_path)
    assert set(written) == {"riskiest"}
    assert "No references" in (tmp_path / "riskiest.md").read_text()


def test_the_riskiest_list_ranks_by_the_confidence_column_not_the_raw_risk():
    """Scattered junk labels: a large Hamming risk but nothing confident; a clean 6/4 split of
    one label: a small risk. The column says the scattered prompt is the least trustworthy and
    the report lists it first, whatever the unnormalised risks say."""
    scattered = [f"junk{i}, more{i}" for i in range(10)]  # empty Bayes set, risk 2.0
    split = ["Paris"] * 6 + ["Lyon"] * 4  # {paris}, risk 0.4 + 0.4 = 0.8
    wide = ["a, b, c, d, e"] * 6 + ["f, g, h, i, j"] * 4  # risk 10 x 0.4 = 4.0
    df = pipeline.score(
        [
            {"id": "scattered", "responses": scattered},
            {"id": "split", "responses": split},
            {"id": "wide", "responses": wide},
        ],
        task="sets",
    )
    conf = df.set_index("prompt_id")["confidence"]
    assert conf["scattered"] == 0.0 and conf["split"] == pytest.approx(0.6)
    assert (
        df.set_index("prompt_id")["bayes_risk"]["wide"]
        > df.set_index("prompt_id")["bayes_risk"]["scattered"]
    )  # the raw risk would list "wide" first
    from pipeline.scorer.report import audit_report

    text = audit_report(df, n=3)
    # wide's expected F1 is 0.6 too (6 x 1, 4 x 0): the tie goes to the larger risk
    assert text.index("scattered: Bayes") < text.index("wide: Bayes") < text.index("split: Bayes")
    first = text.split("\n\n")[1]
    assert first.startswith("scattered: Bayes risk 2.000 (confidence 0.00)"), first


def test_numbers_are_one_class_as_digits_or_words_and_the_answer_is_the_label():
    question = "How many legs does a spider have?"
    df = pipeline.score(
        [
            {
                "question": question,
                "responses": [
                    "8",
                    "eight",
                    "A spider has eight legs.",
                    "Eight.",
                    "A spider has 6 legs.",
                ],
            }
        ],
        task="classes",
    )
    row = df.iloc[0]
    assert row["bayes_action"] == "8" and row["bayes_risk"] == pytest.approx(0.2)
    assert json.loads(row["latent_distribution"]) == {"8": 0.8, "6": 0.2}
    assert row["bayes_text"] == "8" and row["bayes_member_text"] == "eight"  # 2 of the 4


def _scored(rows, **kwargs):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pipeline.score(rows, task="classes", **kwargs)


def _rows(n, offset=0):
    cities = ["Paris", "Lyon", "Nice"]
    return [
        {
            "responses": [cities[(i + k) % 3] for k in range((i % 4) + 2)] + ["Paris"],
            "reference": "Paris",
        }
        for i in range(offset, offset + n)
    ]


def test_summaries_and_the_report_survive_concat_slices_and_a_parquet_round_trip(tmp_path):
    """Everything rests on the frame's columns, not on `df.attrs`: after `pd.concat` of two
    scored frames the summary is the one of scoring both inputs at once; a slice gets its
    own; a frame read back from parquet the same as before; and the report keeps its figures."""
    from pipeline.scorer.run import summaries

    a, b = _scored(_rows(12)), _scored(_rows(12, offset=12))
    both = _scored(_rows(24))
    joined = pd.concat([a, b], ignore_index=True)
    pd.testing.assert_frame_equal(summaries(joined)[0], summaries(both)[0])
    pd.testing.assert_frame_equal(summaries(joined)[1], summaries(both)[1])
    assert summaries(a)[0]["n"].tolist() == [12, 12]  # attrs of its own rows: reused
    part = both.iloc[:10]
    assert summaries(part)[0]["n"].tolist() == [10, 10]
    pd.testing.assert_frame_equal(summaries(part)[0], summaries(_scored(_rows(10)))[0])
    path = tmp_path / "scored.parquet"
    both.to_parquet(path)
    back = pd.read_parquet(path)
    pd.testing.assert_frame_equal(summaries(back)[0], summaries(both)[0])
    for frame in (joined, back):
        written = pipeline.report(frame, tmp_path / "report")
        assert {"risk_coverage", "calibration"} <= set(written), written


def test_a_scored_frame_writes_to_parquet_with_flat_columns(tmp_path):
    """latent_distribution is JSON text in memory as on disk: a dict per row became a struct
    with one field per label."""
    import json

    import pyarrow.parquet as pq

    df = _scored(_rows(30))
    df.to_parquet(tmp_path / "s.parquet")
    schema = pq.read_schema(tmp_path / "s.parquet")
    assert str(schema.field("latent_distribution").type) == "string"
    # the first prompt's samples: Paris, Lyon, Paris
    assert json.loads(df["latent_distribution"].iloc[0]) == {"paris": 0.666667, "lyon": 0.333333}
