"""The paper's figures rebuilt from artifacts (PNG + PDF), the paper's numbers beside ours where
the paper gives them as numbers (the PRR-rank and MAQA PRR panels)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from pipeline.reporting.tables import ESTIMATOR_LABEL, ESTIMATORS, METHOD_LABEL

TASK_ORDER = ["maqa", "triviaqa", "wmt19_fien", "cnn_dm", "maqa_star"]
TASK_LABEL = {"maqa": "MAQA\n{0,1}^K", "triviaqa": "TriviaQA\n[K]", "wmt19_fien": "WMT19\nR^d",
              "cnn_dm": "CNN/DM\nG", "maqa_star": "MAQA*\nSimplex"}
BASELINES = ["beam", "self_consistency", "contrastive", "ar", "greedy", "map", "sample_mbr"]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, out_dir: Path, name: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    png = out_dir / f"{name}.png"
    fig.savefig(png, dpi=130, bbox_inches="tight")
    fig.savefig(out_dir / f"{name}.pdf", bbox_inches="tight")
    _plt().close(fig)
    return png


def prr_ranks(scores: pd.DataFrame, target: str = "bayes") -> pd.DataFrame:
    """Average PRR rank (1 = best) of each estimator per task: rank within each (model, dataset,
    metric) cell, then average over metrics and models (the paper's Fig. 2a)."""
    s = scores[(scores["target"] == target)].dropna(subset=["prr"])
    if s.empty:
        return pd.DataFrame(columns=["dataset", "estimator", "mean_rank"])
    s = s.assign(rank=s.groupby(["model", "dataset", "metric"])["prr"]
                 .rank(ascending=False, method="average"))
    return s.groupby(["dataset", "estimator"])["rank"].mean().rename("mean_rank").reset_index()


def _grouped_bars(ax, table: pd.DataFrame, groups: list[str], group_label: dict, title: str,
                  ylabel: str) -> None:
    est = [e for e in ESTIMATORS if e in set(table["estimator"])]
    width = 0.8 / max(1, len(est))
    x = np.arange(len(groups))
    for i, e in enumerate(est):
        vals = [table[(table["dataset"] == g) & (table["estimator"] == e)]["value"].mean()
                for g in groups]
        ax.bar(x + i * width - 0.4 + width / 2, vals, width, label=ESTIMATOR_LABEL.get(e, e),
               color="black" if e == "bayes_risk" else None)
    ax.set_xticks(x, [group_label.get(g, g) for g in groups], fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(ylabel)


def fig_prr_rank(scores: pd.DataFrame, paper_rank: pd.DataFrame, out_dir: Path) -> Path:
    plt = _plt()
    ours = prr_ranks(scores).rename(columns={"mean_rank": "value"})
    paper = paper_rank[paper_rank["level"] == "task"].rename(columns={"mean_rank": "value"})
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8), sharey=True)
    groups_ours = [t for t in TASK_ORDER if t in set(ours["dataset"])]
    _grouped_bars(axes[0], ours, groups_ours, TASK_LABEL,
                  f"Ours ({', '.join(sorted(set(scores['model'])))})" if len(scores) else "Ours",
                  "average PRR rank (lower is better)")
    _grouped_bars(axes[1], paper, TASK_ORDER, TASK_LABEL, "Paper (4 LLMs)", "")
    axes[1].legend(fontsize=7, ncol=2, loc="upper right")
    return _save(fig, out_dir, "uq_prr_rank")


def fig_maqa_prr(scores: pd.DataFrame, paper_uq: pd.DataFrame, out_dir: Path) -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ours = scores[(scores["dataset"] == "maqa") & (scores["target"] == "bayes")
                  & (scores["metric"] == "f1")] if len(scores) else scores
    paper = paper_uq[(paper_uq["table"] == "uq_prr_bayes") & (paper_uq["dataset"] == "maqa")
                     & (paper_uq["metric"] == "f1")]
    est = [e for e in ESTIMATORS if e in set(paper["estimator"]) | set(ours.get("estimator", []))]
    x = np.arange(len(est))
    models = sorted(set(ours["model"])) if len(ours) else []
    width = 0.8 / (len(models) + 1)
    for i, m in enumerate(models):
        o = ours[ours["model"] == m].set_index("estimator")
        vals = [o["prr"].get(e, np.nan) for e in est]
        err = np.array([[vals[j] - o["prr_low"].get(e, np.nan), o["prr_high"].get(e, np.nan)
                         - vals[j]] for j, e in enumerate(est)]).T
        ax.bar(x + i * width - 0.4 + width / 2, vals, width, yerr=np.abs(err), capsize=2,
               label=f"ours: {m}")
    pm = paper.groupby("estimator")["value"].mean()
    ax.bar(x + len(models) * width - 0.4 + width / 2, [pm.get(e, np.nan) for e in est], width,
           color="lightgrey", edgecolor="black", label="paper: mean of 4 LLMs")
    ax.set_xticks(x, [ESTIMATOR_LABEL.get(e, e) for e in est], rotation=30, fontsize=8)
    ax.axhline(0, color="black", lw=0.5)
    ax.set_ylabel("PRR (F1 of the Bayes response)")
    ax.set_title("PRR per UQ method on MAQA (sets)", fontsize=10)
    ax.legend(fontsize=7)
    return _save(fig, out_dir, "uq_maqa_prr")


