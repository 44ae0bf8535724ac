"""The paper's tables rebuilt from artifacts, with the published numbers beside ours.

Each table is a wide frame indexed by (model, method|estimator, source) with columns
(dataset, metric) in the paper's order; `source` is "ours" or "paper", so where both exist for a
model the two rows stand next to each other. Rendered as Markdown, LaTeX (booktabs, best in bold,
runner-up underlined, per model and source) and CSV.

Best and runner-up: our rows' are computed from our numbers (and intervals); the paper's rows
keep the marks the paper itself prints (the `emphasis` transcribed with its numbers,
results/paper), never recomputed: a tie the paper marks once stays marked once, and a merged
cell of the paper (one value spanning several rows, expanded in results/paper with
`spans_from`) is marked once, on the row that holds it, its other rows flagged MERGED_MARK.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pipeline.components.methods import extra_methods, method_label, table_methods
from pipeline.reporting.paper import DATASET_LABEL, NOTES, PAPER_72B, TABLE_COLUMNS, TABLES
from pipeline.tasks.contract import METRICS
from pipeline.uncertainty.estimators import (
    estimator_label,
    estimator_note,
    extra_estimators,
    shown_for,
    table_estimators,
)

# the paper's columns (dataset, metric) and their labels, its tables: pipeline.reporting.paper
COLUMNS = TABLE_COLUMNS


def metric_label(metric: str) -> str:
    """A metric's label, as its registration declares it (pipeline.tasks.METRICS)."""
    return METRICS[metric].label if metric in METRICS else metric


def lower_is_better(metric: str) -> bool:
    """A metric's direction, declared once with the metric (pipeline.tasks.METRICS)."""
    return metric in METRICS and not METRICS[metric].higher_is_better


METHODS = list(table_methods())  # column order and labels: pipeline.components.methods
METHOD_LABEL = {m: method_label(m) for m in METHODS}
ESTIMATORS = table_estimators()  # row order and labels: pipeline.uncertainty.estimators
ESTIMATOR_LABEL = {e: estimator_label(e) for e in ESTIMATORS}
# Fewer prompts than this in one of our (model, column) cells: its best is not marked (a PRR of
# 1.000 on 10 prompts is no finding); report_figures.min_n_best.
MIN_N_BEST = 30


def _order(values, preferred):
    rank = {v: i for i, v in enumerate(preferred)}
    return sorted(values, key=lambda v: (rank.get(v, len(rank)), v))


def wide_table(
    long: pd.DataFrame, row_key: str, row_order: list[str], values: str = "value"
) -> pd.DataFrame:
    """long: model, <row_key>, source, dataset, metric, <values> -> wide table in paper order."""
    if long.empty:
        return pd.DataFrame()
    wide = long.pivot_table(
        index=["model", row_key, "source"],
        columns=["dataset", "metric"],
        values=values,
        aggfunc="first",
    )
    cols = [c for c in COLUMNS if c in wide.columns]
    cols += sorted(c for c in wide.columns if c not in cols)
    wide = wide.reindex(columns=pd.MultiIndex.from_tuples(cols, names=["dataset", "metric"]))
    ours_models = list(dict.fromkeys(long.loc[long["source"] == "ours", "model"]))
    models = ours_models + [m for m in dict.fromkeys(long["model"]) if m not in ours_models]
    index = sorted(
        wide.index,
        key=lambda ix: (
            models.index(ix[0]),
            _order(row_order + [ix[1]], row_order).index(ix[1])
            if ix[1] in row_order
            else len(row_order),
            ix[1],
            0 if ix[2] == "ours" else 1,
        ),
    )
    return wide.reindex(pd.MultiIndex.from_tuples(index, names=["model", row_key, "source"]))


# our numbers' prompt count, 95% bootstrap interval and (UQ) prompts left out of the comparison
CELL_DETAILS = ("n", "low", "high", "n_dropped")


# the paper's own marks (results/paper `emphasis`) -> rank: 1 best, 2 runner-up
PAPER_MARK = {"best": 1.0, "runner_up": 2.0}


