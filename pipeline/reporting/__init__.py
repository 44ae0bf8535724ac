"""Report: every table and figure of the paper from the artifacts of all (model, dataset) cells
of an experiment, with the paper's published numbers (results/paper/*.csv) beside ours.

    python -m pipeline stage=report experiment=default
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from pipeline.artifacts.store import atomic_write_text, cache_key
from pipeline.reporting import figures
from pipeline.reporting.paper import ABLATION_DATASET, PRR_FIGURE
from pipeline.reporting.paper import FIGURE_NAMES as FIGURE_NAMES  # re-exported
from pipeline.reporting.paper import TABLE_NAMES as TABLE_NAMES  # re-exported
from pipeline.runtime.resources import paper_dir

log = logging.getLogger("pipeline")

PAPER_DIR = paper_dir()  # results/paper in a checkout, pipeline/paper in a wheel
# What a full report writes (TABLE_NAMES, FIGURE_NAMES) and every other name of the paper's
# datasets, tables and figures: pipeline.reporting.paper.
# v3: extras (F-beta rows) marked and never best; Fig. 2a over the paper's estimators; Figs. 3,
# 4-9 over the compared models (no 72B); one colour per estimator. v4: tables with n and
# bootstrap intervals, no best where n is too small; figures' empty panels and per-bin n.
# v5: no best where intervals overlap; bayes_vs_beam (paired bootstrap) per dataset.
# v6: paper rows keep the paper's own best / runner-up marks (a merged cell marked once);
# Fig. 2a's paper panel titled as derived from Table 3; Fig. 2b over the compared models.
# v7: the beam-target tables (5-6) note that P(True) reads the greedy text.
# v8: a table using a dataset read from a released file (MAQA's JSON) names the file's SHA-256,
# origin and pin (tables.data_note).
# (Figure numbers: the paper's figure environments in order, pipeline.reporting.paper.)
REPORT_VERSION = 8


def figure_options(cell) -> dict[str, Any]:
    """The cell's report_figures.* (defaults where unset)."""
    from pipeline.components.parts import thaw
    from pipeline.reporting.paper import ENTROPY_DATASET, PAPER_LLMS
    from pipeline.reporting.tables import MIN_N_BEST

    def get(key, default):
        return thaw(getattr(cell.report_figures, key, default))

    return {
        "entropy_model": get("entropy_model", "") or "",
        "entropy_dataset": get("entropy_dataset", ENTROPY_DATASET) or ENTROPY_DATASET,
        "entropy_pooled": bool(get("entropy_pooled", False)),
        "rank_models": list(get("rank_models", list(PAPER_LLMS))),
        "min_n_best": int(get("min_n_best", MIN_N_BEST)),
    }


def build_report(cell) -> dict[str, Any]:
    """Write the report's tables and figures under cell.results_dir, or skip when its manifest's
    key (the settings and every input artifact's key) matches and its files are all there."""
    from pipeline.reporting.collect import find_cells

    results = Path(cell.results_dir)
    cells = find_cells(cell.output_root, cell.experiment, list(cell.report_models) or None)
    _check_report_models(cell)
    options = figure_options(cell)
    intervals = _intervals(cell)
    key = _report_key(cell, cells, options, intervals)
    manifest_path = results / ".report.manifest.json"
    previous = _read_manifest(manifest_path)
    if previous.get("cache_key") == key and all(
        Path(p).exists() for p in previous.get("files", [])
    ):
        log.info("[report] up to date (key %s), skipped", key)
        _print_where(results, cells)
        return {"skipped": True, "files": previous["files"]}

    t0 = time.perf_counter()
    # The manifest vouches for the files: gone before any is rewritten, written after the last,
    # so a report killed half-way is redone on the next run instead of "up to date".
    manifest_path.unlink(missing_ok=True)
    tables, figs, versus, verdicts = _write_tables_and_figures(
        cell, cells, options, intervals, results / "tables", results / "figures"
    )
    files = sorted(str(p) for p in (results / "tables").glob("*")) + sorted(
        str(p) for p in (results / "figures").glob("*")
    )
    atomic_write_text(
        manifest_path,
        json.dumps(
            {
                "cache_key": key,
                "files": files,
                "cells": [f"{c.model}/{c.dataset}" for c in cells],
                "wall_time_s": time.perf_counter() - t0,
            },
            indent=2,
        ),
    )
    _log_to_tracker(cell, cells, tables, figs)
    _print_where(results, cells)
    if verdicts:
        print(
            "Bayes answer vs beam search:\n" + "".join(f"  {line}\n" for line in verdicts),
            flush=True,
        )
    return {
        "skipped": False,
        "files": files,
        "tables": tables,
        "figures": figs,
        "bayes_vs_beam": versus,
    }


