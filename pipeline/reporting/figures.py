"""The paper's figures rebuilt from artifacts (PNG + PDF), the paper's numbers beside ours where
the paper gives them as numbers (the PRR-rank and MAQA PRR panels).

Every figure has a `draw_*` function that returns the matplotlib Figure (what the tests inspect)
and a `fig_*` function that draws, saves `<name>.png` and `<name>.pdf` and returns the PNG path.
Which models a figure shows follows the paper:

- Fig. 2a (`uq_prr_rank`): "Average PRR rank of UQ methods over four LLMs on each task" -> the
  ranks of ours are averaged over the paper's four LLMs (`PAPER_LLMS`, the Qwen2.5-72B of
  Tables 7-8 is not one of them); when none of them has outputs, over the models present (the
  72B left out unless it is the only one), and the panel title says so. The paper's panel beside
  it is derived from Table 3 (the figure's own data is not published: results/paper/README.md),
  and its title says so.
- Fig. 2b (`uq_maqa_prr`): one bar per model of the same models as Fig. 2a (the paper's four
  LLMs; the 72B is not one of them, it has its own table, Table 8), the mean of the paper's four
  LLMs beside.
- Fig. 2c (`latent_entropy_vs_risk`): one model (the paper's figure file is
  `latent_entropy_vs_risk_gemma-3-12b-it.pgf`) on MAQA with the simplex latent (MAQA*).
- Figs. 7-9 (`*_improvement_*`): "Improvement of l_bayes across increasing latent entropy" on
  MAQA, WMT19 and MAQA (Simplex), one panel per LLM.
- Figs. 4-6 (`samples_ablation`): one line per model.

Figure numbers are those of the paper's figure environments in order (pipeline.reporting.paper).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from pipeline.components.methods import METHODS, OURS, table_methods
from pipeline.reporting.paper import (
    ABLATION_TITLE,
    ENTROPY_DATASET,
    IMPROVEMENT_DATASET,
    IMPROVEMENT_EMPTY,
    IMPROVEMENT_FIGURES,
    IMPROVEMENT_METRIC,
    IMPROVEMENT_TITLE,
    IMPROVEMENT_YLABEL,
    PAPER_72B,
    PAPER_ENTROPY_MODEL,
    PAPER_LLMS,
    PRR_DATASET,
    PRR_FIGURE,
    PRR_METRIC,
    PRR_PAPER_TABLE,
    PRR_TITLE,
    PRR_YLABEL,
    RANK_PAPER_TITLE,
    TASK_LABEL,
    TASK_ORDER,
)
from pipeline.reporting.tables import (
    ESTIMATOR_LABEL,
    ESTIMATORS,
    METHOD_LABEL,
    lower_is_better,
    metric_label,
)
from pipeline.uncertainty.estimators import (
    entropy_estimators,
    extra_estimators,
    risk_estimator,
    shown_for,
    table_estimators,
)

# The paper's datasets, labels, LLMs and what each figure shows: pipeline.reporting.paper.
# every method but ours and the task-declared ones (pipeline.components.methods), in the tables' order
BASELINES = [m for m in table_methods() if m != OURS and METHODS[m].kind != "task"]
RISK = risk_estimator(OURS)  # the Bayes risk
ENTROPY = entropy_estimators()[0]  # the latent entropy (Fig. 2c's x axis)
IMPROVEMENT_COLUMNS = ["baseline", "entropy_bin", "entropy_mid", "delta", "n"]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, out_dir: Path, name: str) -> Path:
    """The figure as png and pdf: drawn in memory, then each file written whole (a full disk
    is one DiskFullError, never a truncated pdf)."""
    import io

    from pipeline.artifacts.store import atomic_write_bytes

    out_dir.mkdir(parents=True, exist_ok=True)
    png = out_dir / f"{name}.png"
    try:
        for path, options in ((png, {"dpi": 130}), (out_dir / f"{name}.pdf", {})):
            buffer = io.BytesIO()
            fig.savefig(buffer, format=path.suffix[1:], bbox_inches="tight", **options)
            atomic_write_bytes(path, buffer.getvalue())
    finally:
        _plt().close(fig)
    return png


def model_order(models) -> list[str]:
    """The paper's LLMs in the order of its panels, then any other model by name."""
    rank = {m: i for i, m in enumerate(PAPER_LLMS)}
    return sorted(set(models), key=lambda m: (rank.get(m, len(rank)), m))


