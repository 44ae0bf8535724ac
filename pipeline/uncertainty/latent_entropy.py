"""Entropy of the empirical latent distribution H(p(l | x)) (paper Sec. 4, rebuttal baseline).

Two latents are equal when their canonical JSON encodings are equal (pipeline.latent.codec).
Entropy is in nats. numpy/stdlib only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd


def canonical_encoding(latent: object, space: str | None = None) -> str | None:
    """Canonical JSON of one latent; None for an unparsed latent ("null" / None).

    A ``str`` is taken as an artifact's JSON encoding and re-serialised with sorted keys and no
    spaces (so formatting differences do not split equal latents); other objects are encoded
    with ``pipeline.latent.codec.to_json(space, latent)``, which needs ``space``.
    """
    if latent is None:
        return None
    if isinstance(latent, str):
        try:
            payload = json.loads(latent)
        except ValueError as exc:
            raise ValueError(
                f"latent string is not JSON: {latent!r:.120}; pass the codec's encoding"
            ) from exc
    else:
        if space is None:
            raise ValueError(
                "non-string latents need space=... (a pipeline.latent space name) to be encoded"
            )
        from pipeline.latent.codec import to_json

        payload = json.loads(to_json(space, latent))
    if payload is None:
        return None
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def latent_entropy(
    latents_of_one_prompt: Sequence[object],
    weights: Sequence[float] | None = None,
    space: str | None = None,
) -> float:
    """Shannon entropy (nats) of the (weighted) empirical distribution over distinct latents.

    Unparsed latents (None / "null") are skipped together with their weights; NaN when none is left.
    """
    latents = list(latents_of_one_prompt)
    if weights is None:
        w = np.ones(len(latents), dtype=np.float64)
    else:
        w = np.asarray(list(weights), dtype=np.float64)
        if w.shape != (len(latents),):
            raise ValueError(
                f"weights has {w.size} entries for {len(latents)} latents; give one weight per latent"
            )
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError("weights must be finite and non-negative")
    mass: dict[str, float] = {}
    for latent, wi in zip(latents, w, strict=True):
        key = canonical_encoding(latent, space)
        if key is not None:
            mass[key] = mass.get(key, 0.0) + float(wi)
    total = sum(mass.values())
    if total <= 0:
        return math.nan
    p = np.array([m / total for m in mass.values() if m > 0])
    return float(-(p * np.log(p)).sum())


def latent_entropy_frame(latents_df: pd.DataFrame, source: str = "sample") -> pd.DataFrame:
    """UNCERTAINTY rows (prompt_id, "latent_entropy", value) from latents.parquet.

    Uses the rows of ``source`` with parse_ok; prompts without any parsed latent get no row.
    """
    needed = ["prompt_id", "source", "latent", "parse_ok"]
    missing = [c for c in needed if c not in latents_df.columns]
    if missing:
        raise ValueError(
            f"latents is missing column(s) {missing}; it needs {needed} (pipeline/artifacts/schema.py)"
        )
    rows = latents_df[(latents_df["source"] == source) & latents_df["parse_ok"].astype(bool)]
    out = [
        (str(pid), "latent_entropy", latent_entropy(list(group["latent"])))
        for pid, group in rows.groupby("prompt_id", sort=False)
    ]
    return pd.DataFrame(out, columns=["prompt_id", "estimator", "value"]).astype(
        {"value": "float64"}
    )