@dataclass
class Table:
    """A table's values and, for our rows, their intervals (low, high) and prompt counts (n),
    each a wide frame shaped like `values` (NaN where there is none: the paper's rows).

    For the paper's rows, when the long frame carries them (`mark`, `merged`: generation_long,
    uq_long): `marks`, the paper's own best (1) / runner-up (2) marks, and `merged`, the row
    whose merged cell a cell's value is printed in (NaN: a cell of its own). Without them
    (`marks` None) the paper's rows are ranked like ours."""

    values: pd.DataFrame
    low: pd.DataFrame
    high: pd.DataFrame
    n: pd.DataFrame
    n_dropped: pd.DataFrame
    marks: pd.DataFrame | None = None
    merged: pd.DataFrame | None = None

    @classmethod
    def from_long(cls, long: pd.DataFrame, row_key: str, row_order: list[str]) -> Table:
        values = wide_table(long, row_key, row_order)
        if values.empty:
            return cls(values, values, values, values, values)
        parts = {}
        for name in CELL_DETAILS:
            column = long[name] if name in long.columns else pd.Series(np.nan, index=long.index)
            parts[name] = wide_table(
                long.assign(**{name: pd.to_numeric(column)}), row_key, row_order, values=name
            ).reindex_like(values)
        paper = {}
        for name in ("mark", "merged"):
            if name in long.columns:
                column = long[name] if name == "merged" else pd.to_numeric(long[name])
                paper[name] = wide_table(
                    long.assign(**{name: column}), row_key, row_order, values=name
                ).reindex_like(values)
        return cls(
            values,
            parts["low"],
            parts["high"],
            parts["n"],
            parts["n_dropped"],
            paper.get("mark"),
            paper.get("merged"),
        )


def block_counts(table: Table) -> pd.DataFrame:
    """Prompts per (model, column) of our rows, as text: one count, "min-max" when the rows of a
    model differ (a method with unscored decisions), "" for none; ", k dropped" when k prompts
    with a quality were left out so that every estimator is scored on the same ones. Estimators
    with no value at all (n = 0, e.g. P(True) without a P(True) pass) do not count."""
    ours = table.n.index.get_level_values("source") == "ours"
    n, dropped = table.n[ours], table.n_dropped[ours]
    out = {}
    for model, block in n.groupby(level="model", sort=False):
        cells = {}
        for col in n.columns:
            counts = block[col].dropna()
            counts = counts[counts > 0].astype(int)
            text = (
                ""
                if counts.empty
                else str(counts.min())
                if counts.min() == counts.max()
                else f"{counts.min()}-{counts.max()}"
            )
            left_out = dropped.loc[block.index, col].max()
            if text and pd.notna(left_out) and left_out > 0:
                text += f", {int(left_out)} dropped"
            cells[col] = text
        out[model] = cells
    return pd.DataFrame.from_dict(out, orient="index", columns=n.columns)


def too_small(table: Table, min_n: int) -> pd.DataFrame:
    """True where a (model, column) of our rows has fewer than `min_n` prompts: no best there."""
    n = table.n[table.n.index.get_level_values("source") == "ours"]
    return n.groupby(level="model", sort=False).max().fillna(0) < min_n


def _paper_rows(p: pd.DataFrame, row_key: str) -> pd.DataFrame:
    """The paper's rows of one table, with its own marks (`mark`: 1 best, 2 runner-up, from
    `emphasis`) and merged cells (`merged`: the row a cell's value is printed in, from
    `spans_from`) when results/paper has them. A merged cell is marked once, on the row that
    holds it, as the paper prints it (results/paper copies its emphasis to every covered row)."""
    out = p[["model", row_key, "dataset", "metric", "value"]].assign(source="paper")
    if "spans_from" in p.columns:
        merged = p["spans_from"].where(p["spans_from"].notna() & (p["spans_from"] != ""))
        out = out.assign(merged=merged.astype(object))
    else:
        merged = pd.Series(np.nan, index=p.index, dtype=object)
    if "emphasis" in p.columns:
        out = out.assign(mark=p["emphasis"].map(PAPER_MARK).where(merged.isna()))
    return out


def generation_long(
    ours: pd.DataFrame, paper: pd.DataFrame, table: str, models: list[str] | None = None
) -> pd.DataFrame:
    frames = []
    if not ours.empty:
        keep = ["model", "method", "dataset", "metric", "value"] + [
            c for c in CELL_DETAILS if c in ours.columns
        ]
        frames.append(ours[keep].assign(source="ours"))
    p = paper[paper["table"] == table]
    if models is not None:
        p = p[p["model"].isin(models)]
    frames.append(_paper_rows(p, "method"))
    return pd.concat(frames, ignore_index=True)