# --- Fig. 2a: average PRR rank per task -------------------------------------------------------
def rank_models(present, wanted=PAPER_LLMS) -> tuple[list[str], str]:
    """(the models whose ranks Fig. 2a averages, a note for the title). The paper's four LLMs
    that have outputs; none of them: every model present but the 72B (the paper reports it
    apart, Tables 7-8), or the 72B alone when it is all there is."""
    present = model_order(present)
    chosen = [m for m in model_order(wanted) if m in present]
    if chosen:
        missing = [m for m in wanted if m not in present]
        note = f"{len(chosen)} LLM(s): {', '.join(chosen)}"
        return chosen, note + (f" (no outputs: {', '.join(missing)})" if missing else "")
    chosen = [m for m in present if m != PAPER_72B] or present
    if not chosen:
        return [], "no data"
    return chosen, (f"{', '.join(chosen)} (none of the paper's LLMs ran)")


def prr_ranks(
    scores: pd.DataFrame, target: str = OURS, models: list[str] | None = None
) -> pd.DataFrame:
    """Average PRR rank (1 = best) of each estimator per task: rank within each (model, dataset,
    metric) cell, then average over metrics and models (the paper's Fig. 2a). `models`: the
    models to average over (None: every model in `scores`)."""
    if scores.empty:
        return pd.DataFrame(columns=["dataset", "estimator", "mean_rank"])
    # the paper's competitors only: our extras (the F-beta risk) would shift every rank
    s = scores[(scores["target"] == target) & ~scores["estimator"].isin(extra_estimators())]
    s = s.dropna(subset=["prr"])
    if models is not None:
        s = s[s["model"].isin(list(models))]
    if s.empty:
        return pd.DataFrame(columns=["dataset", "estimator", "mean_rank"])
    s = s.assign(
        rank=s.groupby(["model", "dataset", "metric"])["prr"].rank(
            ascending=False, method="average"
        )
    )
    return s.groupby(["dataset", "estimator"])["rank"].mean().rename("mean_rank").reset_index()


def estimator_color(name: str):
    """One colour per estimator in every figure (its place in the paper's table order; the Bayes
    risk black), whatever else a panel shows."""
    if name == RISK:
        return "black"
    order = [e for e in table_estimators() if e != RISK]
    i = order.index(name) if name in order else len(order) + sum(map(ord, name))
    return _plt().get_cmap("tab10")(i % 10)


def _grouped_bars(
    ax, table: pd.DataFrame, groups: list[str], group_label: dict, title: str, ylabel: str
) -> None:
    est = [e for e in ESTIMATORS if e in set(table["estimator"])]
    width = 0.8 / max(1, len(est))
    x = np.arange(len(groups))
    for i, e in enumerate(est):
        vals = [
            table[(table["dataset"] == g) & (table["estimator"] == e)]["value"].mean()
            for g in groups
        ]
        ax.bar(
            x + i * width - 0.4 + width / 2,
            vals,
            width,
            label=ESTIMATOR_LABEL.get(e, e),
            color=estimator_color(e),
        )
    ax.set_xticks(x, [group_label.get(g, g) for g in groups], fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.set_ylabel(ylabel)


def draw_prr_rank(scores: pd.DataFrame, paper_rank: pd.DataFrame, models=PAPER_LLMS):
    plt = _plt()
    present = set(scores["model"]) if len(scores) else set()
    chosen, note = rank_models(present, models)
    ours = prr_ranks(scores, models=chosen).rename(columns={"mean_rank": "value"})
    paper = paper_rank[paper_rank["level"] == "task"].rename(columns={"mean_rank": "value"})
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8), sharey=True)
    groups_ours = [t for t in TASK_ORDER if t in set(ours["dataset"])]
    _grouped_bars(
        axes[0],
        ours,
        groups_ours,
        TASK_LABEL,
        f"Ours, average over {note}",
        "average PRR rank (lower is better)",
    )
    if ours.empty:
        axes[0].text(0.5, 0.5, "no data", ha="center", transform=axes[0].transAxes)
    _grouped_bars(axes[1], paper, TASK_ORDER, TASK_LABEL, RANK_PAPER_TITLE, "")
    if axes[1].get_legend_handles_labels()[0]:  # under the panels, clear of the bars
        axes[1].legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    return fig


