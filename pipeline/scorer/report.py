"""Why each answer was chosen, and how far to trust the risk: a readable report of scored prompts.

`write_report(df, directory)` (`pipeline.report`, `python -m pipeline.score ... --report DIR`)
writes, from the scorer's per-prompt frame:
- `riskiest.md`: the riskiest prompts (and, with references, the most surprising ones) as text:
  question, Bayes answer with its confidence, the latent distribution, how responses were read;
- `risk_coverage.png/.pdf` (with references): the mean quality of the Bayes answer over the
  prompts kept when the riskiest are abstained on, ranked by each uncertainty column, beside the
  oracle (ranked by the realised quality) and random abstention (the overall mean);
- `calibration.png/.pdf` (with references, a quality in [0, 1]): predicted normalised risk
  (1 - confidence) against the realised loss (1 - quality, or the loss itself), in bins of equal
  count, with the count of each bin. For classes both are the 0-1 loss (a calibration in the
  strict sense); for the other tasks the two losses differ (e.g. normalised Hamming to a sample
  vs 1 - F1 to the reference) and the figure reads as a monotone check: more predicted, more
  realised.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pipeline.components.methods import METHODS, OURS, method_column
from pipeline.uncertainty.estimators import entropy_estimators

OURS_COLUMN = method_column(OURS)  # "bayes": its text, risk and quality columns lead the output
RISK_COLUMN = f"{OURS_COLUMN}_risk"  # the decide stage's risk of our decision (the Bayes risk)
CONFIDENCE_COLUMN = "confidence"  # our decision's expected task quality (LatentSpace.confidence)
ENTROPY_COLUMNS = tuple(entropy_estimators())  # the latent entropy


def uncertainty_columns(df) -> list[str]:
    """The per-prompt uncertainties of the frame: our decision's risk first, then the others
    (latent entropy, ...) that the scorer wrote."""
    return [c for c in (RISK_COLUMN, *ENTROPY_COLUMNS) if c in df]


def quality_target(df) -> tuple[str, str, bool] | None:
    """(column, metric, higher_is_better) of the Bayes answer's first quality metric, or None
    without references."""
    from pipeline.tasks.contract import METRICS

    prefix = f"quality_{OURS_COLUMN}_"  # from the columns: a slice or concat keeps them
    metrics = sorted(
        c[len(prefix) :]
        for c in df.columns
        if c.startswith(prefix) and c[len(prefix) :] in METRICS and df[c].notna().any()
    )
    if not metrics:
        return None
    return f"{prefix}{metrics[0]}", metrics[0], bool(METRICS[metrics[0]].higher_is_better)


def risk_coverage(df, target: tuple[str, str, bool]):
    """Rows (ranking, coverage, quality): the mean quality over the `k` least uncertain prompts
    for k = n..1 under each uncertainty column, the oracle and random abstention."""
    import numpy as np
    import pandas as pd

    col, _, higher = target
    rows = df.dropna(subset=[col])
    q = rows[col].to_numpy(float)
    n = len(q)
    if n == 0:
        return pd.DataFrame(columns=["ranking", "coverage", "quality"])
    kept = np.arange(n, 0, -1)
    out = []

    def curve(name: str, order) -> None:
        means = np.cumsum(q[order])[::-1] / kept  # keep the first k of `order`
        out.extend({"ranking": name, "coverage": k / n, "quality": m} for k, m in zip(kept, means))

    for u in uncertainty_columns(rows):
        values = rows[u].to_numpy(float)
        curve(u, np.argsort(np.where(np.isnan(values), np.inf, values), kind="stable"))
    curve("oracle", np.argsort(-q if higher else q, kind="stable"))
    out.extend({"ranking": "random", "coverage": k / n, "quality": float(q.mean())} for k in kept)
    return pd.DataFrame(out)


def calibration_bins(df, target: tuple[str, str, bool], n_bins: int = 5):
    """Bins of equal count by predicted normalised risk (1 - confidence): mean predicted risk,
    mean realised loss and count per bin; None when the quality is not in [0, 1]."""
    import numpy as np
    import pandas as pd

    col, _, higher = target
    rows = df.dropna(subset=[col, CONFIDENCE_COLUMN]) if CONFIDENCE_COLUMN in df else df.iloc[:0]
    q = rows[col].to_numpy(float)
    if not len(q) or q.min() < 0 or q.max() > 1:
        return None
    predicted = 1.0 - rows[CONFIDENCE_COLUMN].to_numpy(float)
    realised = 1.0 - q if higher else q
    order = np.argsort(predicted, kind="stable")
    bins = [b for b in np.array_split(order, min(n_bins, len(order))) if len(b)]
    return pd.DataFrame(
        [
            {
                "predicted": float(predicted[b].mean()),
                "realised": float(realised[b].mean()),
                "n": len(b),
            }
            for b in bins
        ]
    )


def _label(column: str) -> str:
    if column == RISK_COLUMN:
        return f"{METHODS[OURS].label}: its risk"
    return column.replace("_", " ")


def draw_risk_coverage(curves, target: tuple[str, str, bool]):
    from pipeline.reporting.figures import _plt

    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    styles = {"oracle": dict(color="0.3", ls=":"), "random": dict(color="0.6", ls="--")}
    for name, c in curves.groupby("ranking", sort=False):
        ax.plot(
            c["coverage"],
            c["quality"],
            label=_label(name),
            lw=2 if name == RISK_COLUMN else 1.2,
            **styles.get(name, {}),
        )
    _, metric, higher = target
    ax.set_xlabel("coverage (share of prompts answered; the riskiest abstained on)")
    ax.set_ylabel(
        f"mean {metric} of the {METHODS[OURS].label} answer "
        f"({'higher' if higher else 'lower'} is better)"
    )
    ax.invert_xaxis()
    ax.legend(fontsize=8)
    ax.set_title(f"risk-coverage, {int(curves.groupby('ranking').size().max())} prompts")
    return fig


def draw_calibration(bins, target: tuple[str, str, bool]):
    from pipeline.reporting.figures import _plt

    plt = _plt()
    fig, ax = plt.subplots(figsize=(4.2, 4.0))
    ax.plot([0, 1], [0, 1], color="0.6", ls="--", lw=1, label="calibrated")
    ax.plot(bins["predicted"], bins["realised"], marker="o", label="bins of equal count")
    for r in bins.itertuples():
        ax.annotate(
            f"n={r.n}",
            (r.predicted, r.realised),
            textcoords="offset points",
            xytext=(4, -10),
            fontsize=7,
        )
    _, metric, higher = target
    ax.set_xlabel("predicted normalised risk (1 - confidence)")
    ax.set_ylabel(f"realised loss ({'1 - ' if higher else ''}{metric})")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=8, loc="upper left")
    return fig


def _loss_column(df) -> tuple[str, bool] | None:
    """The quality column of the Bayes answer to judge surprise by, and whether higher is
    better (the first metric of the quality summary)."""
    target = quality_target(df)
    return None if target is None else (target[0], target[2])


def _audit_entry(row, loss: tuple[str, bool] | None) -> str:
    """One prompt of the audit: its scores, question, reference and Bayes answer, how its
    samples counted, and how its responses and reference were read and matched."""
    lines = [_audit_head(row, loss)]
    lines.append(f"  question: {' '.join(str(row.question).split())[:300]}")
    if isinstance(getattr(row, "reference_labels", None), list):
        lines.append(f"  reference: {'; '.join(row.reference_labels) or '(none)'}")
    said = getattr(row, "abstention", "") or ""
    lines.append(
        f"  Bayes answer: {getattr(row, f'{OURS_COLUMN}_text') or '(none)'}"
        + (f" - {said}" if said else "")
    )
    counts = [
        (getattr(row, name, 0) or 0, what)
        for name, what in (
            ("n_no_answer", "counted as 'no answer'"),
            ("n_discarded", "discarded"),
            ("n_truncated", "cut by the token limit"),
        )
    ]
    if any(k for k, _ in counts):
        lines.append(
            f"  samples: {row.n_parsed} of {row.n_samples} read; "
            + ", ".join(f"{k} {what}" for k, what in counts if k)
        )
    if isinstance(sampling := getattr(row, "sampling", None), str):
        lines.append(f"  sampled with: {sampling}")
    if (shown := distribution_line(getattr(row, "latent_distribution", None))) is not None:
        lines.append(f"  latent distribution: {shown}")
    return "\n".join(lines + _reading_lines(row))


def _audit_head(row, loss: tuple[str, bool] | None) -> str:
    """The audit entry's first line: the prompt's id, Bayes risk, confidence, entropies and
    (with a reference) the Bayes answer's quality."""
    confidence = getattr(row, CONFIDENCE_COLUMN, math.nan)
    return (
        f"{row.prompt_id}: Bayes risk {getattr(row, RISK_COLUMN):.3f}"
        + (f" (confidence {confidence:.2f})" if not math.isnan(confidence) else "")
        + "".join(f", {e.replace('_', ' ')} {getattr(row, e):.3f}" for e in ENTROPY_COLUMNS)
        + (
            f", {loss[0].removeprefix(f'quality_{OURS_COLUMN}_')} of the Bayes answer "
            f"{getattr(row, loss[0]):.3f}"
            if loss and not math.isnan(getattr(row, loss[0]))
            else ""
        )
    )