def uq_long(
    ours: pd.DataFrame,
    paper: pd.DataFrame,
    table: str,
    target: str,
    score: str,
    models: list[str] | None = None,
) -> pd.DataFrame:
    frames = []
    if not ours.empty:
        o = ours[ours["target"] == target]
        frames.append(
            pd.DataFrame(
                {
                    "model": o["model"],
                    "estimator": o["estimator"],
                    "dataset": o["dataset"],
                    "metric": o["metric"],
                    "value": o[score],
                    "low": o.get(f"{score}_low"),
                    "high": o.get(f"{score}_high"),
                    "n": o.get("n"),
                    "n_dropped": o.get("n_dropped"),
                    "source": "ours",
                }
            )
        )
    p = paper[(paper["table"] == table)]
    if models is not None:
        p = p[p["model"].isin(models)]
    frames.append(_paper_rows(p, "estimator"))
    return pd.concat(frames, ignore_index=True)


def extra_rows() -> set[str]:
    """Rows of our extras (methods and estimators the paper does not compare): shown, marked
    EXTRA_MARK, never best or runner-up."""
    return extra_methods() | extra_estimators()


EXTRA_MARK = " †"
EXTRA_NOTE = "† not in the paper's comparison: never marked best or runner-up."
PAPER_MARKS_NOTE = (
    "paper rows: best and runner-up as the paper itself marks them (transcribed "
    "from its LaTeX source, results/paper), not recomputed from the numbers."
)
MERGED_MARK = " ‡"


def merged_note(rows: list[str]) -> str:
    """The note for the paper's merged cells shown, `rows`: the labels of the rows holding
    them."""
    return (
        "‡ paper: one merged cell; the paper prints this value once, in a cell spanning "
        f"this row down to the {' / '.join(rows)} row, and marks it (if at all) only there."
    )


def _separated(order: pd.Series, table: Table | None, col) -> pd.Series:
    """`order` (ranks of one of our columns) keeping ranks 1 and 2 only where the method's 95%
    interval lies clear of the interval of every method ranked below it: a best whose interval
    overlaps the next one's is no finding. Without intervals (n_bootstrap=0) ranks stay."""
    if table is None:
        return order
    low, high = table.low[col].reindex(order.index), table.high[col].reindex(order.index)
    if low.isna().all() or high.isna().all():
        return order
    kept = order.copy()
    for ix, r in order.items():
        if r > 2:
            continue
        below = order[order > r].index
        if (
            pd.isna(low[ix])
            or pd.isna(high[ix])
            or any(
                not (high[ix] < low[j] or low[ix] > high[j])
                for j in below
                if pd.notna(low[j]) and pd.notna(high[j])
            )
        ):
            kept[ix] = np.nan
    return kept


def _ranks(
    wide: pd.DataFrame,
    lower_better: bool,
    small: pd.DataFrame | None = None,
    table: Table | None = None,
) -> pd.DataFrame:
    """1 = best, 2 = runner-up within each (model, source) block, per column, among the paper's
    methods / estimators (our extras are left out). `small` (too_small): our blocks' columns
    with too few prompts get no rank; with `table`, our best and runner-up must also stand
    clear of the methods below them (`_separated`). The paper's blocks take the paper's own
    marks where `table` has them (Table.marks), computed otherwise."""
    ranks = pd.DataFrame(index=wide.index, columns=wide.columns, dtype=float)
    extras = extra_rows()
    compared = wide[[ix[1] not in extras for ix in wide.index]]
    for (model, source), block in compared.groupby(level=["model", "source"], sort=False):
        if source == "paper" and table is not None and table.marks is not None:
            ranks.loc[block.index, wide.columns] = table.marks.loc[block.index, wide.columns]
            continue
        for col in wide.columns:
            if (
                source == "ours"
                and small is not None
                and model in small.index
                and bool(small.loc[model, col])
            ):
                continue
            lb = lower_better if isinstance(lower_better, bool) else lower_is_better(col[1])
            vals = block[col].dropna()
            vals = vals[vals.map(lambda v: math.isfinite(v))]
            order = vals.rank(method="min", ascending=lb)
            if source == "ours":
                order = _separated(order, table, col)
            ranks.loc[order.index, col] = order
    return ranks


def _fmt(v) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"


def _interval(table: Table | None, ix, col) -> str:
    """ " [low, high]" of one of our cells, "" when it has none."""
    if table is None or ix[2] != "ours":
        return ""
    low, high = table.low.loc[ix, col], table.high.loc[ix, col]
    return "" if pd.isna(low) or pd.isna(high) else f" [{low:.2f}, {high:.2f}]"


