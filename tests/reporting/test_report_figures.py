"""The report's figures follow the paper's setting (issue 12), on synthetic artifacts of five
models (the paper's four LLMs and the 72B) and four datasets, written through ArtifactStore in the
columns of pipeline/artifacts/schema.py and read back with pipeline.reporting.collect:

- Figs. 7-9 ("Improvement of l_bayes across increasing latent entropy" on MAQA, WMT19, MAQA*):
  one panel per model, titled with the model's name, entropy bins per model;
- Fig. 2c (latent entropy vs Bayes risk): one model (gemma-3-12b-it, the paper's) on MAQA*;
- Fig. 2a (average PRR rank): over the paper's four LLMs, never the 72B; the models present
  (said in the title) when none of the four ran; the paper's panel titled as derived from Table 3;
- Fig. 2b (PRR per UQ method on MAQA): one bar per model of the paper's four LLMs, no 72B bar;
- Fig. 6 ("UQ performance of R(l_Beam)"): PRR of the beam response's risk under the samples
  against the beam response's quality, checked against a computation of its own here.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from pipeline.artifacts.store import ArtifactStore
from pipeline.config import Config, resolve_report
from pipeline.evaluation import prr
from pipeline.reporting import FIGURE_NAMES, build_report, figure_options, figures
from pipeline.reporting.ablation import AblationSettings, samples_ablation
from pipeline.reporting.collect import find_cells, per_prompt, uq_scores

PAPER4 = ["qwen3-4b", "gemma-3-4b-it", "gemma-3-12b-it", "qwen3-30b-a3b"]
BIG = "qwen2.5-72b-instruct"
MODELS = PAPER4 + [BIG]
LABELS = ["a", "b", "c", "d", "e"]
N_PROMPTS, M = 12, 4
EXPERIMENT = "synthetic"
METHODS = ["bayes", "beam", "greedy", "map", "sample_mbr"]
ESTIMATORS = ["msp", "semantic_entropy", "latent_entropy", "bayes_risk"]
DATASETS = {  # canonical dataset -> (configured name, latent metric)
    "maqa": ("maqa_bundled", "hamming"),
    "wmt19_fien": ("wmt19_fien_bundled", "cosine_distance"),
    "maqa_star": ("maqa_star_bundled", "kl"),
    "triviaqa": ("triviaqa_bundled", "exact_match_error"),
}


def _hamming(a, b) -> float:
    """Normalised Hamming of the quality artifact (|a ^ b| / |b|), written out here."""
    return len(set(a) ^ set(b)) / max(1, len(set(b)))


def _write_cell(root, model: str, canonical: str, rng) -> None:
    configured, metric = DATASETS[canonical]
    store = ArtifactStore(root / EXPERIMENT / model / configured)
    pids = [f"{canonical}-{i:03d}" for i in range(N_PROMPTS)]
    truth = {p: sorted(rng.choice(LABELS, size=2, replace=False)) for p in pids}
    store.write(
        "dataset",
        pd.DataFrame(
            {
                "prompt_id": pids,
                "dataset": configured,
                "question": "q",
                "answers": [[[t] for t in truth[p]] for p in pids],
                "probabilities": [[] for _ in pids],
                "reference_text": "",
            }
        ),
        key="k",
    )
    quality, latents = [], []
    if canonical == "maqa":  # real set latents: the ablation recomputes from them
        from pipeline.latent import get_space

        sets = get_space("sets")
        for p in pids:
            samples = [
                frozenset(rng.choice(LABELS, size=rng.integers(1, 4), replace=False))
                for _ in range(M)
            ]
            beam = frozenset(rng.choice(LABELS, size=rng.integers(1, 3), replace=False))
            for i, s in enumerate(samples):
                latents.append(
                    {
                        "prompt_id": p,
                        "source": "sample",
                        "sample_idx": i,
                        "latent": sets.to_json(s),
                        "parse_ok": True,
                    }
                )
            latents.append(
                {
                    "prompt_id": p,
                    "source": "beam",
                    "sample_idx": -1,
                    "latent": sets.to_json(beam),
                    "parse_ok": True,
                }
            )
            bayes = sets.bayes(samples).action
            for method, action in (("bayes", bayes), ("beam", beam)):
                quality.append(
                    {
                        "prompt_id": p,
                        "method": method,
                        "metric": "hamming",
                        "value": _hamming(action, truth[p]),
                        "higher_is_better": False,
                    }
                )
            for method in METHODS[2:]:
                quality.append(
                    {
                        "prompt_id": p,
                        "method": method,
                        "metric": "hamming",
                        "value": float(rng.uniform(0, 2)),
                        "higher_is_better": False,
                    }
                )
        store.write("latents", pd.DataFrame(latents).assign(read=lambda d: d["parse_ok"]), key="k")
        store.write(
            "decisions",
            pd.DataFrame(
                {"prompt_id": pids, "method": "bayes", "action": "[]", "risk": 0.0, "text": ""}
            ),
            key="k",
            config={"space": "sets"},
        )
    else:
        for p in pids:
            for method in METHODS:
                quality.append(
                    {
                        "prompt_id": p,
                        "method": method,
                        "metric": metric,
                        "value": float(rng.uniform(0, 1)),
                        "higher_is_better": False,
                    }
                )
    store.write("quality", pd.DataFrame(quality), key="k")
    unc = [
        {"prompt_id": p, "estimator": e, "value": float(rng.uniform(0, 3))}
        for p in pids
        for e in ESTIMATORS
    ]
    store.write("uncertainty", pd.DataFrame(unc), key="k")
    scores = []
    for target in ("bayes", "beam"):
        for e in ESTIMATORS:
            # R_Bayes is the best of every cell of the paper's LLMs and the worst of the 72B:
            # averaging the 72B in would move its rank away from 1.
            value = (0.9 if model != BIG else -0.9) if e == "bayes_risk" else rng.uniform(-0.5, 0.5)
            scores.append(
                {
                    "estimator": e,
                    "target": target,
                    "metric": metric,
                    "prr": value,
                    "prr_low": value - 0.1,
                    "prr_high": value + 0.1,
                    "auc": 0.5,
                    "auc_low": 0.4,
                    "auc_high": 0.6,
                    "n": N_PROMPTS,
                    "n_dropped": 0,
                }
            )
    store.write("uq_scores", pd.DataFrame(scores), key="k")


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("report_figures") / "outputs"
    rng = np.random.default_rng(12)
    for model in MODELS:
        for canonical in DATASETS:
            _write_cell(root, model, canonical, rng)
    cells = find_cells(root, EXPERIMENT)
    return {
        "root": root,
        "cells": cells,
        "quality": per_prompt(cells, "quality"),
        "uncertainty": per_prompt(cells, "uncertainty"),
        "scores": uq_scores(cells),
    }


def _titles(fig) -> list[str]:
    return [ax.get_title() for ax in fig.axes]


@pytest.mark.parametrize("name", list(figures.IMPROVEMENT_FIGURES))
def test_improvement_figures_have_one_panel_per_model(outputs, name, tmp_path):
    dataset, metric, _ = figures.IMPROVEMENT_FIGURES[name]
    table = figures.improvement_table(
        outputs["quality"], outputs["uncertainty"], dataset=dataset, metric=metric, per_model=True
    )
    fig = figures.draw_improvement_per_model(table, dataset, metric, "x")
    assert len(fig.axes) == len(MODELS)
    assert _titles(fig) == PAPER4 + [BIG]  # the paper's panel order, then the others
    for ax, model in zip(fig.axes, _titles(fig)):
        # each panel plots its own model's bins, one line per baseline
        own = table[table["model"] == model]
        assert len(ax.get_lines()) - 1 == own["baseline"].nunique()  # minus the zero line
        beam = own[own["baseline"] == "beam"]
        line = next(ln for ln in ax.get_lines() if ln.get_label() == "Beam")
        np.testing.assert_allclose(line.get_ydata(), beam["delta"])
    png = figures.fig_improvement_per_model(table, tmp_path, name)
    assert png.name == f"{name}.png" and png.stat().st_size > 1000
    assert (tmp_path / f"{name}.pdf").stat().st_size > 1000


def test_improvement_is_binned_and_signed_per_model(outputs):
    q, u = outputs["quality"], outputs["uncertainty"]
    table = figures.improvement_table(
        q, u, dataset="wmt19_fien", metric="cosine_distance", per_model=True
    )
    for model in MODELS:
        alone = figures.improvement_table(
            q[q["model"] == model],
            u[u["model"] == model],
            dataset="wmt19_fien",
            metric="cosine_distance",
        )
        own = table[table["model"] == model].drop(columns="model").reset_index(drop=True)
        pd.testing.assert_frame_equal(own, alone.reset_index(drop=True))
    # Delta = d(l*, l_beam) - d(l*, l_Bayes) over one model's prompts, computed here
    model = "qwen3-4b"
    w = q[(q["model"] == model) & (q["dataset"] == "wmt19_fien")].pivot_table(
        index="prompt_id", columns="method", values="value"
    )
    beam = table[(table["model"] == model) & (table["baseline"] == "beam")]
    assert (beam["n"] * beam["delta"]).sum() == pytest.approx((w["beam"] - w["bayes"]).sum())


def test_entropy_vs_risk_is_one_model_on_maqa_star(outputs, tmp_path):
    unc = outputs["uncertainty"]
    fig = figures.draw_entropy_vs_risk(unc)
    assert len(fig.axes) == 1
    ax = fig.axes[0]
    assert "gemma-3-12b-it" in ax.get_title() and "MAQA*" in ax.get_title()
    u = unc[(unc["model"] == "gemma-3-12b-it") & (unc["dataset"] == "maqa_star")]
    w = u.pivot_table(index="prompt_id", columns="estimator", values="value")
    expected = np.array(sorted(zip(w["latent_entropy"], w["bayes_risk"])))
    (points,) = ax.collections
    np.testing.assert_allclose(np.array(sorted(map(tuple, points.get_offsets()))), expected)
    # without the paper's model: the first of report_models that has outputs; or as configured
    others = unc[unc["model"] != "gemma-3-12b-it"]
    title = figures.draw_entropy_vs_risk(others, report_models=["nope", BIG]).axes[0].get_title()
    assert title.startswith(BIG)
    assert (
        figures.draw_entropy_vs_risk(unc, model="qwen3-4b")
        .axes[0]
        .get_title()
        .startswith("qwen3-4b")
    )
    assert figures.fig_entropy_vs_risk(unc, tmp_path).name == "latent_entropy_vs_risk.png"


def test_prr_rank_averages_the_paper_llms_without_the_72b(outputs):
    scores, paper_rank = (
        outputs["scores"],
        pd.read_csv(
            figures.Path(__file__).resolve().parents[2] / "results" / "paper" / "prr_rank.csv"
        ),
    )
    ranks = figures.prr_ranks(scores, models=figures.rank_models(set(scores["model"]))[0])
    bayes_risk = ranks[ranks["estimator"] == "bayes_risk"]
    assert len(bayes_risk) == len(DATASETS) and (bayes_risk["mean_rank"] == 1.0).all()
    with_72b = figures.prr_ranks(scores)  # what pooling every model would give
    assert (with_72b[with_72b["estimator"] == "bayes_risk"]["mean_rank"] > 1.0).all()
    fig = figures.draw_prr_rank(scores, paper_rank)
    ours = fig.axes[0]
    assert BIG not in ours.get_title() and all(m in ours.get_title() for m in PAPER4)
    bars = next(c for c in ours.containers if c.get_label() == "R_Bayes (ours)")
    assert [b.get_height() for b in bars] == [1.0] * len(DATASETS)
    # the paper's side is recomputed from its Table 3, and says so
    assert fig.axes[1].get_title().startswith("Paper, derived from Table 3 (4 LLMs)")


def test_maqa_prr_draws_the_paper_llms_without_the_72b(outputs):
    from pipeline.reporting.paper import PRR_DATASET, PRR_METRIC

    # the synthetic MAQA cells score Hamming: relabel them as the figure's metric (F1)
    scores = outputs["scores"]
    scores = scores[scores["dataset"] == PRR_DATASET].assign(metric=PRR_METRIC)
    paper_uq = pd.read_csv(
        figures.Path(__file__).resolve().parents[2] / "results" / "paper" / "uq.csv"
    )
    assert BIG in set(scores["model"])
    ax = figures.draw_maqa_prr(scores, paper_uq).axes[0]
    bars = {c.get_label(): c for c in ax.containers if c.get_label().startswith(("ours", "paper"))}
    assert list(bars) == [f"ours: {m}" for m in figures.model_order(PAPER4)] + [
        "paper: mean of 4 LLMs"
    ]
    # the R_Bayes bar of each is that model's PRR (0.9 for the paper's LLMs; the 72B's -0.9
    # is drawn nowhere)
    heights = [b.get_height() for label, c in bars.items() if label.startswith("ours") for b in c]
    assert -0.9 not in [round(h, 6) for h in heights] and 0.9 in [round(h, 6) for h in heights]
    # without the paper's LLMs: the models present but the 72B (as Fig. 2a)
    small = scores[scores["model"] == "qwen3-4b"].assign(model="smollm2-135m")
    only = pd.concat([small, scores[scores["model"] == BIG]], ignore_index=True)
    ax = figures.draw_maqa_prr(only, paper_uq).axes[0]
    assert [c.get_label() for c in ax.containers if c.get_label().startswith("ours")] == [
        "ours: smollm2-135m"
    ]


def test_prr_rank_without_the_paper_llms_uses_the_models_present(outputs):
    scores = outputs["scores"]
    small = scores[scores["model"] == "qwen3-4b"].assign(model="smollm2-135m")
    only = pd.concat([small, scores[scores["model"] == BIG]], ignore_index=True)
    chosen, note = figures.rank_models(set(only["model"]))
    assert chosen == ["smollm2-135m"] and "none of the paper's LLMs" in note
    paper_rank = pd.DataFrame(columns=["level", "dataset", "estimator", "mean_rank"])
    title = figures.draw_prr_rank(only, paper_rank).axes[0].get_title()
    assert "smollm2-135m" in title and BIG not in title and "none of the paper's" in title
    # a model list of one's own
    assert figures.rank_models(set(scores["model"]), ["qwen3-4b"])[0] == ["qwen3-4b"]


def test_samples_ablation_plots_the_risk_of_the_beam_response(outputs):
    maqa = [c for c in outputs["cells"] if c.canonical == "maqa"]
    latents, dataset = per_prompt(maqa, "latents"), per_prompt(maqa, "dataset")
    quality = per_prompt(maqa, "quality")
    table = samples_ablation(
        latents, dataset, quality, maqa[0].space, AblationSettings(ms=(2, M), repeats=2)
    )
    fig = figures.draw_samples_ablation(table)
    ax = fig.axes[2]
    assert "R(l_Beam)" in ax.get_title()
    differs = 0
    for model in MODELS:
        lat = latents[latents["model"] == model]
        q = quality[(quality["model"] == model) & (quality["metric"] == "hamming")]
        risk_beam, risk_bayes, beam_q = [], [], []
        for pid, g in lat.groupby("prompt_id"):
            samples = [set(json.loads(s)) for s in g[g["source"] == "sample"]["latent"]]
            beam = set(json.loads(g[g["source"] == "beam"]["latent"].iloc[0]))
            # R(l_Beam) = (1/M) sum_i |l_Beam ^ l_i|; R(l_Bayes) = sum_y min(p_y, 1 - p_y)
            risk_beam.append(np.mean([len(beam ^ s) for s in samples]))
            p = [np.mean([y in s for s in samples]) for y in set().union(*samples)]
            risk_bayes.append(sum(min(v, 1 - v) for v in p))
            beam_q.append(q[(q["prompt_id"] == pid) & (q["method"] == "beam")]["value"].iloc[0])
        expected = prr(np.array(risk_beam), -np.array(beam_q), max_rejection=0.5)
        container = next(c for c in ax.containers if c.get_label() == model)
        x, y = container.lines[0].get_xdata(), container.lines[0].get_ydata()
        assert list(x) == [2, M]
        assert y[-1] == pytest.approx(expected)  # M = all samples: no subsampling noise
        differs += abs(prr(np.array(risk_bayes), -np.array(beam_q)) - expected) > 1e-6
    assert differs  # the R(l_Bayes) the figure plotted before would fail the check above


def test_report_writes_every_figure_per_model(outputs, tmp_path):
    cfg = OmegaConf.structured(Config)
    cfg.output_root, cfg.experiment = str(outputs["root"]), EXPERIMENT
    cfg.results_dir, cfg.wandb.enabled = str(tmp_path / "results"), False
    out = build_report(resolve_report(cfg))
    for name in FIGURE_NAMES:
        for ext in ("png", "pdf"):
            path = tmp_path / "results" / "figures" / f"{name}.{ext}"
            assert path.stat().st_size > 1000 and str(path) in out["files"]
    for name in figures.IMPROVEMENT_FIGURES:
        # the paper's four LLMs, as in the paper's Figs. 7-9: the 72B is reported apart
        table = pd.read_csv(tmp_path / "results" / "tables" / f"{name}.csv")
        assert figures.model_order(table["model"]) == figures.model_order(PAPER4)
    # Fig. 3 pools the same four, not the 72B
    paper4 = {k: outputs[k][outputs[k]["model"].isin(PAPER4)] for k in ("quality", "uncertainty")}
    pooled = pd.read_csv(tmp_path / "results" / "tables" / "hamming_improvement.csv")
    expected = figures.improvement_table(paper4["quality"], paper4["uncertainty"])
    np.testing.assert_allclose(pooled["delta"], expected["delta"])
    assert (
        pooled["n"].sum()
        == expected["n"].sum()
        == N_PROMPTS * len(PAPER4) * (pooled["baseline"].nunique())
    )
    assert not (tmp_path / "results" / "figures" / "latent_entropy_vs_risk_pooled.png").exists()
    assert figure_options(resolve_report(cfg))["rank_models"] == PAPER4


def test_pooled_entropy_vs_risk_is_an_option(outputs, tmp_path):
    cfg = OmegaConf.structured(Config)
    assert figure_options(resolve_report(cfg))["entropy_pooled"] is False
    cfg.report_figures.entropy_pooled = True
    assert figure_options(resolve_report(cfg))["entropy_pooled"] is True
    png = figures.fig_entropy_vs_risk_pooled(outputs["uncertainty"], tmp_path)
    assert png.name == "latent_entropy_vs_risk_pooled.png" and png.stat().st_size > 1000


def test_every_figure_survives_empty_inputs(tmp_path):
    cfg = OmegaConf.structured(Config)
    cfg.output_root, cfg.results_dir = str(tmp_path / "none"), str(tmp_path / "results")
    cfg.wandb.enabled = False
    build_report(resolve_report(cfg))
    for name in FIGURE_NAMES:
        assert (tmp_path / "results" / "figures" / f"{name}.png").stat().st_size > 1000
    empty = pd.DataFrame()
    fig = figures.draw_improvement_per_model(
        figures.improvement_table(empty, empty, per_model=True), "maqa", "hamming", "x"
    )
    assert len(fig.axes) == 1


def test_a_killed_report_is_redone_not_vouched_for(outputs, tmp_path, monkeypatch):
    """Killed while writing its tables, a report left the previous manifest behind, so the rerun
    said "up to date" over half-rewritten files; the manifest now goes first and comes last."""
    from pipeline.reporting import tables as tables_module

    cfg = OmegaConf.structured(Config)
    cfg.output_root, cfg.experiment = str(outputs["root"]), EXPERIMENT
    cfg.results_dir, cfg.wandb.enabled = str(tmp_path / "results"), False
    build_report(resolve_report(cfg))
    first = (tmp_path / "results" / "tables" / "uq_prr_bayes.md").read_text()
    cfg.evaluation.max_rejection = 0.4  # another report: its key differs

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("killed while writing tables")

    monkeypatch.setattr(tables_module, "write_table", killed)
    with pytest.raises(KeyboardInterrupt):
        build_report(resolve_report(cfg))
    monkeypatch.undo()
    cfg.evaluation.max_rejection = 0.5  # back to the first report's settings
    assert not (tmp_path / "results" / ".report.manifest.json").exists()
    assert build_report(resolve_report(cfg))["skipped"] is False  # redone, not "up to date"
    assert (tmp_path / "results" / "tables" / "uq_prr_bayes.md").read_text() == first
    assert build_report(resolve_report(cfg))["skipped"] is True


def test_a_report_model_without_outputs_is_named_not_dropped(outputs, tmp_path):
    from pipeline.runtime.errors import ConfigError

    cfg = OmegaConf.structured(Config)
    cfg.output_root, cfg.experiment = str(outputs["root"]), EXPERIMENT
    cfg.results_dir, cfg.wandb.enabled = str(tmp_path / "results"), False
    cfg.report_models = ["nobody", PAPER4[0]]
    with pytest.raises(ConfigError, match=r"report_models has \['nobody'\] with no outputs"):
        build_report(resolve_report(cfg))
