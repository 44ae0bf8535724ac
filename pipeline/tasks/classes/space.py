"""Classes [K] with the 0-1 loss (paper Lemma "ExactMatchBayes")."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from pipeline.latent.base import (
    BayesResult,
    LatentBatch,
    LatentSpace,
    first_min_index,
    register,
    reject_none,
)


class ClassBatch(LatentBatch):
    """Classes coded per prompt in first-seen order: every risk is a count over n."""

    def __init__(self, space: LatentSpace, prompts: Sequence[Sequence[Any]]) -> None:
        super().__init__(space, prompts)
        self.codes: list[np.ndarray] = []
        self.counts: list[np.ndarray] = []
        self.classes: list[dict[Hashable, int]] = []
        for items in self.items:
            seen: dict[Hashable, int] = {}
            codes = np.array([seen.setdefault(x, len(seen)) for x in items], dtype=np.int64)
            self.codes.append(codes)
            self.counts.append(np.bincount(codes))
            self.classes.append(seen)

    def bayes(self) -> tuple[list[Any], np.ndarray]:
        best = [int(np.argmax(c)) for c in self.counts]  # the first seen of the most frequent
        actions = [list(seen)[b] for seen, b in zip(self.classes, best)]
        return actions, np.array([1.0 - c[b] / n for c, b, n in zip(self.counts, best, self.sizes)])

    def map(self) -> np.ndarray:
        return np.array(
            [int(np.argmax(codes == np.argmax(c))) for codes, c in zip(self.codes, self.counts)],
            dtype=np.int64,
        )

    def _compute_sample_risks(self) -> list[np.ndarray]:
        return [(n - c[codes]) / n for codes, c, n in zip(self.codes, self.counts, self.sizes)]

    def risk(self, actions: Sequence[Any]) -> np.ndarray:
        out = np.full(len(self.items), np.nan)
        for p, action in enumerate(actions):
            if action is not None:
                code = self.classes[p].get(self.space.canonical(action))
                hits = 0 if code is None else int(self.counts[p][code])
                out[p] = (self.sizes[p] - hits) / self.sizes[p]
        return out


# The class of the samples that could not be read (reading.unreadable=no_answer): one class, so
# when most samples give no answer the mode abstains. Not a canonical label (they have no "<").
NO_ANSWER_CLASS = "<no answer>"


@register("classes")
class ClassSpace(LatentSpace[Hashable]):
    """Any hashable label (cluster id or canonical string); d(a, b) = 1[a != b].

    Bayes action = the mode (ties: first seen), risk = 1 - max_k p_k.  O(M).
    """

    def no_answer(self) -> Hashable:
        return NO_ANSWER_CLASS

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
        return 1.0  # 1 - max p < 1

    def agreement(self, action: Any, latent: Any) -> float:
        # exact match: confidence is the Bayes class's share of the samples (= 1 - risk)
        return float(action == latent)

    def answer_text(self, action: Any, texts: Sequence[str]) -> str | None:
        # a label is a canonical answer ("paris"): written as the samples write it ("Paris")
        if not isinstance(action, str) or action == NO_ANSWER_CLASS:
            return None
        from pipeline.tasks.sets.space import surface_form

        return surface_form(action, list(texts))

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

    def batch(self, prompts: Sequence[Sequence[Any]]) -> ClassBatch:
        return ClassBatch(self, prompts)

    def _pairwise_distances(self, items: list[Hashable]) -> np.ndarray:
        codes: dict[Hashable, int] = {}
        idx = np.array([codes.setdefault(x, len(codes)) for x in items])
        return (idx[:, None] != idx[None, :]).astype(np.float64)