def _ends_block(rows: list, i: int) -> bool:
    """Whether row i is the last of its model's block."""
    return i + 1 == len(rows) or rows[i + 1][0][0] != rows[i][0][0]


def _count_cell(counts: pd.DataFrame, small: pd.DataFrame, model: str, col) -> str:
    text = counts.loc[model, col] if model in counts.index else ""
    return f"{text} (too small)" if text and bool(small.loc[model, col]) else text


def _merged_into(table: Table | None, ix, col) -> str | None:
    """The row whose merged cell holds the value of the paper's cell (ix, col); None: its own."""
    if table is None or table.merged is None or ix[2] != "paper":
        return None
    into = table.merged.loc[ix, col]
    return None if pd.isna(into) else str(into)


def _merged_rows(table: Table | None, row_label: dict[str, str]) -> list[str]:
    """Labels of the rows holding the paper's merged cells that the table shows."""
    if table is None or table.merged is None:
        return []
    into = {str(v) for v in table.merged.to_numpy().ravel() if pd.notna(v)}
    return [row_label.get(r, r) for r in sorted(into)]


def data_note(dataset: str, sources: list[tuple[str, dict]]) -> str:
    """Which released file a dataset's rows of ours came from (pipeline.reporting.collect
    .data_files): its SHA-256, origin and whether a pin checked it, per distinct file (with the
    models that read it when they differ)."""
    files: dict[str, list[str]] = {}
    for model, entry in sources:
        name = Path(str(entry.get("path") or _one_file(entry.get("data_files")))).name
        origin = (
            (f", from {entry['repository']}" if entry.get("repository") else "")
            + (f" at commit {entry['commit']}" if entry.get("commit") else "")
            + (f" ({entry['file']})" if entry.get("file") and entry["file"] != name else "")
        )
        pin = {
            True: " (pinned)",
            False: " [UNPINNED: no SHA-256 pinned in its dataset config; "
            "make paper-assets fills the pin]",
        }.get(entry.get("pinned"), "")
        files.setdefault(f"{name}, SHA-256 {entry['sha256']}{origin}{pin}", []).append(model)
    said = "; ".join(
        text + (f" (read by {', '.join(models)})" if len(files) > 1 else "")
        for text, models in files.items()
    )
    return f"Data of {DATASET_LABEL.get(dataset, dataset)}: {said}."


def _one_file(data_files) -> str:
    """The file of a single-file `data_files` record ({split: path} or a path)."""
    if isinstance(data_files, dict):
        data_files = next(iter(data_files.values()), "")
    if isinstance(data_files, list):
        data_files = data_files[0] if len(data_files) == 1 else ""
    return str(data_files or "")


def table_notes(
    table: Table | None, extras_shown: bool, min_n: int, merged_rows: list[str] | None = None
) -> list[str]:
    notes = []
    if (
        table is not None
        and table.marks is not None
        and (table.values.index.get_level_values("source") == "paper").any()
    ):
        notes.append(PAPER_MARKS_NOTE)
    if merged_rows:
        notes.append(merged_note(merged_rows))
    if table is not None and (table.n.index.get_level_values("source") == "ours").any():
        notes.append(
            f"ours: value [95% percentile bootstrap interval]; n = prompts scored "
            "(dropped: prompts with a quality left out because an estimator has no value "
            f"there); best and runner-up not marked where n < {min_n} (too small) or where their "
            "interval overlaps that of a method ranked below them."
        )
    if extras_shown:
        notes.append(EXTRA_NOTE)
    return notes


