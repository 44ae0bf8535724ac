"""Our table cells carry their prompt count and 95% bootstrap interval; a cell with too few
prompts is never marked best; the paper's rows carry neither."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipeline.reporting import tables
from pipeline.reporting.collect import quality_means


def _table(n: int, dropped: int = 0, below: float = 0.04, above: float = 0.03) -> tables.Table:
    """R_Bayes 0.6, SAR 0.5, MSP 0.4 (ours) with intervals [v - below, v + above]; the paper's
    MSP 0.7."""
    ours = [
        {
            "model": "m",
            "estimator": e,
            "source": "ours",
            "dataset": "maqa",
            "metric": "f1",
            "value": v,
            "low": v - below,
            "high": v + above,
            "n": n,
            "n_dropped": dropped,
        }
        for e, v in (("bayes_risk", 0.6), ("msp", 0.4), ("sar", 0.5))
    ]
    paper = [
        {
            "model": "m",
            "estimator": "msp",
            "source": "paper",
            "dataset": "maqa",
            "metric": "f1",
            "value": 0.7,
        }
    ]
    return tables.Table.from_long(pd.DataFrame(ours + paper), "estimator", tables.ESTIMATORS)


def test_cells_show_their_interval_and_the_models_prompt_count():
    md = tables.render_markdown(
        _table(40, dropped=2), "t", tables.ESTIMATOR_LABEL, lower_better=False, min_n=30
    )
    assert "| m | R_Bayes (ours) | ours | **0.600** [0.56, 0.63] |" in md
    assert "| m | SAR | ours | 0.500 [0.46, 0.53] |" in md  # runner-up: underlined in LaTeX only
    assert "| m | MSP | paper | **0.700** |" in md  # the paper's block: its own best, no interval
    assert md.count("| m | n | ours | 40, 2 dropped |") == 1  # once per model, after its rows
    tex = tables.render_latex(
        _table(40), "t", "tab:t", tables.ESTIMATOR_LABEL, lower_better=False, min_n=30
    )
    assert r"\textbf{0.600}{\scriptsize [0.56, 0.63]}" in tex and r"\underline{0.500}" in tex
    assert r"m & $n$ & ours & 40 \\" in tex


def test_a_cell_with_too_few_prompts_is_not_marked_best():
    md = tables.render_markdown(
        _table(10), "t", tables.ESTIMATOR_LABEL, lower_better=False, min_n=30
    )
    assert "| m | R_Bayes (ours) | ours | 0.600 [0.56, 0.63] |" in md  # no bold
    assert "| m | n | ours | 10 (too small) |" in md and "n < 30 (too small)" in md
    tex = tables.render_latex(
        _table(10), "t", "tab:t", tables.ESTIMATOR_LABEL, lower_better=False, min_n=30
    )
    assert r"\textbf{0.600}" not in tex and r"\underline" not in tex


def test_a_best_whose_interval_overlaps_the_next_is_not_marked():
    # R_Bayes [0.5, 0.65] overlaps SAR [0.4, 0.55]: no best; SAR overlaps MSP [0.3, 0.45]: no
    # runner-up. The paper's rows have no intervals and keep their marks.
    kw = dict(row_label=tables.ESTIMATOR_LABEL, lower_better=False, min_n=30)
    md = tables.render_markdown(_table(40, below=0.1, above=0.05), "t", **kw)
    assert "| m | R_Bayes (ours) | ours | 0.600 [0.50, 0.65] |" in md
    assert "| m | MSP | paper | **0.700** |" in md and "overlaps that of a method" in md
    tex = tables.render_latex(_table(40, below=0.1, above=0.05), "t", "tab:t", **kw)
    assert r"\textbf{0.600}" not in tex and r"\underline" not in tex
    # clear of SAR but SAR overlaps MSP: best marked, runner-up not
    ours = _table(40, below=0.04, above=0.03)
    ours.low.loc[("m", "msp", "ours")] = 0.3
    ours.high.loc[("m", "msp", "ours")] = 0.47
    tex = tables.render_latex(ours, "t", "tab:t", **kw)
    assert r"\textbf{0.600}" in tex and r"\underline" not in tex


def test_the_csv_holds_the_interval_and_count_columns(tmp_path):
    tables.write_table(
        _table(40, dropped=2), tmp_path, "x", "t", tables.ESTIMATOR_LABEL, lower_better=False
    )
    csv = pd.read_csv(tmp_path / "x.csv").set_index(["estimator", "source"])
    row = csv.loc[("bayes_risk", "ours")]
    assert (
        row["maqa/f1"],
        row["maqa/f1/low"],
        row["maqa/f1/high"],
        row["maqa/f1/n"],
        row["maqa/f1/n_dropped"],
    ) == (0.6, 0.56, 0.63, 40, 2)
    assert np.isnan(csv.loc[("msp", "paper"), "maqa/f1/low"])


def test_the_quality_interval_is_a_percentile_bootstrap_of_the_mean(tmp_path):
    """Against an independent computation: the same resamples drawn with numpy directly."""
    from pipeline.artifacts.store import ArtifactStore
    from pipeline.reporting.collect import Cell

    values = np.array([0.0, 1.0, 1.0, 0.5, 0.25, 1.0, 0.0, 0.75])
    store = ArtifactStore(tmp_path / "m" / "maqa")
    store.write(
        "quality",
        pd.DataFrame(
            {
                "prompt_id": [f"p{i}" for i in range(8)],
                "method": "bayes",
                "metric": "f1",
                "value": values,
                "higher_is_better": True,
            }
        ),
        key="k",
        config={},
    )
    got = quality_means([Cell("m", "maqa", store)], n_bootstrap=500, alpha=0.1, seed=3)
    rng = np.random.default_rng(3)
    means = values[rng.integers(0, 8, size=(500, 8))].mean(axis=1)
    low, high = np.quantile(means, [0.05, 0.95])
    row = got.iloc[0]
    assert (row["n"], row["value"]) == (8, values.mean())
    np.testing.assert_allclose([row["low"], row["high"]], [low, high])
    assert (
        quality_means([Cell("m", "maqa", store)], n_bootstrap=0)[["low", "high"]]
        .isna()
        .all(axis=None)
    )


def test_table_5_says_in_the_table_that_the_paper_repeats_table_3():
    assert "identical to its Table 3" in tables.NOTES["uq_prr_beam"]
    md = tables.render_markdown(
        _table(40),
        "t",
        tables.ESTIMATOR_LABEL,
        lower_better=False,
        note=tables.NOTES["uq_prr_beam"],
    )
    assert md.splitlines()[2] == tables.NOTES["uq_prr_beam"]


def test_bayes_vs_beam_is_a_paired_bootstrap_of_the_mean_difference(tmp_path):
    """Against an independent computation (the same resamples, one per prompt pair); the verdict
    follows the metric's direction; a prompt beam did not score is left out of the pairs."""
    from pipeline.artifacts.store import ArtifactStore
    from pipeline.reporting.collect import Cell, bayes_vs_beam, bayes_vs_beam_lines, per_prompt

    rng = np.random.default_rng(0)
    bayes = rng.uniform(0.4, 1.0, 30)
    beam = bayes - rng.uniform(0.05, 0.3, 30)  # worse on every prompt
    rows = []
    for metric, higher, sign in (("f1", True, 1.0), ("hamming", False, -1.0)):
        for method, values in (("bayes", sign * bayes), ("beam", sign * beam)):
            rows += [
                {
                    "prompt_id": f"p{i}",
                    "method": method,
                    "metric": metric,
                    "value": v,
                    "higher_is_better": higher,
                }
                for i, v in enumerate(values)
            ]
    rows.append(
        {
            "prompt_id": "p30",
            "method": "bayes",
            "metric": "f1",
            "value": 0.0,
            "higher_is_better": True,
        }
    )  # no beam for p30: not a pair
    store = ArtifactStore(tmp_path / "m" / "maqa")
    store.write("quality", pd.DataFrame(rows), key="k", config={})
    got = bayes_vs_beam(
        per_prompt([Cell("m", "maqa", store)], "quality"), n_bootstrap=400, alpha=0.05, seed=7
    )
    draws = np.random.default_rng(7).integers(0, 30, size=(400, 30))
    by_id = np.argsort([f"p{i}" for i in range(30)])  # the pairs in prompt-id order
    diffs = (bayes - beam)[by_id][draws].mean(axis=1)
    f1 = got.set_index("metric").loc["f1"]
    assert f1["n"] == 30 and f1["difference"] == pytest.approx((bayes - beam).mean())
    np.testing.assert_allclose([f1["low"], f1["high"]], np.quantile(diffs, [0.025, 0.975]))
    assert list(got["verdict"]) == ["better", "better"]  # higher F1, lower Hamming
    # the same numbers the other way round: worse; an interval across 0: nothing shown
    swapped = store.read("quality").replace({"method": {"bayes": "beam", "beam": "bayes"}})
    swapped = swapped[swapped["prompt_id"] != "p30"]
    store.write("quality", swapped, key="k2", config={})
    assert set(
        bayes_vs_beam(per_prompt([Cell("m", "maqa", store)], "quality"), seed=7)["verdict"]
    ) == {"worse"}
    tie = pd.DataFrame(
        [
            {
                "prompt_id": f"p{i}",
                "method": m,
                "metric": "f1",
                "value": v,
                "higher_is_better": True,
            }
            for i in range(10)
            for m, v in (("bayes", i % 2), ("beam", (i + 1) % 2))
        ]
    )
    store.write("quality", tie, key="k3", config={})
    versus = bayes_vs_beam(per_prompt([Cell("m", "maqa", store)], "quality"), seed=7)
    assert list(versus["verdict"]) == ["no difference shown"]
    assert bayes_vs_beam_lines(versus)[0].startswith(
        "maqa f1 (m, higher is better): Bayes (ours) 0.500 vs Beam 0.500, difference +0.000 ["
    )
    assert bayes_vs_beam_lines(versus)[0].endswith(
        "(95% paired bootstrap, n = 10): no difference shown"
    )
    # the same decision scored twice, apart in the last digits: no difference, not "worse"
    kl = rng.uniform(5, 15, 6)
    noise = pd.DataFrame(
        [
            {
                "prompt_id": f"p{i}",
                "method": m,
                "metric": "kl",
                "value": v,
                "higher_is_better": False,
            }
            for i in range(6)
            for m, v in (("bayes", kl[i] + 4e-15), ("beam", kl[i]))
        ]
    )
    store.write("quality", noise, key="k4", config={})
    assert list(
        bayes_vs_beam(per_prompt([Cell("m", "maqa", store)], "quality"), seed=7)["verdict"]
    ) == ["no difference shown"]