def _check_report_models(cell) -> None:
    """Refuse a report_models entry with no outputs: a misspelt model would silently drop out
    of every table."""
    if not cell.report_models:
        return
    from pipeline.reporting.collect import find_cells

    present = {c.model for c in find_cells(cell.output_root, cell.experiment)}
    absent = sorted(set(cell.report_models) - present)
    if absent:
        from pipeline.runtime.errors import ConfigError

        raise ConfigError(
            f"report_models has {absent} with no outputs under "
            f"{Path(cell.output_root) / cell.experiment}; models with outputs: "
            f"{', '.join(sorted(present)) or 'none'}"
        )


def _intervals(cell) -> dict[str, Any]:
    """The bootstrap intervals' settings, as quality_means and bayes_vs_beam take them."""
    ev = cell.evaluation
    return {
        "n_bootstrap": int(ev.n_bootstrap),
        "alpha": float(ev.ci_alpha),
        "seed": int(ev.seed),
    }


def _report_key(cell, cells, options: dict[str, Any], intervals: dict[str, Any]) -> str:
    """The report's cache key: its settings and every input artifact's key."""
    from pipeline.reporting.collect import input_keys

    return cache_key(
        {
            "experiment": cell.experiment,
            "max_rejection": cell.evaluation.max_rejection,
            "figures": options,
            "intervals": intervals,
            "report_models": list(cell.report_models or []),
            "version": REPORT_VERSION,
        },
        input_keys(cells),
    )


def _read_manifest(path: Path) -> dict[str, Any]:
    """The last report's manifest ({} where none was written or it is unreadable)."""
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _write_tables_and_figures(cell, cells, options, intervals, tables_dir: Path, figures_dir: Path):
    """Every table and figure of the report: (tables, figures, bayes_vs_beam, its verdicts)."""
    import pandas as pd

    from pipeline.reporting.collect import data_files, per_prompt, quality_means, uq_scores
    from pipeline.reporting.tables import build_tables, data_note

    paper_gen = pd.read_csv(PAPER_DIR / "generation.csv")
    paper_uq = pd.read_csv(PAPER_DIR / "uq.csv")
    paper_rank = pd.read_csv(PAPER_DIR / "prr_rank.csv")
    quality = quality_means(cells, **intervals)
    scores = uq_scores(cells)
    # which released file each such dataset's rows came from (its SHA-256, origin, pin)
    data_notes = {d: data_note(d, sources) for d, sources in data_files(cells).items()}
    tables = build_tables(
        quality,
        scores,
        paper_gen,
        paper_uq,
        tables_dir,
        min_n=options["min_n_best"],
        data_notes=data_notes,
    )
    quality_rows = per_prompt(cells, "quality")  # read once: here, and the figures below
    versus, verdicts = _write_bayes_vs_beam(quality_rows, intervals, data_notes, tables_dir)

    unc = per_prompt(cells, "uncertainty")
    figs = _risk_figures(
        scores, unc, paper_rank, paper_uq, options, list(cell.report_models or []), figures_dir
    )
    # Figs. 2b, 3, 4-6 and 7-9 show the models Fig. 2a averages (the paper's four LLMs when they
    # ran): the 72B, reported apart in the paper (Tables 7-8), is neither a panel nor pooled.
    compared_models, _ = figures.rank_models({c.model for c in cells}, options["rank_models"])
    compared = [c for c in cells if c.model in compared_models]
    per_q = (
        quality_rows[quality_rows["model"].isin(compared_models)].reset_index(drop=True)
        if len(quality_rows)
        else quality_rows
    )
    unc = unc[unc["model"].isin(compared_models)] if len(unc) else unc
    figs.update(_improvement_figures(per_q, unc, tables_dir, figures_dir))
    ablation_cells = [c for c in compared if c.canonical == ABLATION_DATASET]
    figs["samples_ablation"] = _samples_ablation_figure(
        ablation_cells, cell.evaluation, tables_dir, figures_dir
    )
    return tables, figs, versus, verdicts