def render_markdown(
    wide: pd.DataFrame | Table,
    title: str,
    row_label: dict[str, str],
    lower_better,
    min_n: int = MIN_N_BEST,
    note: str = "",
) -> str:
    table = wide if isinstance(wide, Table) else None
    wide = table.values if table is not None else wide
    if wide.empty:
        return f"## {title}\n\n(no data)\n"
    counts = block_counts(table) if table is not None else pd.DataFrame()
    small = too_small(table, min_n) if table is not None else None
    ranks = _ranks(wide, lower_better, small, table)
    head = ["Model", "", "Source"] + [
        f"{DATASET_LABEL.get(d, d)} {metric_label(m)}" for d, m in wide.columns
    ]
    lines = (
        [f"## {title}", ""]
        + ([note, ""] if note else [])
        + [
            "| " + " | ".join(head) + " |",
            "|" + "|".join(["---"] * 3 + [":---:"] * len(wide.columns)) + "|",
        ]
    )
    extras = extra_rows()
    rows = list(wide.iterrows())
    for i, (ix, row) in enumerate(rows):
        cells = []
        for col in wide.columns:
            s = _fmt(row[col])
            cells.append(
                (f"**{s}**" if ranks.loc[ix, col] == 1 else s)
                + (MERGED_MARK if _merged_into(table, ix, col) else "")
                + _interval(table, ix, col)
            )
        lines.append(
            "| " + " | ".join([ix[0], _row_name(ix[1], row_label, extras), ix[2]] + cells) + " |"
        )
        if _ends_block(rows, i) and ix[0] in counts.index:  # the model's n, once
            lines.append(
                "| "
                + " | ".join(
                    [ix[0], "n", "ours"]
                    + [_count_cell(counts, small, ix[0], col) for col in wide.columns]
                )
                + " |"
            )
    notes = table_notes(
        table, any(ix[1] in extras for ix in wide.index), min_n, _merged_rows(table, row_label)
    )
    if notes:
        lines += [""] + notes
    return "\n".join(lines) + "\n"


def _row_name(key: str, row_label: dict[str, str], extras: set[str]) -> str:
    return row_label.get(key, key) + (EXTRA_MARK if key in extras else "")


def render_latex(
    wide: pd.DataFrame | Table,
    caption: str,
    label: str,
    row_label: dict[str, str],
    lower_better,
    min_n: int = MIN_N_BEST,
    note: str = "",
) -> str:
    table = wide if isinstance(wide, Table) else None
    wide = table.values if table is not None else wide
    if wide.empty:
        return f"% {caption}: no data\n"
    counts = block_counts(table) if table is not None else pd.DataFrame()
    small = too_small(table, min_n) if table is not None else None
    ranks = _ranks(wide, lower_better, small, table)
    notes = ([note] if note else []) + table_notes(
        table,
        any(ix[1] in extra_rows() for ix in wide.index),
        min_n,
        _merged_rows(table, row_label),
    )
    if notes:
        caption = caption + ". " + " ".join(notes).replace("‡", r"$^\ddagger$")
    extras = extra_rows()
    cols = list(wide.columns)
    lines = _latex_head(caption, label, cols)
    prev_model = None
    rows = list(wide.iterrows())
    for i, (ix, row) in enumerate(rows):
        if prev_model is not None and ix[0] != prev_model:
            lines.append(r"\midrule")
        prev_model = ix[0]
        cells = [_latex_cell(table, ranks, ix, col, row[col]) for col in cols]
        lines.append(
            " & ".join(
                [
                    _esc(ix[0]),
                    _esc(_row_name(ix[1], row_label, extras)).replace("†", r"$^\dagger$"),
                    ix[2],
                ]
                + cells
            )
            + r" \\"
        )
        if _ends_block(rows, i) and ix[0] in counts.index:
            lines.append(
                " & ".join(
                    [_esc(ix[0]), "$n$", "ours"]
                    + [_count_cell(counts, small, ix[0], col) for col in cols]
                )
                + r" \\"
            )
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table*}"]
    return "\n".join(lines) + "\n"


def _esc(s) -> str:
    """LaTeX's escapes of the characters our labels hold."""
    return str(s).replace("_", r"\_").replace("&", r"\&")


def _latex_head(caption: str, label: str, cols: list) -> list[str]:
    """The table's lines down to the rule under its header: a dataset row (one multicolumn per
    run of columns of a dataset) over a metric row."""
    lines = [
        r"\begin{table*}[t]",
        r"\centering",
        rf"\caption{{{caption}}}",
        rf"\label{{{label}}}",
        r"\small",
        r"\begin{tabular}{lll" + "c" * len(cols) + "}",
        r"\toprule",
    ]
    groups, prev = [], None
    for d, _ in cols:
        if d != prev:
            groups.append([d, 0])
            prev = d
        groups[-1][1] += 1
    lines.append(
        " & & & "
        + " & ".join(
            rf"\multicolumn{{{n}}}{{c}}{{{_esc(DATASET_LABEL.get(d, d))}}}" for d, n in groups
        )
        + r" \\"
    )
    lines.append(
        r"Model & & Source & " + " & ".join(_esc(metric_label(m)) for _, m in cols) + r" \\"
    )
    lines.append(r"\midrule")
    return lines