def fig_prr_rank(
    scores: pd.DataFrame, paper_rank: pd.DataFrame, out_dir: Path, models=PAPER_LLMS
) -> Path:
    return _save(draw_prr_rank(scores, paper_rank, models), out_dir, "uq_prr_rank")


# --- Fig. 2b: PRR per UQ method on MAQA -------------------------------------------------------
def draw_maqa_prr(scores: pd.DataFrame, paper_uq: pd.DataFrame, models=PAPER_LLMS):
    """One bar per model and estimator, over the models Fig. 2a averages (`rank_models`: the
    paper's four LLMs that have outputs; the 72B, which the paper reports apart, is not drawn),
    and the mean of the paper's four LLMs beside."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ours = (
        scores[
            (scores["dataset"] == PRR_DATASET)
            & (scores["target"] == OURS)
            & (scores["metric"] == PRR_METRIC)
            & scores["estimator"].map(lambda e: shown_for(e, OURS)).astype(bool)
        ]
        if len(scores)
        else scores
    )
    models = rank_models(set(ours["model"]), models)[0] if len(ours) else []
    ours = ours[ours["model"].isin(models)] if len(ours) else ours
    paper = paper_uq[
        (paper_uq["table"] == PRR_PAPER_TABLE)
        & (paper_uq["dataset"] == PRR_DATASET)
        & (paper_uq["metric"] == PRR_METRIC)
    ]
    est = [e for e in ESTIMATORS if e in set(paper["estimator"]) | set(ours.get("estimator", []))]
    x = np.arange(len(est))
    width = 0.8 / (len(models) + 1)
    for i, m in enumerate(models):
        o = ours[ours["model"] == m].set_index("estimator")
        vals = [o["prr"].get(e, np.nan) for e in est]
        err = np.array(
            [
                [vals[j] - o["prr_low"].get(e, np.nan), o["prr_high"].get(e, np.nan) - vals[j]]
                for j, e in enumerate(est)
            ]
        ).T
        ax.bar(
            x + i * width - 0.4 + width / 2,
            vals,
            width,
            yerr=np.abs(err),
            capsize=2,
            label=f"ours: {m}",
        )
    pm = paper.groupby("estimator")["value"].mean()
    ax.bar(
        x + len(models) * width - 0.4 + width / 2,
        [pm.get(e, np.nan) for e in est],
        width,
        color="lightgrey",
        edgecolor="black",
        label="paper: mean of 4 LLMs",
    )
    ax.set_xticks(x, [ESTIMATOR_LABEL.get(e, e) for e in est], rotation=30, fontsize=8)
    ax.axhline(0, color="black", lw=0.5)
    ax.set_ylabel(PRR_YLABEL)
    ax.set_title(PRR_TITLE, fontsize=10)
    ax.legend(fontsize=7)
    return fig


def fig_maqa_prr(
    scores: pd.DataFrame, paper_uq: pd.DataFrame, out_dir: Path, models=PAPER_LLMS
) -> Path:
    return _save(draw_maqa_prr(scores, paper_uq, models), out_dir, PRR_FIGURE)


# --- Fig. 2c: latent entropy vs Bayes risk, one model on MAQA* --------------------------------
def entropy_model(present, configured: str = "", report_models=()) -> str | None:
    """The model of Fig. 2c: `configured` when set; else the paper's (gemma-3-12b-it) when it
    has outputs; else the first of `report_models` with outputs; else the first model present
    (paper order, then by name)."""
    if configured:
        return configured
    present = model_order(present)
    if PAPER_ENTROPY_MODEL in present:
        return PAPER_ENTROPY_MODEL
    for m in report_models or ():
        if m in present:
            return m
    return present[0] if present else None


def _entropy_risk(u: pd.DataFrame) -> pd.DataFrame:
    if u.empty:
        return pd.DataFrame(columns=[ENTROPY, RISK])
    w = u.pivot_table(index=["model", "prompt_id"], columns="estimator", values="value")
    if not {ENTROPY, RISK} <= set(w.columns):
        return pd.DataFrame(columns=[ENTROPY, RISK])
    return w[[ENTROPY, RISK]].dropna()


def draw_entropy_vs_risk(
    uncertainty: pd.DataFrame, model: str = "", dataset: str = ENTROPY_DATASET, report_models=()
):
    plt = _plt()
    u = uncertainty[uncertainty["dataset"] == dataset] if len(uncertainty) else uncertainty
    chosen = entropy_model(set(u["model"]) if len(u) else set(), model, report_models)
    u = u[u["model"] == chosen] if len(u) else u
    w = _entropy_risk(u)
    fig, ax = plt.subplots(figsize=(4.2, 3.4))
    if len(w):
        ax.scatter(w[ENTROPY], w[RISK], s=14, alpha=0.7)
    else:
        ax.text(0.5, 0.5, "no data", ha="center", transform=ax.transAxes)
    label = TASK_LABEL.get(dataset, dataset).replace("\n", " ")
    ax.set_title(f"{chosen or 'no model'}: {label}", fontsize=9)
    ax.set_xlabel("latent entropy H(p(l|x))")
    ax.set_ylabel("minimum Bayes risk R(l_Bayes)")
    return fig


def fig_entropy_vs_risk(
    uncertainty: pd.DataFrame,
    out_dir: Path,
    model: str = "",
    dataset: str = ENTROPY_DATASET,
    report_models=(),
) -> Path:
    fig = draw_entropy_vs_risk(uncertainty, model, dataset, report_models)
    return _save(fig, out_dir, "latent_entropy_vs_risk")


def fig_entropy_vs_risk_pooled(uncertainty: pd.DataFrame, out_dir: Path) -> Path:
    """Optional variant (not in the paper): every model, one panel per task."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(TASK_ORDER), figsize=(16, 3.2))
    for ax, ds in zip(axes, TASK_ORDER):
        u = uncertainty[uncertainty["dataset"] == ds] if len(uncertainty) else uncertainty
        ax.set_title(TASK_LABEL[ds].replace("\n", " "), fontsize=9)
        w = _entropy_risk(u)
        if len(w) == 0:
            ax.text(0.5, 0.5, "no data", ha="center", transform=ax.transAxes)
            continue
        for m, g in w.groupby(level="model"):
            ax.scatter(g[ENTROPY], g[RISK], s=12, alpha=0.7, label=m)
        ax.set_xlabel("latent entropy H(p(l|x))")
    axes[0].set_ylabel("Bayes risk R_Bayes")
    if any(ax.get_legend_handles_labels()[0] for ax in axes):
        fig.legend(
            *next(
                ax.get_legend_handles_labels() for ax in axes if ax.get_legend_handles_labels()[0]
            ),
            fontsize=7,
            loc="upper right",
        )
    fig.suptitle(
        "Latent entropy vs minimum Bayes risk, every model and task (pooled variant)", fontsize=10
    )
    return _save(fig, out_dir, "latent_entropy_vs_risk_pooled")