def _write_bayes_vs_beam(quality_rows, intervals, data_notes, tables_dir: Path):
    """Does the Bayes answer beat beam search? One line per (model, dataset, metric), written to
    bayes_vs_beam.csv and .md: (the frame, its verdict lines)."""
    from pipeline.reporting.collect import bayes_vs_beam, bayes_vs_beam_lines

    versus = bayes_vs_beam(quality_rows, **intervals)
    versus.to_csv(tables_dir / "bayes_vs_beam.csv", index=False)
    verdicts = bayes_vs_beam_lines(versus, intervals["alpha"])
    used = (
        [data_notes[d] for d in dict.fromkeys(versus["dataset"]) if d in data_notes]
        if len(versus)
        else []
    )
    (tables_dir / "bayes_vs_beam.md").write_text(
        "## Bayes answer vs beam search\n\n"
        + "".join(f"- {line}\n" for line in verdicts)
        + "".join(f"\n{note}\n" for note in used)
        if verdicts
        else "## Bayes answer vs beam search\n\n(no data)\n",
        encoding="utf-8",
    )
    return versus, verdicts


def _risk_figures(
    scores, unc, paper_rank, paper_uq, options, report_models: list[str], figures_dir: Path
) -> dict[str, Any]:
    """The PRR rank figure, the PRR figure and latent entropy against risk (pooled too where
    asked)."""
    figs = {
        "uq_prr_rank": figures.fig_prr_rank(
            scores, paper_rank, figures_dir, models=options["rank_models"]
        ),
        PRR_FIGURE: figures.fig_maqa_prr(
            scores, paper_uq, figures_dir, models=options["rank_models"]
        ),
        "latent_entropy_vs_risk": figures.fig_entropy_vs_risk(
            unc,
            figures_dir,
            model=options["entropy_model"],
            dataset=options["entropy_dataset"],
            report_models=report_models,
        ),
    }
    if options["entropy_pooled"]:
        figs["latent_entropy_vs_risk_pooled"] = figures.fig_entropy_vs_risk_pooled(unc, figures_dir)
    else:  # an earlier report's pooled variant would otherwise stay listed in the manifest
        for ext in ("png", "pdf"):
            (figures_dir / f"latent_entropy_vs_risk_pooled.{ext}").unlink(missing_ok=True)
    return figs


def _improvement_figures(per_q, unc, tables_dir: Path, figures_dir: Path) -> dict[str, Any]:
    """The Hamming improvement over the compared models, pooled and per model (csv and
    figure each)."""
    improvement = figures.improvement_table(per_q, unc)
    improvement.to_csv(tables_dir / "hamming_improvement.csv", index=False)
    figs = {"hamming_improvement": figures.fig_improvement(improvement, figures_dir)}
    for name, (dataset, metric, _) in figures.IMPROVEMENT_FIGURES.items():
        per_model = figures.improvement_table(
            per_q, unc, dataset=dataset, metric=metric, per_model=True
        )
        per_model.to_csv(tables_dir / f"{name}.csv", index=False)
        figs[name] = figures.fig_improvement_per_model(per_model, figures_dir, name)
    return figs


def _samples_ablation_figure(ablation_cells, evaluation, tables_dir: Path, figures_dir: Path):
    """The number-of-samples ablation over the ablation dataset's cells (an empty table where
    none ran): its csv and figure."""
    import pandas as pd

    from pipeline.reporting.ablation import COLUMNS as ABLATION_COLUMNS
    from pipeline.reporting.ablation import AblationSettings, samples_ablation
    from pipeline.reporting.collect import per_prompt

    ablation = pd.DataFrame(columns=ABLATION_COLUMNS)
    if ablation_cells:
        ablation = samples_ablation(
            per_prompt(ablation_cells, "latents"),
            per_prompt(ablation_cells, "dataset"),
            per_prompt(ablation_cells, "quality"),
            ablation_cells[0].space,
            AblationSettings(max_rejection=evaluation.max_rejection, seed=evaluation.seed),
        )
    ablation.to_csv(tables_dir / "samples_ablation.csv", index=False)
    return figures.fig_samples_ablation(ablation, figures_dir)


def _log_to_tracker(cell, cells, tables, figs) -> None:
    """The report's tables and figures to the tracker (W&B where configured)."""
    from pipeline.tracking import make_tracker

    tracker = make_tracker(cell, report=True)
    try:
        tracker.use_cells(cells)
        tracker.log_report(
            {name: wide.reset_index() if len(wide) else wide for name, wide in tables.items()}, figs
        )
    finally:
        tracker.finish()


def _print_where(results: Path, cells) -> None:
    print(
        f"\nReport over {len(cells)} cell(s): tables in {results / 'tables'} (md, tex, csv), "
        f"figures in {results / 'figures'} (png, pdf).",
        flush=True,
    )
