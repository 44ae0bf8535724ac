"""The paper's uncertainty: the Bayes risk of the Bayes-optimal action (decide stage output)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd


def bayes_risk_frame(
    risks: pd.DataFrame | Mapping[str, float], method: str = "bayes", estimator: str = "bayes_risk"
) -> pd.DataFrame:
    """UNCERTAINTY rows (prompt_id, `estimator`, risk).

    ``risks`` is decisions.parquet (rows of ``method`` are used; higher risk = less confident)
    or a mapping prompt_id -> risk. Rows with a missing risk (no parseable latent) are dropped.
    """
    if isinstance(risks, pd.DataFrame):
        missing = [c for c in ("prompt_id", "method", "risk") if c not in risks.columns]
        if missing:
            raise ValueError(
                f"decisions is missing column(s) {missing}; it needs prompt_id, method, risk"
            )
        sel = risks[risks["method"] == method]
        if sel.empty and len(risks):
            raise ValueError(
                f"decisions has no rows of method {method!r}; methods: {sorted(risks['method'].unique())}"
            )
        pairs = list(zip(sel["prompt_id"].astype(str), sel["risk"], strict=True))
    elif isinstance(risks, Mapping):
        pairs = [(str(k), v) for k, v in risks.items()]
    else:
        raise TypeError(
            f"risks must be the decisions DataFrame or a prompt_id -> risk mapping, got {type(risks).__name__}"
        )
    out = pd.DataFrame(
        [(pid, estimator, float(r)) for pid, r in pairs if r is not None and pd.notna(r)],
        columns=["prompt_id", "estimator", "value"],
    )
    return out.astype({"value": "float64"})