# --- Fig. 3 and Figs. 7-9: improvement of l_Bayes across latent entropy -----------------------
def _entropy_bins(entropy: pd.Series, bins: int) -> np.ndarray:
    edges = np.unique(np.quantile(entropy, np.linspace(0, 1, bins + 1)))
    return np.clip(np.searchsorted(edges, entropy, side="right") - 1, 0, max(0, len(edges) - 2))


def _improvement_rows(w: pd.DataFrame, sign: float, bins: int) -> list[dict]:
    w = w.assign(bin=_entropy_bins(w["entropy"], bins))
    rows = []
    for b in BASELINES:
        if b not in w:
            continue
        for k, g in w.groupby("bin"):
            d = (sign * (g[b] - g[OURS])).dropna()
            rows.append(
                {
                    "baseline": b,
                    "entropy_bin": int(k),
                    "entropy_mid": float(g["entropy"].mean()),
                    "delta": float(d.mean()) if len(d) else np.nan,
                    "n": len(d),
                }
            )
    return rows


def improvement_table(
    quality: pd.DataFrame,
    uncertainty: pd.DataFrame,
    dataset: str = IMPROVEMENT_DATASET,
    metric: str = IMPROVEMENT_METRIC,
    bins: int = 4,
    per_model: bool = False,
) -> pd.DataFrame:
    """Delta = d(l*, l_baseline) - d(l*, l_Bayes) averaged per latent-entropy bin (paper Fig. 3;
    positive: l_Bayes is better). For a metric where higher is better (F1, COMET) the sign is
    flipped so that positive still means better. Bins are quantiles of the latent entropy:
    pooled over models (`per_model=False`, Fig. 3) or per model (`per_model=True`, Figs. 7-9,
    with a leading `model` column)."""
    columns = (["model"] if per_model else []) + IMPROVEMENT_COLUMNS
    if quality.empty or uncertainty.empty:
        return pd.DataFrame(columns=columns)
    q = quality[(quality["dataset"] == dataset) & (quality["metric"] == metric)]
    if q.empty:
        return pd.DataFrame(columns=columns)
    w = q.pivot_table(index=["model", "prompt_id"], columns="method", values="value")
    ent = uncertainty[(uncertainty["dataset"] == dataset) & (uncertainty["estimator"] == ENTROPY)]
    ent = ent.set_index(["model", "prompt_id"])["value"]
    w = w.join(ent.rename("entropy"), how="inner").dropna(subset=["entropy"])
    if w.empty or OURS not in w:
        return pd.DataFrame(columns=columns)
    sign = 1.0 if lower_is_better(metric) else -1.0
    if not per_model:
        return pd.DataFrame(_improvement_rows(w, sign, bins), columns=columns)
    rows = []
    for model in model_order(w.index.get_level_values("model")):
        rows += [
            {"model": model, **r} for r in _improvement_rows(w.xs(model, level="model"), sign, bins)
        ]
    return pd.DataFrame(rows, columns=columns)


