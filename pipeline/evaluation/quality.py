"""Quality of one decision against its reference (paper appendix "Evaluation Metrics", DESIGN s6).

Pure functions of plain Python / numpy values. Text metrics (COMET, AlignScore) live elsewhere;
each task's own metric maths is in its folder (pipeline/tasks/<task>/metrics.py).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping

import numpy as np


def cosine_distance(a: object, b: object) -> float:
    """``1 - <a, b> / (|a| |b|)`` of two vectors, in [0, 2] (lower is better).

    Raises ValueError for vectors of different shapes, non-finite entries or zero norm (the
    direction of a zero vector is undefined).
    """
    x = np.asarray(a, dtype=float).reshape(-1)
    y = np.asarray(b, dtype=float).reshape(-1)
    if x.shape != y.shape:
        raise ValueError(f"vectors must have the same length, got {x.shape[0]} and {y.shape[0]}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("vectors must be finite (found NaN or inf)")
    nx, ny = np.linalg.norm(x), np.linalg.norm(y)
    if nx == 0 or ny == 0:
        raise ValueError("cosine distance is undefined for a zero vector")
    cos = float(np.dot(x, y) / (nx * ny))
    return 1.0 - min(1.0, max(-1.0, cos))  # clip rounding just outside [-1, 1]


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
