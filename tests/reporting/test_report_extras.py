"""Our extras (the F-beta decision and its risk) are reported in their own marked rows and never
take part in the paper's comparisons: best / runner-up marking, Fig. 2a's ranks. Every figure
gives an estimator the same colour."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from pipeline.reporting import tables
from pipeline.reporting.figures import estimator_color, prr_ranks


def _wide(rows: dict[str, float]) -> pd.DataFrame:
    long = pd.DataFrame(
        [
            {
                "model": "m",
                "method": k,
                "source": "ours",
                "dataset": "maqa",
                "metric": "f1",
                "value": v,
            }
            for k, v in rows.items()
        ]
    )
    return tables.wide_table(long, "method", tables.METHODS)


def test_an_extra_row_is_never_best_or_runner_up():
    wide = _wide({"beam": 0.5, "bayes": 0.6, "bayes_fbeta": 0.9, "greedy": 0.4})
    ranks = tables._ranks(wide, lower_better=False)
    by_row = {ix[1]: r for ix, r in ranks[("maqa", "f1")].items()}
    assert by_row["bayes"] == 1 and by_row["beam"] == 2 and pd.isna(by_row["bayes_fbeta"])
    md = tables.render_markdown(wide, "t", tables.METHOD_LABEL, lower_better=False)
    assert "| Bayes (ours) | ours | **0.600** |" in md
    assert "| Bayes F1 (ours) † | ours | 0.900 |" in md and tables.EXTRA_NOTE in md
    tex = tables.render_latex(wide, "t", "tab:t", tables.METHOD_LABEL, lower_better=False)
    assert r"Bayes F1 (ours) $^\dagger$ & ours & 0.900" in tex and r"\textbf{0.600}" in tex


def test_fig_2a_ranks_the_paper_estimators_only():
    scores = pd.DataFrame(
        [
            {
                "model": "m",
                "dataset": "maqa",
                "metric": "f1",
                "target": "bayes",
                "estimator": e,
                "prr": v,
            }
            for e, v in (("bayes_risk", 0.5), ("msp", 0.3), ("bayes_risk_fbeta", 0.9))
        ]
    )
    ranks = prr_ranks(scores).set_index("estimator")["mean_rank"].to_dict()
    assert ranks == {"bayes_risk": 1.0, "msp": 2.0}  # the F-beta risk would have pushed both down


def test_an_estimator_keeps_its_colour_in_every_figure():
    assert estimator_color("bayes_risk") == "black"
    colours = {e: estimator_color(e) for e in ("msp", "sar", "latent_entropy", "kle")}
    assert len(set(colours.values())) == 4
    assert estimator_color("sar") == colours["sar"]  # a function of the name alone


def test_improvement_figures_say_how_many_prompts_each_bin_averages():
    from pipeline.reporting.figures import bin_count_labels, draw_improvement_per_model

    table = pd.DataFrame(
        [
            {"model": "m", "baseline": b, "entropy_bin": k, "entropy_mid": x, "delta": 0.1, "n": n}
            for b, k, x, n in (
                ("beam", 0, 0.5, 4),
                ("greedy", 0, 0.5, 4),
                ("beam", 1, 1.5, 5),
                ("greedy", 1, 1.5, 3),
            )
        ]
    )
    assert bin_count_labels(table) == [(0.5, "n=4"), (1.5, "n=3-5")]
    fig = draw_improvement_per_model(table, "maqa", "hamming", "MAQA")
    top = fig.axes[0].child_axes  # the panel's top axis of counts
    assert [t.get_text() for t in top[0].get_xticklabels()] == ["n=4", "n=3-5"]


def test_an_ablation_panel_without_data_says_so():
    from pipeline.reporting.ablation import COLUMNS
    from pipeline.reporting.figures import draw_samples_ablation

    rows = pd.DataFrame(
        [
            {c: np.nan for c in COLUMNS}
            | {
                "model": "m",
                "m": m,
                "hamming": 0.5,
                "hamming_sd": 0.1,
                "prr_bayes": 0.3,
                "prr_bayes_sd": 0.1,
            }
            for m in (1, 5)
        ]
    )
    fig = draw_samples_ablation(rows)
    said = [[t.get_text() for t in ax.texts] for ax in fig.axes]
    assert said == [[], [], ["no data"]]  # no beam decode: the l_Beam panel is empty
    assert fig.get_layout_engine() is not None  # constrained: labels clear of the neighbours


def test_the_samples_ablation_at_full_m_is_the_bayes_decision_of_every_sample():
    """At M = all samples every subset is the whole set (no randomness): the Hamming loss is that
    of the brute-force Bayes set (the subset of least empirical risk), its sd 0, and R(l_Beam)
    the beam set's mean Hamming distance to the samples."""
    import itertools

    from pipeline.evaluation import prr
    from pipeline.reporting.ablation import AblationSettings, samples_ablation
    from pipeline.tasks.contract import METRICS, Reference

    samples = {
        "p1": [["a"], ["a", "b"], ["a"], ["c"]],
        "p2": [["x"], ["y"], ["x", "y"], ["x"]],
        "p3": [["u"], ["u"], ["u"], ["v"]],
    }
    answers = {"p1": [["a"]], "p2": [["x"], ["z"]], "p3": [["v"]]}
    beams = {"p1": ["a", "b"], "p2": ["x"], "p3": ["u"]}
    rows = [
        {
            "model": "m",
            "prompt_id": p,
            "source": "sample",
            "sample_idx": i,
            "parse_ok": True,
            "latent": json.dumps(sorted(s)),
        }
        for p, ss in samples.items()
        for i, s in enumerate(ss)
    ]
    rows += [
        {
            "model": "m",
            "prompt_id": p,
            "source": "beam",
            "sample_idx": -1,
            "parse_ok": True,
            "latent": json.dumps(b),
        }
        for p, b in beams.items()
    ]
    dataset = pd.DataFrame(
        [{"model": "m", "prompt_id": p, "answers": a} for p, a in answers.items()]
    )

    def hamming(a, b):
        return len(set(a) ^ set(b))

    def risk(action, ss):
        return sum(hamming(action, s) for s in ss) / len(ss)

    def metric(action, p):  # the reported loss against the reference answers
        return METRICS["hamming"].fn(frozenset(action), Reference(answers=answers[p]), None)

    bayes, losses, beam_risks = {}, {}, {}
    for p, ss in samples.items():
        labels = sorted(set().union(*map(set, ss)))
        subsets = [c for r in range(len(labels) + 1) for c in itertools.combinations(labels, r)]
        # ties: the larger set (labels at exactly p = 1/2 belong to the Bayes action)
        bayes[p] = min(subsets, key=lambda c: (risk(c, ss), -len(c)))
        losses[p] = metric(bayes[p], p)
        beam_risks[p] = risk(beams[p], ss)
    beam_quality = {p: -metric(beams[p], p) for p in samples}
    quality = pd.DataFrame(
        [
            {"model": "m", "prompt_id": p, "method": "beam", "metric": "hamming", "value": -q}
            for p, q in beam_quality.items()
        ]
    )
    out = samples_ablation(
        pd.DataFrame(rows),
        dataset,
        quality,
        "sets",
        AblationSettings(ms=(4,), repeats=3, max_rejection=1.0),
    ).iloc[0]
    pids = sorted(samples)
    assert out["hamming"] == pytest.approx(np.mean([losses[p] for p in pids]))
    assert out["hamming_sd"] == 0.0
    assert out["prr_bayes"] == pytest.approx(
        prr(
            np.array([risk(bayes[p], samples[p]) for p in pids]),
            -np.array([losses[p] for p in pids]),
            max_rejection=1.0,
        )
    )
    assert out["prr_beam"] == pytest.approx(
        prr(
            np.array([beam_risks[p] for p in pids]),
            np.array([beam_quality[p] for p in pids]),
            max_rejection=1.0,
        )
    )
