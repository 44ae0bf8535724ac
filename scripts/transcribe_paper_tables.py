#!/usr/bin/env python
"""Transcribe the paper's published numbers from its LaTeX source into tidy CSVs.

Run once (stdlib only, no project import needed):

    python scripts/transcribe_paper_tables.py [--tex PATH] [--out results/paper]

Writes to ``results/paper/``:

* ``generation.csv``: table, model, method, dataset, latent, metric, value, emphasis, spans_from
  (tab:performance_generations and tab:performance_generations_72b);
* ``uq.csv``: table, model, estimator, target (bayes|beam), score (prr|auc), dataset, latent,
  metric, value, emphasis (tab:uq_prr_bayes, tab:uq_auc_bayes, tab:uq_prr_beam,
  tab:uq_auc_beam, tab:uq_72b);
* ``prr_rank.csv``: the data behind the paper's Figure "Average PRR rank of UQ methods over
  four LLMs on each task" (computed here from tab:uq_prr_bayes; see README.md there).

Cell handling (recorded per row so nothing is silent):

* ``\\multirow{-k}{*}{v}`` in a row spans that row and the k-1 rows above it in the same
  column; those rows hold an empty grey ``\\cellcolor`` cell in the source. Each covered row
  gets the value ``v`` and ``spans_from`` = the method of the row that holds the multirow
  (always ``bayes`` in this paper: TriviaQA's Bayes value also stands for l_MAP and l_Sample,
  WMT19's COMET Bayes value also for l_Sample). Rows with their own value have
  ``spans_from`` empty.
* ``n.a.`` cells (72B table, AR, AlignScore) are not written; README.md lists them.
* ``emphasis`` is ``best`` for ``\\textcolor{colfirst}{\\textbf{.}}``, ``runner_up`` for
  ``colsecond``, empty otherwise.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# The paper lives in shared/ beside the repository (also in CI's fresh clone).
DEFAULT_TEX_CANDIDATES = (
    REPO_ROOT.parent / "shared" / "paper" / "task_awareness.tex",
    Path("/work/shared/paper/task_awareness.tex"),
)
DEFAULT_OUT = REPO_ROOT / "results" / "paper"

GENERATION_TABLES = ("tab:performance_generations", "tab:performance_generations_72b")
# label -> (target, score); the 72B table is PRR against the Bayes action (its caption).
UQ_TABLES = {
    "tab:uq_prr_bayes": ("bayes", "prr"),
    "tab:uq_auc_bayes": ("bayes", "auc"),
    "tab:uq_prr_beam": ("beam", "prr"),
    "tab:uq_auc_beam": ("beam", "auc"),
    "tab:uq_72b": ("bayes", "prr"),
}

LATENT_OF_DATASET = {
    "maqa": "sets",
    "triviaqa": "classes",
    "wmt19_fien": "sphere",
    "cnn_dm": "graphs",
    "maqa_star": "simplex",
}
DATASET_ORDER = tuple(LATENT_OF_DATASET)

GENERATION_COLUMNS = (
    "table",
    "model",
    "method",
    "dataset",
    "latent",
    "metric",
    "value",
    "emphasis",
    "spans_from",
)
UQ_COLUMNS = (
    "table",
    "model",
    "estimator",
    "target",
    "score",
    "dataset",
    "latent",
    "metric",
    "value",
    "emphasis",
)
RANK_COLUMNS = ("level", "dataset", "latent", "metric", "estimator", "mean_rank", "n_cells")


# ---------------------------------------------------------------------------------------------
# LaTeX helpers
# ---------------------------------------------------------------------------------------------


def _strip_command_with_arg(text: str, command: str) -> str:
    """Replace ``\\command{x}`` by ``x`` (balanced braces), for every occurrence."""
    token = "\\" + command + "{"
    while token in text:
        start = text.index(token)
        depth, i = 1, start + len(token)
        while depth:
            if i >= len(text):
                raise ValueError(f"unbalanced braces after {token!r} in {text!r}")
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        text = text[:start] + text[start + len(token) : i - 1] + text[i:]
    return text


def plain_text(cell: str) -> str:
    """LaTeX cell -> plain words: drops colours/sizes/maths markup, keeps the content."""
    text = re.sub(r"\\cellcolor\[[^\]]*\]\{[^}]*\}", "", cell)
    text = re.sub(r"\\textcolor\{[^}]*\}", "", text)
    text = re.sub(r"\\multirow\{[^}]*\}\{[^}]*\}", "", text)
    text = re.sub(r"\\tiny\{\(ours\)\}", "", text)
    for command in ("rebuttal", "small", "textbf", "text", "makecell[c]"):
        text = _strip_command_with_arg(text, command)
    text = text.replace("$", "").replace("{", "").replace("}", "").replace("\\ell_", "l_")
    return " ".join(text.split())


def _split_cells(row: str) -> list[str]:
    """Split a tabular row at top-level ``&`` (never inside braces)."""
    cells, depth, current = [], 0, []
    for char in row:
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        if char == "&" and depth == 0:
            cells.append("".join(current))
            current = []
        else:
            current.append(char)
    cells.append("".join(current))
    return [c.strip() for c in cells]


def tabular_of(tex: str, label: str) -> str:
    """Body of the ``tabular`` environment of the table carrying ``\\label{label}``."""
    marker = "\\label{" + label + "}"
    if tex.count(marker) != 1:
        raise ValueError(f"expected exactly one {marker} in the tex, found {tex.count(marker)}")
    end_label = tex.index(marker)
    start = tex.rindex("\\begin{tabular}", 0, end_label)
    end = tex.index("\\end{tabular}", start)
    return tex[start:end]


@dataclass(frozen=True)
class Cell:
    """One parsed value cell."""

    value: float | None  # None: empty (grey) cell or n.a.
    span_up: int  # k of \multirow{-k}: rows covered upwards including this one; 1 = own cell
    emphasis: str  # best | runner_up | ""
    not_available: bool  # the paper prints "n.a."


_NUMBER = re.compile(r"-?\d+\.\d+")


def parse_value_cell(cell: str) -> Cell:
    """Parse one numeric cell: value, upward span, emphasis colour."""
    span = re.match(r"\\multirow\{-(\d+)\}", cell)
    span_up = int(span.group(1)) if span else 1
    emphasis = "best" if "colfirst" in cell else "runner_up" if "colsecond" in cell else ""
    numbers = _NUMBER.findall(re.sub(r"\\cellcolor\[[^\]]*\]\{[^}]*\}", "", cell))
    if len(numbers) > 1:
        raise ValueError(f"more than one number in cell {cell!r}")
    not_available = plain_text(cell).lower() == "n.a."
    return Cell(float(numbers[0]) if numbers else None, span_up, emphasis, not_available)


# ---------------------------------------------------------------------------------------------
# Canonical names
# ---------------------------------------------------------------------------------------------

MODEL_NAMES = {
    "gemma-3-4b": "gemma-3-4b-it",
    "gemma-3-12b": "gemma-3-12b-it",
    "qwen3-4b": "qwen3-4b",
    "qwen3-30b-a3b": "qwen3-30b-a3b",
    "qwen-2.5-72b": "qwen2.5-72b-instruct",
}
METHOD_NAMES = {
    "beam": "beam",
    "self-consistency": "self_consistency",
    "contr.": "contrastive",
    "ar": "ar",
    "greedy": "greedy",
    "l_map": "map",
    "l_sample": "sample_mbr",
    "bayes": "bayes",
}
ESTIMATOR_NAMES = {
    "p(true)": "ptrue",
    "sar": "sar",
    "cocoa": "cocoa_msp",
    "kle": "kle",
    "se": "semantic_entropy",
    "msp": "msp",
    "latent entropy": "latent_entropy",
    "r_bayes": "bayes_risk",
}
METRIC_NAMES = {
    "hamming": "hamming",
    "f1": "f1",
    "exact match": "exact_match_error",
    "comet": "comet",
    "cosine": "cosine_distance",
    "align score": "alignscore",
    "kl": "kl",
    "kl divergence": "kl",
}


def canonical(name: str, table: dict[str, str], what: str) -> str:
    key = plain_text(name).lower()
    key = re.sub(r"\s*[↓↑]$", "", key.replace("\\downarrow", "").replace("\\uparrow", "")).strip()
    if key not in table:
        raise ValueError(f"unknown {what} {name!r} (plain {key!r}); add it to the name table")
    return table[key]


def dataset_of_header(header: str) -> str:
    """Dataset id of a first-header-row cell such as ``MAQA ($\\{0, 1\\}^K$)``."""
    if "Delta" in header:
        return "maqa_star"
    for needle, dataset in (
        ("MAQA", "maqa"),
        ("TriviaQA", "triviaqa"),
        ("WMT19", "wmt19_fien"),
        ("Summarization", "cnn_dm"),
        ("CNN", "cnn_dm"),
    ):
        if needle in header:
            return dataset
    raise ValueError(f"cannot tell the dataset of header cell {header!r}")


# ---------------------------------------------------------------------------------------------
# Table parsing
# ---------------------------------------------------------------------------------------------


def _rows(body: str) -> list[str]:
    rows = [r.strip() for r in body.split("\\\\")]
    return [r for r in rows if "&" in r]


def column_keys(tabular: str) -> list[tuple[str, str]]:
    """(dataset, metric) of each value column, read from the two header rows."""
    header_part = tabular.split("\\midrule")[0].split("\\toprule")[1]
    first, second = _rows(header_part)[:2]
    datasets: list[str] = []
    for cell in _split_cells(first)[1:]:  # the first cell spans the two label columns
        match = re.match(r"\\multicolumn\{(\d+)\}\{[^}]*\}\{(.*)\}\s*$", cell, flags=re.DOTALL)
        if not match:
            raise ValueError(f"unexpected header cell {cell!r}")
        datasets += [dataset_of_header(match.group(2))] * int(match.group(1))
    # Cell 0 of the second row is \multicolumn{2}{c|}{}, covering both label columns.
    metrics = [canonical(c, METRIC_NAMES, "metric") for c in _split_cells(second)[1:]]
    if len(datasets) != len(metrics):
        raise ValueError(f"header mismatch: {len(datasets)} datasets vs {len(metrics)} metrics")
    return list(zip(datasets, metrics))


def parse_table(tex: str, label: str, row_names: dict[str, str], what: str) -> list[dict]:
    """Parse one results table into records with multirow cells expanded upwards.

    Returns dicts with keys model, row (canonical method/estimator), dataset, metric, value,
    emphasis, spans_from.
    """
    tabular = tabular_of(tex, label)
    keys = column_keys(tabular)
    body = tabular.split("\\midrule", 1)[1].split("\\bottomrule")[0]
    records: list[dict] = []
    for block in body.split("\\midrule"):
        model = None
        grid: list[tuple[str, list[Cell]]] = []
        for row in _rows(block):
            cells = _split_cells(row)
            if cells[0]:
                model = canonical(cells[0], MODEL_NAMES, "model")
            values = [parse_value_cell(c) for c in cells[2:]]
            if len(values) != len(keys):
                raise ValueError(
                    f"{label}: row {cells[1]!r} has {len(values)} values, header has {len(keys)}"
                )
            grid.append((canonical(cells[1], row_names, what), values))
        if model is None:
            raise ValueError(f"{label}: block without a model name")
        # Expand \multirow{-k}: the value also fills the k-1 (empty) cells above it.
        filled: dict[tuple[int, int], tuple[float, str, str]] = {}
        for r, (name, values) in enumerate(grid):
            for c, cell in enumerate(values):
                if cell.value is None:
                    continue
                for up in range(cell.span_up):
                    target = r - up
                    if up and grid[target][1][c].value is not None:
                        raise ValueError(
                            f"{label}: multirow over a non-empty cell at "
                            f"{grid[target][0]}/{keys[c]}"
                        )
                    filled[(target, c)] = (cell.value, cell.emphasis, name if up else "")
        for r, (name, values) in enumerate(grid):
            for c, cell in enumerate(values):
                dataset, metric = keys[c]
                if (r, c) not in filled:
                    if cell.not_available:
                        continue
                    raise ValueError(
                        f"{label}: empty cell {model}/{name}/{dataset}/{metric} "
                        "not covered by any multirow"
                    )
                value, emphasis, spans_from = filled[(r, c)]
                records.append(
                    {
                        "model": model,
                        "row": name,
                        "dataset": dataset,
                        "metric": metric,
                        "value": value,
                        "emphasis": emphasis,
                        "spans_from": spans_from,
                    }
                )
    return records


def generation_rows(tex: str) -> list[dict]:
    rows = []
    for label in GENERATION_TABLES:
        for rec in parse_table(tex, label, METHOD_NAMES, "method"):
            rows.append(
                {
                    "table": label.removeprefix("tab:"),
                    "model": rec["model"],
                    "method": rec["row"],
                    "dataset": rec["dataset"],
                    "latent": LATENT_OF_DATASET[rec["dataset"]],
                    "metric": rec["metric"],
                    "value": rec["value"],
                    "emphasis": rec["emphasis"],
                    "spans_from": rec["spans_from"],
                }
            )
    return rows


def uq_rows(tex: str) -> list[dict]:
    rows = []
    for label, (target, score) in UQ_TABLES.items():
        for rec in parse_table(tex, label, ESTIMATOR_NAMES, "estimator"):
            if rec["spans_from"]:
                raise ValueError(f"{label}: unexpected multirow value cell")
            rows.append(
                {
                    "table": label.removeprefix("tab:"),
                    "model": rec["model"],
                    "estimator": rec["row"],
                    "target": target,
                    "score": score,
                    "dataset": rec["dataset"],
                    "latent": LATENT_OF_DATASET[rec["dataset"]],
                    "metric": rec["metric"],
                    "value": rec["value"],
                    "emphasis": rec["emphasis"],
                }
            )
    return rows


# ---------------------------------------------------------------------------------------------
# Figure data: average PRR rank per task over the four LLMs
# ---------------------------------------------------------------------------------------------


def average_ranks(values: list[float]) -> list[float]:
    """Rank 1 = largest value (best PRR); ties share the average of their ranks."""
    order = sorted(range(len(values)), key=lambda i: -values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def prr_rank_rows(uq: list[dict], table: str = "uq_prr_bayes") -> list[dict]:
    """Mean PRR rank of each estimator per (dataset, metric) and per dataset (task).

    Ranks are taken among the 8 estimators within each (model, dataset, metric) cell of
    ``table``; ``level=metric`` averages over the four LLMs, ``level=task`` over the four
    LLMs and the task's metrics.
    """
    cells: dict[tuple[str, str, str], dict[str, float]] = {}
    for row in uq:
        if row["table"] == table:
            cells.setdefault((row["model"], row["dataset"], row["metric"]), {})[
                row["estimator"]
            ] = row["value"]
    per_metric: dict[tuple[str, str, str], list[float]] = {}
    per_task: dict[tuple[str, str], list[float]] = {}
    for (_model, dataset, metric), by_estimator in cells.items():
        names = list(by_estimator)
        for name, rank in zip(names, average_ranks([by_estimator[n] for n in names])):
            per_metric.setdefault((dataset, metric, name), []).append(rank)
            per_task.setdefault((dataset, name), []).append(rank)
    metric_order = {m: i for i, m in enumerate(METRIC_NAMES.values())}
    estimator_order = {e: i for i, e in enumerate(ESTIMATOR_NAMES.values())}
    out = []
    for (dataset, name), ranks in sorted(
        per_task.items(), key=lambda kv: (DATASET_ORDER.index(kv[0][0]), estimator_order[kv[0][1]])
    ):
        out.append(
            {
                "level": "task",
                "dataset": dataset,
                "latent": LATENT_OF_DATASET[dataset],
                "metric": "all",
                "estimator": name,
                "mean_rank": round(sum(ranks) / len(ranks), 6),
                "n_cells": len(ranks),
            }
        )
    for (dataset, metric, name), ranks in sorted(
        per_metric.items(),
        key=lambda kv: (
            DATASET_ORDER.index(kv[0][0]),
            metric_order[kv[0][1]],
            estimator_order[kv[0][2]],
        ),
    ):
        out.append(
            {
                "level": "metric",
                "dataset": dataset,
                "latent": LATENT_OF_DATASET[dataset],
                "metric": metric,
                "estimator": name,
                "mean_rank": round(sum(ranks) / len(ranks), 6),
                "n_cells": len(ranks),
            }
        )
    return out


# ---------------------------------------------------------------------------------------------
# I/O
# ---------------------------------------------------------------------------------------------


def find_tex(explicit: str | None = None) -> Path:
    """The paper source: ``explicit`` or the first existing default location."""
    candidates = (Path(explicit),) if explicit else DEFAULT_TEX_CANDIDATES
    for path in candidates:
        if path.is_file():
            return path
    raise FileNotFoundError(
        "paper source not found at "
        + ", ".join(map(str, candidates))
        + "; pass --tex PATH/task_awareness.tex"
    )


def write_csv(path: Path, columns: tuple[str, ...], rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow(
                {k: (f"{row[k]:g}" if isinstance(row[k], float) else row[k]) for k in columns}
            )
    tmp.replace(path)  # atomic: a reader never sees half a file


def transcribe(tex_path: Path, out_dir: Path) -> dict[str, int]:
    """Parse the tex and write the three CSVs; returns row counts per file."""
    tex = tex_path.read_text(encoding="utf-8")
    generation = generation_rows(tex)
    uq = uq_rows(tex)
    ranks = prr_rank_rows(uq)
    write_csv(out_dir / "generation.csv", GENERATION_COLUMNS, generation)
    write_csv(out_dir / "uq.csv", UQ_COLUMNS, uq)
    write_csv(out_dir / "prr_rank.csv", RANK_COLUMNS, ranks)
    return {"generation.csv": len(generation), "uq.csv": len(uq), "prr_rank.csv": len(ranks)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tex", help="path to task_awareness.tex (default: ../shared/paper/)")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="output folder")
    args = parser.parse_args(argv)
    counts = transcribe(find_tex(args.tex), Path(args.out))
    for name, count in counts.items():
        print(f"{name}: {count} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