def _latex_cell(table: Table | None, ranks: pd.DataFrame, ix, col, value) -> str:
    """One value: bold where best, underlined where runner-up, the merged mark, the interval."""
    s = _fmt(value)
    r = ranks.loc[ix, col]
    s = rf"\textbf{{{s}}}" if r == 1 else (rf"\underline{{{s}}}" if r == 2 else s)
    if _merged_into(table, ix, col):
        s += r"$^\ddagger$"
    interval = _interval(table, ix, col)
    return s + (rf"{{\scriptsize{interval}}}" if interval else "")


def write_table(
    wide: pd.DataFrame | Table,
    out_dir: Path,
    name: str,
    title: str,
    row_label: dict,
    lower_better,
    min_n: int = MIN_N_BEST,
    note: str = "",
) -> dict[str, Path]:
    """md and tex (values, our intervals and counts, best marked), csv (values, and for ours the
    interval, n and n_dropped as `<dataset>/<metric>/<part>` columns)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "md": out_dir / f"{name}.md",
        "tex": out_dir / f"{name}.tex",
        "csv": out_dir / f"{name}.csv",
    }
    paths["md"].write_text(
        render_markdown(wide, title, row_label, lower_better, min_n, note), encoding="utf-8"
    )
    paths["tex"].write_text(
        render_latex(wide, title, f"tab:{name}", row_label, lower_better, min_n, note),
        encoding="utf-8",
    )
    table = wide if isinstance(wide, Table) else None
    values = table.values if table is not None else wide
    flat = values.copy()
    flat.columns = [f"{d}/{m}" for d, m in flat.columns] if not flat.empty else flat.columns
    if table is not None and not values.empty:
        for part in CELL_DETAILS:
            extra = getattr(table, part).copy()
            extra.columns = [f"{d}/{m}/{part}" for d, m in extra.columns]
            flat = flat.join(extra)
    flat.reset_index().to_csv(paths["csv"], index=False, float_format="%.6g")
    return paths


def _note(name: str, table: Table, data_notes: dict[str, str], row_key: str = "") -> str:
    """Table `name`'s own note, what it says of the rows it shows that carry a note of their own
    (a sensitivity row's: estimator_note), then the data note of each dataset its rows of ours
    read."""
    values = table.values
    ours = values[values.index.get_level_values("source") == "ours"] if len(values) else values
    used = (
        [
            d
            for d in dict.fromkeys(d for d, _ in ours.columns)
            if d in data_notes and ours[d].notna().to_numpy().any()
        ]
        if len(ours)
        else []
    )
    rows = (
        list(dict.fromkeys(ours.index.get_level_values(row_key)))
        if row_key == "estimator" and len(ours)
        else []
    )
    said = [n for n in dict.fromkeys(estimator_note(r) for r in rows) if n]
    return " ".join(([NOTES[name]] if name in NOTES else []) + said + [data_notes[d] for d in used])


def build_tables(
    quality: pd.DataFrame,
    scores: pd.DataFrame,
    paper_gen: pd.DataFrame,
    paper_uq: pd.DataFrame,
    out_dir: Path,
    min_n: int = MIN_N_BEST,
    data_notes: dict[str, str] | None = None,
) -> dict[str, pd.DataFrame]:
    """Write every table; returns the wide frames of values by name. `data_notes`: {dataset:
    its `data_note`}, said above each table whose rows of ours read that dataset."""
    data_notes = data_notes or {}
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
            table = Table.from_long(generation_long(ours_q, paper_gen, paper_id), "method", METHODS)
            write_table(
                table,
                out_dir,
                name,
                title,
                METHOD_LABEL,
                lower_better=None,
                min_n=min_n,
                note=_note(name, table, data_notes),
            )
        else:
            if not ours_s.empty:  # a sensitivity row only in the tables of its own target
                ours_s = ours_s[ours_s["estimator"].map(lambda e: shown_for(e, target))]  # noqa: B023 - applied here
            long = uq_long(ours_s, paper_uq, paper_id, target, score)
            table = Table.from_long(long, "estimator", ESTIMATORS)
            write_table(
                table,
                out_dir,
                name,
                title,
                ESTIMATOR_LABEL,
                lower_better=False,
                min_n=min_n,
                note=_note(name, table, data_notes, "estimator"),
            )
        built[name] = table.values
    return built
