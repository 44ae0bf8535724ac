"""Classes [K] with the 0-1 loss (paper Lemma "ExactMatchBayes")."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from .base import BayesResult, LatentSpace, first_min_index, register, reject_none


@register("classes")
class ClassSpace(LatentSpace[Hashable]):
    """Any hashable label (cluster id or canonical string); d(a, b) = 1[a != b].

    Bayes action = the mode (ties: first seen), risk = 1 - max_k p_k.  O(M).
    """

    def canonical(self, latent: Any) -> Hashable:
        reject_none(latent, "classes")
        try:
            hash(latent)
        except TypeError:
            raise ValueError(
                f"classes: a latent must be a hashable label (str, int, tuple...), got {type(latent).__name__}"
            ) from None
        return latent

    def labels(self, latent: Any) -> list[str] | None:
        return None if latent is None else [str(latent)]

    def max_risk(self, latents: Sequence[Any]) -> float:
        # 1 - max p < 1: confidence is the Bayes class's share of the samples
        return 1.0

    def distance(self, a: Any, b: Any) -> float:
        return float(self.canonical(a) != self.canonical(b))

    def _masses(self, items: list[Hashable], w: np.ndarray) -> tuple[list[Hashable], np.ndarray]:
        totals: dict[Hashable, float] = {}
        for item, wi in zip(items, w):
            totals[item] = totals.get(item, 0.0) + float(wi)
        labels = list(totals)  # first-seen order
        return labels, np.array([totals[k] for k in labels])

    def _bayes(self, items: list[Hashable], w: np.ndarray) -> BayesResult:
        labels, mass = self._masses(items, w)
        best = first_min_index(-mass)
        return BayesResult(labels[best], float(1.0 - mass[best] / w.sum()))

    def _risk(self, action: Hashable, items: list[Hashable], w: np.ndarray) -> float:
        hit = np.array([item == action for item in items], dtype=bool)
        return float(w[~hit].sum() / w.sum())

    def _pairwise_distances(self, items: list[Hashable]) -> np.ndarray:
        codes: dict[Hashable, int] = {}
        idx = np.array([codes.setdefault(x, len(codes)) for x in items])
        return (idx[:, None] != idx[None, :]).astype(np.float64)
