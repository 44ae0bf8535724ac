"""Independent reference implementations for the set-family space tests (sets, F-beta sets,
graphs as sets of edges): plain Python loops, no reuse of the package's formulas; and the
random instances and the oceans example they are checked on."""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence

import numpy as np

OCEANS = (
    [frozenset({"Pacific", "Arctic"})] * 14
    + [frozenset({"Atlantic", "Pacific", "Arctic"})] * 3
    + [frozenset({"Pacific"})] * 3
)


def random_instance(rng: np.random.Generator, labels: list, max_m: int = 10):
    m = int(rng.integers(1, max_m + 1))
    latents = []
    for _ in range(m):
        keep = rng.random(len(labels)) < rng.uniform(0.1, 0.9)
        latents.append(frozenset(lab for lab, k in zip(labels, keep) if k))
    kind = rng.integers(3)
    if kind == 0:
        weights = None
    elif kind == 1:
        weights = rng.integers(0, 4, size=m).astype(float)
        if weights.sum() == 0:
            weights[0] = 1.0
    else:
        weights = rng.random(m)
    return latents, weights


def all_subsets(universe: Sequence[Hashable]):
    for r in range(len(universe) + 1):
        for combo in itertools.combinations(universe, r):
            yield frozenset(combo)


def hamming_risk(candidate: frozenset, latents, weights) -> float:
    total = sum(weights)
    return (
        sum(
            w * sum(1 for y in candidate | lat if (y in candidate) != (y in lat))
            for lat, w in zip(latents, weights)
        )
        / total
    )


def f_beta_pr(truth: frozenset, pred: frozenset, beta: float) -> float:
    """F_beta through precision and recall (a different route than the package's formula)."""
    if not truth and not pred:
        return 1.0
    tp = len(truth & pred)
    if tp == 0:
        return 0.0
    precision = tp / len(pred)
    recall = tp / len(truth)
    return (1 + beta**2) * precision * recall / (beta**2 * precision + recall)


def fbeta_risk(candidate: frozenset, latents, weights, beta: float) -> float:
    total = sum(weights)
    return (
        sum(w * (1.0 - f_beta_pr(lat, candidate, beta)) for lat, w in zip(latents, weights)) / total
    )
