"""The simplex task's metric maths (DESIGN s6): KL(p* || prediction) with the prediction smoothed
over the union support (the `kl` metric in task.py scores a decision with it, after renaming its
answers to the reference answers they name)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping

import numpy as np

__all__ = ["kl_divergence"]


def _distribution(d: Mapping[Hashable, float], name: str) -> dict[Hashable, float]:
    if not isinstance(d, Mapping):
        raise TypeError(f"{name} must be a dict label -> probability, got {type(d).__name__}")
    out: dict[Hashable, float] = {}
    for label, value in d.items():
        v = float(value)
        if not math.isfinite(v) or v < 0:
            raise ValueError(
                f"{name}[{label!r}] = {value!r}: probabilities must be finite and >= 0"
            )
        out[label] = v
    total = sum(out.values())
    if total <= 0:
        raise ValueError(f"{name} has no probability mass (empty or all zero); nothing to compare")
    return {label: v / total for label, v in out.items()}


def kl_divergence(
    p_star: Mapping[Hashable, float], pred: Mapping[Hashable, float], eps: float = 1e-6
) -> float:
    """``KL(p* || pred)`` in nats, with pred smoothed over the union support (lower is better).

    Both dicts are aligned on the union of their labels (K labels, missing = 0) and renormalised
    to sum to 1 (MAQA* probabilities may not). The prediction is smoothed as
    ``pred <- (pred + eps) / (1 + K eps)`` so labels it misses cost ``log(p*/eps')`` instead of
    infinity; terms with ``p* = 0`` contribute 0.

    Raises ValueError for negative / non-finite probabilities, no mass, or ``eps <= 0``;
    TypeError if either side is not a mapping.
    """
    if not (isinstance(eps, int | float) and math.isfinite(eps) and eps > 0):
        raise ValueError(f"eps must be a positive number, got {eps!r}")
    p = _distribution(p_star, "p_star")
    a = _distribution(pred, "pred")
    support = list(dict.fromkeys([*p, *a]))  # union, in a deterministic order
    k = len(support)
    p_vec = np.array([p.get(label, 0.0) for label in support])
    a_vec = (np.array([a.get(label, 0.0) for label in support]) + eps) / (1.0 + k * eps)
    mask = p_vec > 0
    return float(np.sum(p_vec[mask] * np.log(p_vec[mask] / a_vec[mask])))