def _reading_lines(row) -> list[str]:
    """How the prompt's responses were read (and, with a reference, matched to it), and the
    warnings of that reading: the audit entry's last lines."""
    lines = []
    labels = getattr(row, "response_labels", None)
    labels = json.loads(labels) if isinstance(labels, str) else labels  # a file's JSON
    if isinstance(labels, list):
        from collections import Counter

        counts = Counter("(unparseable)" if x is None else "{" + ", ".join(x) + "}" for x in labels)
        lines.append(
            "  responses read as: " + "; ".join(f"{n}x {k}" for k, n in counts.most_common())
        )
        if len(labels) >= 5 and getattr(row, "n_distinct_texts", 0) == 1:
            lines.append(
                f"  warning: all {len(labels)} samples are the same text: the "
                "confidence reflects the sampling settings, not the model's uncertainty"
            )
    matches = getattr(row, "label_matches", None)
    if isinstance(matches, str):
        from pipeline.tracking.prompt_table import readable_matches

        lines.append(
            "  matches: " + readable_matches(row.reference_labels, matches).replace("\n", "; ")
        )
    warned = getattr(row, "reading_warnings", None)
    if isinstance(warned, list) and warned:
        lines.append("  warnings: " + "; ".join(warned))
    return lines


def distribution_line(value: Any, limit: int = 8) -> str | None:
    """'pacific 100%, atlantic 33%, ...' from the latent_distribution (a dict, or a file's JSON;
    None: no labels)."""
    dist = json.loads(value) if isinstance(value, str) else value
    if not isinstance(dist, dict):
        return None
    if not dist:
        return None
    items = list(dist.items())
    shown = ", ".join(f"{k} {100 * v:.0f}%" for k, v in items[:limit])
    return shown + (f", ... ({len(items)} labels)" if len(items) > limit else "")