def _improvement_lines(ax, table: pd.DataFrame) -> None:
    for b, g in table.groupby("baseline", sort=False):
        ax.plot(g["entropy_mid"], g["delta"], marker="o", label=METHOD_LABEL.get(b, b))
    ax.axhline(0, color="black", lw=0.5)
    _bin_counts(ax, table)


def bin_count_labels(table: pd.DataFrame) -> list[tuple[float, str]]:
    """(x, "n=k") per entropy bin: the prompts each bin's mean difference averages ("n=a-b"
    when baselines differ, a baseline without a scored decision on some prompts)."""
    out = []
    for _, g in table.groupby("entropy_bin", sort=True):
        lo, hi = int(g["n"].min()), int(g["n"].max())
        out.append((float(g["entropy_mid"].mean()), f"n={lo}" if lo == hi else f"n={lo}-{hi}"))
    return out


def _bin_counts(ax, table: pd.DataFrame) -> None:
    """Each bin's n as a tick label on a top axis, above the bin's x position."""
    labels = bin_count_labels(table) if len(table) else []
    if labels:
        top = ax.secondary_xaxis("top")
        top.set_xticks([x for x, _ in labels], [t for _, t in labels])
        top.tick_params(labelsize=6, colors="0.35")


def fig_improvement(table: pd.DataFrame, out_dir: Path) -> Path:
    """Fig. 3 (MAQA, Hamming), pooled over the models of the report."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    _improvement_lines(ax, table)
    ax.set_xlabel("latent entropy H(p(l|x)) (bin mean)")
    ax.set_ylabel(IMPROVEMENT_YLABEL)
    ax.set_title(IMPROVEMENT_TITLE, fontsize=10)
    if len(table):
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, IMPROVEMENT_EMPTY, ha="center", transform=ax.transAxes)
    return _save(fig, out_dir, "hamming_improvement")


def draw_improvement_per_model(table: pd.DataFrame, dataset: str, metric: str, what: str):
    """Figs. 7-9: one panel per model (the paper's order), titled with the model's name."""
    plt = _plt()
    models = model_order(table["model"]) if len(table) else []
    n = max(1, len(models))
    fig, axes = plt.subplots(1, n, figsize=(3.6 * n, 3.2), squeeze=False, sharey=True)
    axes = axes[0]
    label = metric_label(metric)
    for ax, model in zip(axes, models):
        _improvement_lines(ax, table[table["model"] == model])
        ax.set_title(model, fontsize=9)
        ax.set_xlabel("latent entropy H(p(l|x))")
    if not models:
        axes[0].text(0.5, 0.5, f"no {dataset} data", ha="center", transform=axes[0].transAxes)
        axes[0].set_title("no model", fontsize=9)
    axes[0].set_ylabel(
        f"{label}(baseline) - {label}(Bayes)"
        if lower_is_better(metric)
        else f"{label}(Bayes) - {label}(baseline)"
    )
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        axes[-1].legend(handles, labels, fontsize=7)
    fig.suptitle(f"Improvement of l_Bayes across increasing latent entropy on {what}", fontsize=10)
    return fig


def fig_improvement_per_model(table: pd.DataFrame, out_dir: Path, name: str) -> Path:
    dataset, metric, what = IMPROVEMENT_FIGURES[name]
    return _save(draw_improvement_per_model(table, dataset, metric, what), out_dir, name)


# --- Figs. 4-6: the number of samples M --------------------------------------------------------
# (column, title, y label): the paper's Figs. 4, 5 and 6 as three panels.
ABLATION_PANELS = [
    ("hamming", "Hamming of l_Bayes (lower is better)", "Hamming"),
    ("prr_bayes", "UQ: PRR of R(l_Bayes), quality of l_Bayes", "PRR"),
    ("prr_beam", "UQ: PRR of R(l_Beam), quality of l_Beam", "PRR"),
]


def draw_samples_ablation(ablation: pd.DataFrame):
    plt = _plt()
    # constrained layout: each panel's y label clear of its left neighbour's ticks
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.4), layout="constrained")
    for ax, (col, title, ylabel) in zip(axes, ABLATION_PANELS):
        if not len(ablation) or not ablation[col].notna().any():  # e.g. no beam decode
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        for model in model_order(ablation["model"]) if len(ablation) else []:
            g = ablation[ablation["model"] == model]
            line = ax.errorbar(
                g["m"], g[col], yerr=g[f"{col}_sd"], marker="o", capsize=2, label=model
            )
            if col == "hamming" and "hamming_beam" in g and g["hamming_beam"].notna().any():
                ax.axhline(
                    float(g["hamming_beam"].iloc[0]),
                    ls="--",
                    lw=1,
                    color=line.lines[0].get_color(),
                    label=f"{model}: beam search",
                )
        ax.set_xlabel("number of samples M")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=9)
    if len(ablation):
        axes[0].legend(fontsize=7)
    fig.suptitle(ABLATION_TITLE, fontsize=10)
    return fig


def fig_samples_ablation(ablation: pd.DataFrame, out_dir: Path) -> Path:
    return _save(draw_samples_ablation(ablation), out_dir, "samples_ablation")
