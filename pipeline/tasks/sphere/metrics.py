"""The sphere task's metric maths: the cosine distance of two embeddings (the `cosine_distance`
metric in task.py scores a decision's embedding against the reference's with it)."""

from __future__ import annotations

import numpy as np

__all__ = ["cosine_distance"]


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