def riskiest_first(df):
    """The decided prompts, least confident first (the `confidence` column: the Bayes answer's
    expected task quality), ties by the larger Bayes risk; by the risk alone for a frame
    without confidences (a space with neither agreement nor bound)."""
    ranked = df.dropna(subset=[RISK_COLUMN])
    if CONFIDENCE_COLUMN in ranked and ranked[CONFIDENCE_COLUMN].notna().any():
        return (
            ranked.assign(_c=ranked[CONFIDENCE_COLUMN].fillna(-1.0))
            .sort_values(["_c", RISK_COLUMN], ascending=[True, False], kind="stable")
            .drop(columns="_c")
        )
    return ranked.sort_values(RISK_COLUMN, ascending=False, kind="stable")


def audit_report(df, n: int) -> str:
    """The `n` riskiest prompts (least confident first, `riskiest_first`) and (with references)
    the `n` most surprising ones (the Bayes answer worst among the most confident half), each as text: question, reference, Bayes answer,
    how the responses were read and matched, warnings."""
    loss = _loss_column(df)
    ranked = riskiest_first(df)
    parts = [f"The {min(n, len(ranked))} riskiest prompts:"]
    parts += [_audit_entry(r, loss) for r in ranked.head(n).itertuples()]
    if loss is not None:
        confident = ranked.iloc[len(ranked) // 2 :].dropna(subset=[loss[0]])
        worst = confident.sort_values(loss[0], ascending=loss[1], kind="stable").head(n)
        parts.append(
            f"\nThe {len(worst)} most surprising prompts (most confident half, worst "
            f"{loss[0].removeprefix(f'quality_{OURS_COLUMN}_')} of the Bayes answer):"
        )
        parts += [_audit_entry(r, loss) for r in worst.itertuples()]
    return "\n\n".join(parts)


def write_report(df, directory: str | Path, n: int = 10) -> dict[str, Path]:
    """riskiest.md and (with references) risk_coverage and calibration figures in `directory`;
    returns name -> path of what was written."""
    from pipeline.artifacts.store import atomic_write_text
    from pipeline.reporting.figures import _save

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    target = quality_target(df)
    head = [
        f"# Scored prompts: {len(df)}",
        "",
        f"Prompts ranked by confidence, lowest first: the expected task quality of the "
        f"{METHODS[OURS].label} answer under the samples (docs/score.md); the distribution "
        "lists each label with the share of samples holding it.",
        "",
    ]
    if target is None:
        head += ["No references were given: no quality, risk-coverage or calibration figure.", ""]
    text = "\n".join(head) + "```\n" + audit_report(df, n) + "\n```\n"
    atomic_write_text(directory / "riskiest.md", text)
    written["riskiest"] = directory / "riskiest.md"
    if target is not None:
        curves = risk_coverage(df, target)
        if len(curves):
            atomic_write_text(directory / "risk_coverage.csv", curves.to_csv(index=False))
            written["risk_coverage"] = _save(
                draw_risk_coverage(curves, target), directory, "risk_coverage"
            )
        bins = calibration_bins(df, target)
        if bins is not None and len(bins):
            atomic_write_text(directory / "calibration.csv", bins.to_csv(index=False))
            written["calibration"] = _save(draw_calibration(bins, target), directory, "calibration")
    return written
