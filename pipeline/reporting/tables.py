"""The paper's tables rebuilt from artifacts, with the published numbers beside ours.

Each table is a wide frame indexed by (model, method|estimator, source) with columns
(dataset, metric) in the paper's order; `source` is "ours" or "paper", so where both exist for a
model the two rows stand next to each other. Rendered as Markdown, LaTeX (booktabs, best in bold,
runner-up underlined, per model and source) and CSV.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from pipeline.methods import BASELINE, F_BETA, OURS, extra_methods, method_label, table_methods
from pipeline.tasks import METRICS
from pipeline.uncertainty.estimators import estimator_label, extra_estimators, table_estimators

COLUMNS = [("maqa", "hamming"), ("maqa", "f1"), ("triviaqa", "exact_match_error"),
           ("wmt19_fien", "comet"), ("wmt19_fien", "cosine_distance"), ("cnn_dm", "hamming"),
           ("cnn_dm", "f1"), ("cnn_dm", "alignscore"), ("maqa_star", "kl")]
DATASET_LABEL = {"maqa": "MAQA {0,1}^K", "triviaqa": "TriviaQA [K]", "wmt19_fien": "WMT19 R^d",
                 "cnn_dm": "CNN/DM G", "maqa_star": "MAQA* Simplex"}


def metric_label(metric: str) -> str:
    """A metric's label, as its registration declares it (pipeline.tasks.METRICS)."""
    return METRICS[metric].label if metric in METRICS else metric


def lower_is_better(metric: str) -> bool:
    """A metric's direction, declared once with the metric (pipeline.tasks.METRICS)."""
    return metric in METRICS and not METRICS[metric].higher_is_better
METHODS = list(table_methods())  # column order and labels: pipeline.methods
METHOD_LABEL = {m: method_label(m) for m in METHODS}
ESTIMATORS = table_estimators()  # row order and labels: pipeline.uncertainty.estimators
ESTIMATOR_LABEL = {e: estimator_label(e) for e in ESTIMATORS}
PAPER_72B = "qwen2.5-72b-instruct"


def _order(values, preferred):
    rank = {v: i for i, v in enumerate(preferred)}
    return sorted(values, key=lambda v: (rank.get(v, len(rank)), v))


def wide_table(long: pd.DataFrame, row_key: str, row_order: list[str]) -> pd.DataFrame:
    """long: model, <row_key>, source, dataset, metric, value -> wide table in paper order."""
    if long.empty:
        return pd.DataFrame()
    wide = long.pivot_table(index=["model", row_key, "source"], columns=["dataset", "metric"],
                            values="value", aggfunc="first")
    cols = [c for c in COLUMNS if c in wide.columns]
    cols += sorted(c for c in wide.columns if c not in cols)
    wide = wide.reindex(columns=pd.MultiIndex.from_tuples(cols, names=["dataset", "metric"]))
    ours_models = list(dict.fromkeys(long.loc[long["source"] == "ours", "model"]))
    models = ours_models + [m for m in dict.fromkeys(long["model"]) if m not in ours_models]
    index = sorted(wide.index, key=lambda ix: (models.index(ix[0]),
                                               _order(row_order + [ix[1]], row_order).index(ix[1])
                                               if ix[1] in row_order else len(row_order),
                                               ix[1], 0 if ix[2] == "ours" else 1))
    return wide.reindex(pd.MultiIndex.from_tuples(index, names=["model", row_key, "source"]))


def generation_long(ours: pd.DataFrame, paper: pd.DataFrame, table: str,
                    models: list[str] | None = None) -> pd.DataFrame:
    frames = []
    if not ours.empty:
        o = ours[["model", "method", "dataset", "metric", "value"]].assign(source="ours")
        frames.append(o)
    p = paper[paper["table"] == table]
    if models is not None:
        p = p[p["model"].isin(models)]
    frames.append(p[["model", "method", "dataset", "metric", "value"]].assign(source="paper"))
    return pd.concat(frames, ignore_index=True)


