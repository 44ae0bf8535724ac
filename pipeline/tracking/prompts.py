"""The per-prompt table of a cell: one row per prompt with its question, reference, samples,
latent clusters, decisions as text, risks and every quality metric per method.

Built from the cell's artifacts with the task's latent space (its `key`, `render` and
`describe`), so it never names a task or a space. pandas only (no wandb): the tracker wraps
the frame in a `wandb.Table`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

# Decision methods shown as text columns: column name -> decide-stage method.
DECISION_COLUMNS = {"bayes": "bayes", "l_map": "map", "l_sample": "sample_mbr", "beam": "beam"}
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
        entry["parsed"].append((space.from_json(r.latent), texts.get((r.prompt_id, int(r.sample_idx)), "")))
    return out


def _decision_columns(space, decisions) -> dict[str, dict[str, Any]]:
    """prompt_id -> decision texts, the Bayes risk and whether Bayes and beam differ."""
    by_method = {m: d.set_index("prompt_id") for m, d in decisions.groupby("method", sort=False)}
    out: dict[str, dict[str, Any]] = {}
    for prompt_id in decisions["prompt_id"].unique():
        row: dict[str, Any] = {}
        for column, method in DECISION_COLUMNS.items():
            d = by_method.get(method)
            row[column] = str(d.at[prompt_id, "text"]) if d is not None and prompt_id in d.index else ""
        bayes, beam = by_method.get("bayes"), by_method.get("beam")
        row["bayes_risk"] = float(bayes.at[prompt_id, "risk"]) if bayes is not None else math.nan
        actions = [space.from_json(d.at[prompt_id, "action"]) if d is not None and prompt_id in d.index
                   else None for d in (bayes, beam)]
        row["bayes_differs_from_beam"] = not same_decision(space, *actions)
        out[prompt_id] = row
    return out


def _wide(frame, index: str, columns: Sequence[str], value: str, prefix: str):
    """A long frame pivoted to one column per `columns` combination, named `prefix/a/b`."""
    if frame is None or not len(frame):
        return None
    wide = frame.pivot_table(index=index, columns=list(columns), values=value, aggfunc="first")
    wide.columns = ["/".join([prefix, *map(str, c if isinstance(c, tuple) else (c,))])
                    for c in wide.columns]
    return wide


def prompts_frame(space, artifacts: Mapping[str, Any], describe_reference,
                  max_prompts: int | None = None):
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
        rows.append({"prompt_id": record.prompt_id, "question": record.question,
                     "reference": describe_reference(record), "samples": numbered(entry["texts"]),
                     "n_samples": len(entry["texts"]), "n_parsed": len(entry["parsed"]),
                     "latent_clusters": latent_clusters(space, entry["parsed"]),
                     **decided.get(record.prompt_id, {})})
    out = pd.DataFrame(rows)
    uncertainty = artifacts.get("uncertainty")
    if uncertainty is not None and "latent_entropy" in set(uncertainty["estimator"]):
        entropy = uncertainty[uncertainty["estimator"] == "latent_entropy"]
        out["latent_entropy"] = out["prompt_id"].map(entropy.set_index("prompt_id")["value"])
    for wide in (_wide(uncertainty, "prompt_id", ["estimator"], "value", "uncertainty"),
                 _wide(artifacts.get("quality"), "prompt_id", ["metric", "method"], "value", "quality")):
        if wide is not None:
            out = out.join(wide, on="prompt_id")
    return out
