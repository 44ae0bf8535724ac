"""The per-prompt table of a cell: one row per prompt with its question, reference, samples,
each sample's labels, latent clusters, decisions as text, risks, every quality metric per method
and the reading audit (the reference's labels, what every label was matched to, warnings).

Built from the cell's artifacts with the task's latent space (its `key`, `render` and
`describe`), so it never names a task or a space. pandas only (no wandb): the tracker wraps
the frame in a `wandb.Table`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from pipeline.components.methods import BASELINE, OURS, method_column, methods
from pipeline.latent.base import LatentSpace
from pipeline.uncertainty.estimators import entropy_estimators

# the decisions the prompts table shows as text, under their columns (pipeline.components.methods): every
# method decided from the samples, and the decoding baseline
DECISION_COLUMNS = {method_column(m): m for m in (*methods("latent"), BASELINE)}
RISK_COLUMN = f"{method_column(OURS)}_risk"  # the decide stage's risk of OURS: bayes_risk
DIFFERS_COLUMN = f"{method_column(OURS)}_differs_from_{method_column(BASELINE)}"
SAMPLE_SEPARATOR = "\n"


def numbered(texts: Sequence[str]) -> str:
    """The M sample texts folded into one string, one numbered line each."""
    return SAMPLE_SEPARATOR.join(f"[{i}] {' '.join(str(t).split())}" for i, t in enumerate(texts))


def latent_clusters(space, samples: Sequence[tuple[Any, str]]) -> str:
    """The distinct latents of a prompt's parseable (latent, text) samples, most frequent first,
    each as `<count>x <its text>` (written by the space: `render`)."""
    counts: Counter = Counter()
    first: dict[Any, Any] = {}
    for latent, _ in samples:
        key = space.key(space.canonical(latent))
        counts[key] += 1
        first.setdefault(key, latent)
    lines = []
    for key, count in counts.most_common():
        text = " ".join(space.render(first[key], samples).split()) or "(empty)"
        lines.append(f"{count}x {text}")
    return SAMPLE_SEPARATOR.join(lines)


def same_decision(space, a: Any, b: Any) -> bool:
    """Whether two decisions are the same latent (both undecided counts as the same)."""
    if a is None or b is None:
        return a is None and b is None
    return space.key(space.canonical(a)) == space.key(space.canonical(b))


def _prompt_samples(space, latents, samples) -> dict[str, dict[str, Any]]:
    """prompt_id -> {"texts": all M sample texts, "parsed": parseable (latent, text) pairs}."""
    texts = {(r.prompt_id, int(r.sample_idx)): r.text for r in samples.itertuples()}
    out: dict[str, dict[str, Any]] = {}
    for r in samples.sort_values(["prompt_id", "sample_idx"]).itertuples():
        out.setdefault(r.prompt_id, {"texts": [], "parsed": []})["texts"].append(r.text)
    rows = latents[(latents["source"] == "sample") & latents["parse_ok"]]
    for r in rows.sort_values(["prompt_id", "sample_idx"]).itertuples():
        entry = out.setdefault(r.prompt_id, {"texts": [], "parsed": []})
        entry["parsed"].append(
            (space.from_json(r.latent), texts.get((r.prompt_id, int(r.sample_idx)), ""))
        )
    return out


def sample_labels(space, latents) -> dict[str, str]:
    """prompt_id -> each sample's labels as the task read them, one numbered line per sample
    ("[3] atlantic ocean; pacific", "[4] (unparseable)"); {} for spaces without labels."""
    if type(space).labels is LatentSpace.labels or latents is None or not len(latents):
        return {}
    out: dict[str, list[str]] = {}
    rows = latents[latents["source"] == "sample"].sort_values(["prompt_id", "sample_idx"])
    for r in rows.itertuples():
        labels = space.labels(space.from_json(r.latent)) if r.parse_ok else None
        shown = "(unparseable)" if labels is None else ("; ".join(labels) or "(no answer)")
        out.setdefault(r.prompt_id, []).append(f"[{int(r.sample_idx)}] {shown}")
    return {pid: SAMPLE_SEPARATOR.join(lines) for pid, lines in out.items()}


def readable_matches(reference_labels: Sequence[str], label_matches: str) -> str:
    """An audit's label matches as lines "label -> reference label (rule)" / "label -> none"."""
    import json

    lines = []
    for label, m in sorted(json.loads(label_matches).items()):
        target = reference_labels[m["answer"]] if m["answer"] is not None else "none"
        lines.append(
            f"{label} -> {target}" + (f" ({m['rule']})" if m["answer"] is not None else "")
        )
    return SAMPLE_SEPARATOR.join(lines)