def uq_long(ours: pd.DataFrame, paper: pd.DataFrame, table: str, target: str, score: str,
            models: list[str] | None = None) -> pd.DataFrame:
    frames = []
    if not ours.empty:
        o = ours[ours["target"] == target]
        frames.append(pd.DataFrame({"model": o["model"], "estimator": o["estimator"],
                                    "dataset": o["dataset"], "metric": o["metric"],
                                    "value": o[score], "source": "ours"}))
    p = paper[(paper["table"] == table)]
    if models is not None:
        p = p[p["model"].isin(models)]
    frames.append(p[["model", "estimator", "dataset", "metric", "value"]].assign(source="paper"))
    return pd.concat(frames, ignore_index=True)


def extra_rows() -> set[str]:
    """Rows of our extras (methods and estimators the paper does not compare): shown, marked
    EXTRA_MARK, never best or runner-up."""
    return extra_methods() | extra_estimators()


EXTRA_MARK = " †"
EXTRA_NOTE = "† not in the paper's comparison: never marked best or runner-up."


def _ranks(wide: pd.DataFrame, lower_better: bool) -> pd.DataFrame:
    """1 = best, 2 = runner-up within each (model, source) block, per column, among the paper's
    methods / estimators (our extras are left out)."""
    ranks = pd.DataFrame(index=wide.index, columns=wide.columns, dtype=float)
    extras = extra_rows()
    compared = wide[[ix[1] not in extras for ix in wide.index]]
    for (_, _), block in compared.groupby(level=["model", "source"], sort=False):
        for col in wide.columns:
            lb = lower_better if isinstance(lower_better, bool) else lower_is_better(col[1])
            vals = block[col].dropna()
            vals = vals[vals.map(lambda v: math.isfinite(v))]
            order = vals.rank(method="min", ascending=lb)
            ranks.loc[order.index, col] = order
    return ranks


def _fmt(v) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"


def render_markdown(wide: pd.DataFrame, title: str, row_label: dict[str, str],
                    lower_better) -> str:
    if wide.empty:
        return f"## {title}\n\n(no data)\n"
    ranks = _ranks(wide, lower_better)
    head = ["Model", "", "Source"] + [f"{DATASET_LABEL.get(d, d)} {metric_label(m)}"
                                      for d, m in wide.columns]
    lines = [f"## {title}", "", "| " + " | ".join(head) + " |",
             "|" + "|".join(["---"] * 3 + [":---:"] * len(wide.columns)) + "|"]
    extras = extra_rows()
    for ix, row in wide.iterrows():
        cells = []
        for col in wide.columns:
            s = _fmt(row[col])
            r = ranks.loc[ix, col]
            cells.append(f"**{s}**" if r == 1 else s)
        lines.append("| " + " | ".join([ix[0], _row_name(ix[1], row_label, extras), ix[2]] + cells)
                     + " |")
    if any(ix[1] in extras for ix in wide.index):
        lines += ["", EXTRA_NOTE]
    return "\n".join(lines) + "\n"


def _row_name(key: str, row_label: dict[str, str], extras: set[str]) -> str:
    return row_label.get(key, key) + (EXTRA_MARK if key in extras else "")


def render_latex(wide: pd.DataFrame, caption: str, label: str, row_label: dict[str, str],
                 lower_better) -> str:
    if wide.empty:
        return f"% {caption}: no data\n"
    ranks = _ranks(wide, lower_better)
    extras = extra_rows()
    esc = lambda s: str(s).replace("_", r"\_").replace("&", r"\&")  # noqa: E731
    cols = list(wide.columns)
    lines = [r"\begin{table*}[t]", r"\centering", rf"\caption{{{caption}}}", rf"\label{{{label}}}",
             r"\small", r"\begin{tabular}{lll" + "c" * len(cols) + "}", r"\toprule"]
    groups, prev = [], None
    for d, _ in cols:
        if d != prev:
            groups.append([d, 0])
            prev = d
        groups[-1][1] += 1
    lines.append(" & & & " + " & ".join(rf"\multicolumn{{{n}}}{{c}}{{{esc(DATASET_LABEL.get(d, d))}}}"
                                         for d, n in groups) + r" \\")
    lines.append(r"Model & & Source & " + " & ".join(esc(metric_label(m)) for _, m in cols)
                 + r" \\")
    lines.append(r"\midrule")
    prev_model = None
    for ix, row in wide.iterrows():
        if prev_model is not None and ix[0] != prev_model:
            lines.append(r"\midrule")
        prev_model = ix[0]
        cells = []
        for col in cols:
            s = _fmt(row[col])
            r = ranks.loc[ix, col]
            cells.append(rf"\textbf{{{s}}}" if r == 1 else (rf"\underline{{{s}}}" if r == 2 else s))
        lines.append(" & ".join([esc(ix[0]), esc(_row_name(ix[1], row_label, extras)).replace(
            "†", r"$^\dagger$"), ix[2]] + cells)
                     + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table*}"]
    return "\n".join(lines) + "\n"