def fig_entropy_vs_risk(uncertainty: pd.DataFrame, out_dir: Path) -> Path:
    plt = _plt()
    fig, axes = plt.subplots(1, 5, figsize=(16, 3.2))
    for ax, ds in zip(axes, TASK_ORDER):
        u = uncertainty[uncertainty["dataset"] == ds] if len(uncertainty) else uncertainty
        ax.set_title(TASK_LABEL[ds].replace("\n", " "), fontsize=9)
        if len(u) == 0:
            ax.text(0.5, 0.5, "no data", ha="center", transform=ax.transAxes)
            continue
        w = u.pivot_table(index=["model", "prompt_id"], columns="estimator", values="value")
        if {"latent_entropy", "bayes_risk"} <= set(w.columns):
            ax.scatter(w["latent_entropy"], w["bayes_risk"], s=12, alpha=0.7)
        ax.set_xlabel("latent entropy H(p(l|x))")
    axes[0].set_ylabel("Bayes risk R_Bayes")
    fig.suptitle("Latent entropy vs minimum Bayes risk (paper Fig. 2c: MAQA* simplex)", fontsize=10)
    return _save(fig, out_dir, "latent_entropy_vs_risk")


def improvement_table(quality: pd.DataFrame, uncertainty: pd.DataFrame, dataset: str = "maqa",
                      metric: str = "hamming", bins: int = 4) -> pd.DataFrame:
    """Delta = d(l*, l_baseline) - d(l*, l_Bayes) averaged per latent-entropy bin (paper Fig. 3)."""
    q = quality[(quality["dataset"] == dataset) & (quality["metric"] == metric)]
    if q.empty:
        return pd.DataFrame(columns=["baseline", "entropy_bin", "entropy_mid", "delta", "n"])
    w = q.pivot_table(index=["model", "prompt_id"], columns="method", values="value")
    ent = uncertainty[(uncertainty["dataset"] == dataset)
                      & (uncertainty["estimator"] == "latent_entropy")]
    ent = ent.set_index(["model", "prompt_id"])["value"]
    w = w.join(ent.rename("entropy"), how="inner")
    if w.empty or "bayes" not in w:
        return pd.DataFrame(columns=["baseline", "entropy_bin", "entropy_mid", "delta", "n"])
    edges = np.unique(np.quantile(w["entropy"], np.linspace(0, 1, bins + 1)))
    w["bin"] = np.clip(np.searchsorted(edges, w["entropy"], side="right") - 1, 0,
                       max(0, len(edges) - 2))
    rows = []
    for b in BASELINES:
        if b not in w:
            continue
        for k, g in w.groupby("bin"):
            d = (g[b] - g["bayes"]).dropna()
            rows.append({"baseline": b, "entropy_bin": int(k),
                         "entropy_mid": float(g["entropy"].mean()), "delta": float(d.mean()),
                         "n": len(d)})
    return pd.DataFrame(rows)


def fig_improvement(table: pd.DataFrame, out_dir: Path) -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for b, g in table.groupby("baseline", sort=False):
        ax.plot(g["entropy_mid"], g["delta"], marker="o", label=METHOD_LABEL.get(b, b))
    ax.axhline(0, color="black", lw=0.5)
    ax.set_xlabel("latent entropy H(p(l|x)) (bin mean)")
    ax.set_ylabel("Hamming(baseline) - Hamming(Bayes)")
    ax.set_title("Improvement of the Bayes response over each baseline (MAQA sets)", fontsize=10)
    if len(table):
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "no MAQA data", ha="center", transform=ax.transAxes)
    return _save(fig, out_dir, "hamming_improvement")


def fig_samples_ablation(ablation: pd.DataFrame, out_dir: Path) -> Path:
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
    panels = [("hamming", "Hamming of l_Bayes (lower is better)"),
              ("prr_bayes", "PRR of R_Bayes, Bayes target"),
              ("prr_beam", "PRR of R_Bayes, beam target")]
    for ax, (col, title) in zip(axes, panels):
        for model, g in ablation.groupby("model"):
            ax.errorbar(g["m"], g[col], yerr=g[f"{col}_sd"], marker="o", capsize=2, label=model)
        ax.set_xlabel("number of samples M")
        ax.set_title(title, fontsize=9)
    if len(ablation):
        axes[0].legend(fontsize=7)
    else:
        axes[0].text(0.5, 0.5, "no MAQA data", ha="center", transform=axes[0].transAxes)
    fig.suptitle("MAQA sets: quality and uncertainty vs M (subsampled stored samples)",
                 fontsize=10)
    return _save(fig, out_dir, "samples_ablation")