def _decision_columns(space, decisions) -> dict[str, dict[str, Any]]:
    """prompt_id -> decision texts, the Bayes risk and whether the Bayes and beam decisions
    differ (pipeline.components.methods.OURS, BASELINE)."""
    by_method = {m: d.set_index("prompt_id") for m, d in decisions.groupby("method", sort=False)}
    out: dict[str, dict[str, Any]] = {}
    for prompt_id in decisions["prompt_id"].unique():
        row: dict[str, Any] = {}
        for column, method in DECISION_COLUMNS.items():
            d = by_method.get(method)
            row[column] = (
                str(d.at[prompt_id, "text"]) if d is not None and prompt_id in d.index else ""
            )
        ours, baseline = by_method.get(OURS), by_method.get(BASELINE)
        row[RISK_COLUMN] = float(ours.at[prompt_id, "risk"]) if ours is not None else math.nan
        actions = [
            space.from_json(d.at[prompt_id, "action"])
            if d is not None and prompt_id in d.index
            else None
            for d in (ours, baseline)
        ]
        row[DIFFERS_COLUMN] = not same_decision(space, *actions)
        out[prompt_id] = row
    return out


def _wide(frame, index: str, columns: Sequence[str], value: str, prefix: str):
    """A long frame pivoted to one column per `columns` combination, named `prefix/a/b`."""
    if frame is None or not len(frame):
        return None
    wide = frame.pivot_table(index=index, columns=list(columns), values=value, aggfunc="first")
    wide.columns = [
        "/".join([prefix, *map(str, c if isinstance(c, tuple) else (c,))]) for c in wide.columns
    ]
    return wide


def prompts_frame(
    space, artifacts: Mapping[str, Any], describe_reference, max_prompts: int | None = None
):
    """One row per prompt of the cell (the first `max_prompts` in dataset order; None = all).

    `artifacts`: the cell's frames by artifact name (dataset, samples, latents, decisions,
    uncertainty, quality; missing ones leave their columns out); `describe_reference(record)`:
    the reference of a DATASET row as text.
    """
    import pandas as pd

    dataset = artifacts["dataset"]
    if max_prompts is not None:
        dataset = dataset.head(max_prompts)
    per_prompt = _prompt_samples(space, artifacts["latents"], artifacts["samples"])
    decided = _decision_columns(space, artifacts["decisions"])
    rows = []
    for record in dataset.itertuples():
        entry = per_prompt.get(record.prompt_id, {"texts": [], "parsed": []})
        rows.append(
            {
                "prompt_id": record.prompt_id,
                "question": record.question,
                "reference": describe_reference(record),
                "samples": numbered(entry["texts"]),
                "n_samples": len(entry["texts"]),
                "n_parsed": len(entry["parsed"]),
                "latent_clusters": latent_clusters(space, entry["parsed"]),
                **decided.get(record.prompt_id, {}),
            }
        )
    out = pd.DataFrame(rows)
    labels = sample_labels(space, artifacts["latents"])
    if labels:
        out["sample_labels"] = out["prompt_id"].map(labels).fillna("")
    _add_audit_columns(out, artifacts.get("audit"))
    uncertainty = artifacts.get("uncertainty")
    for name in entropy_estimators() if uncertainty is not None else ():
        entropy = uncertainty[uncertainty["estimator"] == name]
        if len(entropy):
            out[name] = out["prompt_id"].map(entropy.set_index("prompt_id")["value"])
    for wide in (
        _wide(uncertainty, "prompt_id", ["estimator"], "value", "uncertainty"),
        _wide(artifacts.get("quality"), "prompt_id", ["metric", "method"], "value", "quality"),
    ):
        if wide is not None:
            out = out.join(wide, on="prompt_id")
    return out


def _add_audit_columns(out, audit) -> None:
    """The reading audit's columns (reference labels, label matches, warnings), in place; none
    without an audit."""
    if audit is None or not len(audit):
        return
    a = audit.set_index("prompt_id")
    out["reference_labels"] = out["prompt_id"].map(
        lambda p: "; ".join(a.at[p, "reference_labels"]) if p in a.index else ""
    )
    out["label_matches"] = out["prompt_id"].map(
        lambda p: (
            readable_matches(list(a.at[p, "reference_labels"]), a.at[p, "label_matches"])
            if p in a.index
            else ""
        )
    )
    out["reading_warnings"] = out["prompt_id"].map(
        lambda p: SAMPLE_SEPARATOR.join(a.at[p, "warnings"]) if p in a.index else ""
    )