def write_table(wide: pd.DataFrame, out_dir: Path, name: str, title: str, row_label: dict,
                lower_better) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"md": out_dir / f"{name}.md", "tex": out_dir / f"{name}.tex",
             "csv": out_dir / f"{name}.csv"}
    paths["md"].write_text(render_markdown(wide, title, row_label, lower_better), encoding="utf-8")
    paths["tex"].write_text(render_latex(wide, title, f"tab:{name}", row_label, lower_better),
                            encoding="utf-8")
    flat = wide.copy()
    flat.columns = [f"{d}/{m}" for d, m in flat.columns] if not flat.empty else flat.columns
    flat.reset_index().to_csv(paths["csv"], index=False, float_format="%.6g")
    return paths


TABLES = {
    # name: (kind, paper table id, title, target, score)
    "generation": ("generation", "performance_generations",
                   "Generation quality per decoding method (Table 2)", None, None),
    "generation_72b": ("generation", "performance_generations_72b",
                       "Generation quality, Qwen2.5-72B (Table 7)", None, None),
    "uq_prr_bayes": ("uq", "uq_prr_bayes", "UQ PRR, quality of the Bayes response (Table 3)",
                     OURS, "prr"),
    "uq_auc_bayes": ("uq", "uq_auc_bayes", "UQ concordance AUC, Bayes response (Table 4)",
                     OURS, "auc"),
    "uq_prr_beam": ("uq", "uq_prr_beam", "UQ PRR, quality of the beam response (Table 5)",
                    BASELINE, "prr"),
    "uq_auc_beam": ("uq", "uq_auc_beam", "UQ concordance AUC, beam response (Table 6)",
                    BASELINE, "auc"),
    # The F1 reading of MAQA/CNN-DM (paper: "We study both the Hamming distance and the F1 score
    # as dissimilarity measures"): the F1-optimal (GFM) response's quality; no published numbers.
    "uq_prr_bayes_fbeta": ("uq", "uq_prr_bayes_fbeta",
                           "UQ PRR, quality of the F1-optimal Bayes response (F1 reading)",
                           F_BETA, "prr"),
    "uq_72b": ("uq", "uq_72b", "UQ PRR, Bayes response, Qwen2.5-72B (Table 8)", OURS,
               "prr"),
}


def build_tables(quality: pd.DataFrame, scores: pd.DataFrame, paper_gen: pd.DataFrame,
                 paper_uq: pd.DataFrame, out_dir: Path) -> dict[str, pd.DataFrame]:
    """Write every table; returns the wide frames by name."""
    built = {}
    for name, (kind, paper_id, title, target, score) in TABLES.items():
        is_72b = name.endswith("72b")
        ours_q = quality if not is_72b else quality[quality["model"] == PAPER_72B]
        ours_s = scores if not is_72b or scores.empty else scores[scores["model"] == PAPER_72B]
        if not is_72b and not ours_q.empty:
            ours_q = ours_q[ours_q["model"] != PAPER_72B]
        if not is_72b and not ours_s.empty:
            ours_s = ours_s[ours_s["model"] != PAPER_72B]
        if kind == "generation":
            long = generation_long(ours_q, paper_gen, paper_id)
            wide = wide_table(long, "method", METHODS)
            write_table(wide, out_dir, name, title, METHOD_LABEL, lower_better=None)
        else:
            long = uq_long(ours_s, paper_uq, paper_id, target, score)
            wide = wide_table(long.rename(columns={"estimator": "estimator"}), "estimator",
                              ESTIMATORS)
            write_table(wide, out_dir, name, title, ESTIMATOR_LABEL, lower_better=False)
        built[name] = wide
    return built
