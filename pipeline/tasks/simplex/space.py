"""Probability simplex with d(l, a) = KL(l || a) (paper Lemma "ProbabilitySimplexKL").

A latent is a ``dict[label, prob]``.  Supports may differ between samples: they are aligned on
the union of labels (missing = 0) and each latent is renormalised to sum to one.  Conventions:
0 log 0 = 0 and KL(l || a) = +inf when a_k = 0 < l_k.
Bayes action = weighted mean (over the union of labels), risk = H(mean) - mean H(l), clipped at
0 from below (it is >= 0 by Jensen; only rounding can make it negative).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from pipeline.latent.base import (
    BayesResult,
    LatentBatch,
    LatentSpace,
    LatentTypeError,
    json_scalar,
    padded_chunks,
    register,
    reject_none,
    sorted_labels,
)


def _xlogx(p: np.ndarray) -> np.ndarray:
    """Elementwise p log p with 0 log 0 = 0."""
    out = np.zeros_like(p, dtype=np.float64)
    pos = p > 0
    out[pos] = p[pos] * np.log(p[pos])
    return out


def entropy(p: np.ndarray) -> np.ndarray:
    """Shannon entropy (nats) along the last axis."""
    return -_xlogx(np.asarray(p, dtype=np.float64)).sum(axis=-1)


def _align(
    dists: list[dict[Hashable, float]], labels: list[Hashable] | None = None
) -> tuple[list[Hashable], np.ndarray]:
    if labels is None:
        union: set[Hashable] = set()
        for d in dists:
            union.update(d)
        labels = sorted_labels(union)
    index = {lab: k for k, lab in enumerate(labels)}
    mat = np.zeros((len(dists), len(labels)))
    for m, d in enumerate(dists):
        for lab, p in d.items():
            mat[m, index[lab]] = p
    return labels, mat


def kl_matrix(refs: np.ndarray, cands: np.ndarray) -> np.ndarray:
    """D[i, j] = KL(refs[i] || cands[j]) for aligned rows (inf where support is missing)."""
    neg_entropy = _xlogx(refs).sum(axis=1)
    log_c = np.zeros_like(cands)
    pos = cands > 0
    log_c[pos] = np.log(cands[pos])
    dist = neg_entropy[:, None] - refs @ log_c.T
    missing = (refs > 0).astype(np.float64) @ (~pos).astype(np.float64).T > 0
    dist[missing] = np.inf
    return np.maximum(dist, 0.0)  # KL >= 0; clip rounding noise


class SimplexBatch(LatentBatch):
    """Distributions of many prompts aligned on each prompt's labels, in padded chunks."""

    def __init__(self, space: LatentSpace, prompts: Sequence[Sequence[Any]]) -> None:
        super().__init__(space, prompts)
        self.aligned = [_align(items) for items in self.items]  # (labels, (n, K) matrix)
        self.chunks = padded_chunks(
            np.array([len(labels) for labels, _ in self.aligned]), self.n_samples
        )

    def matrices(self, sl: slice, width: int) -> np.ndarray:
        x = np.zeros((sl.stop - sl.start, self.n_samples, width))
        for row, (_, mat) in enumerate(self.aligned[sl]):
            x[row, : mat.shape[0], : mat.shape[1]] = mat
        return x

    def bayes(self) -> tuple[list[Any], np.ndarray]:
        """The mean distribution; risk H(mean) - mean H(l), at least 0."""
        actions: list[Any] = []
        risks = np.empty(len(self.items))
        for sl, width in self.chunks:
            x = self.matrices(sl, width)
            n = self.sizes[sl].astype(np.float64)
            mean = x.sum(axis=1) / n[:, None]
            mean /= mean.sum(axis=1, keepdims=True)
            risks[sl] = np.maximum(0.0, entropy(mean) - entropy(x).sum(axis=1) / n)
            for row, (labels, _) in enumerate(self.aligned[sl]):
                actions.append({lab: float(q) for lab, q in zip(labels, mean[row])})
        return actions, risks

    def _compute_sample_risks(self) -> list[np.ndarray]:
        """KL(l_j || l_i) summed over j: sum_j sum_k l_jk log l_jk - l_jk log l_ik, +inf where
        l_i misses a label some l_j holds."""
        out: list[np.ndarray] = []
        for sl, width in self.chunks:
            x = self.matrices(sl, width)
            pos = x > 0
            log_x = np.where(pos, np.log(np.where(pos, x, 1.0)), 0.0)
            neg_entropy = (x * log_x).sum(axis=2)  # (p, M)
            cross = np.matmul(x, np.swapaxes(log_x, 1, 2))  # [j, i] = sum_k l_jk log l_ik
            kl = np.maximum(neg_entropy[:, :, None] - cross, 0.0)
            missing = (
                np.matmul(pos.astype(np.float64), np.swapaxes(~pos, 1, 2).astype(np.float64)) > 0
            )
            kl[missing] = np.inf
            for row, n in enumerate(self.sizes[sl]):
                out.append(kl[row, :n, :n].sum(axis=0) / n)
        return out

    def risk(self, actions: Sequence[Any]) -> np.ndarray:
        out = np.full(len(self.items), np.nan)
        for p, action in enumerate(actions):
            if action is not None:
                labels, mat = self.aligned[p]
                action = self.space.canonical(action)
                cand = np.array([[action.get(lab, 0.0) for lab in labels]])
                with np.errstate(invalid="ignore"):
                    out[p] = float(kl_matrix(mat, cand)[:, 0].sum() / mat.shape[0])
        return out


@register("simplex")
class SimplexSpace(LatentSpace[dict]):
    """dict[label, prob] distributions; d(l, a) = KL(l || a).  O(M K)."""

    def canonical(self, latent: Any) -> dict[Hashable, float]:
        reject_none(latent, "simplex")
        if not isinstance(latent, Mapping):
            raise LatentTypeError(
                f"simplex: a latent must be a dict {{label: probability}}, got {type(latent).__name__}"
            )
        if not latent:
            raise ValueError("simplex: empty distribution {}; drop that sample")
        labels = list(latent)
        try:
            probs = np.array([float(latent[k]) for k in labels], dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                f"simplex: probabilities must be numbers, got {dict(latent)!r}"
            ) from None
        if np.any(np.isnan(probs)) or np.any(np.isinf(probs)):
            raise ValueError(f"simplex: probabilities must be finite, got {dict(latent)!r}")
        if np.any(probs < 0):
            raise ValueError(f"simplex: probabilities must be non-negative, got {dict(latent)!r}")
        total = probs.sum()
        if total <= 0:
            raise ValueError(
                f"simplex: probabilities are all zero, cannot renormalise {dict(latent)!r}"
            )
        return {k: float(p) for k, p in zip(labels, probs / total)}

    def key(self, latent: dict[Hashable, float]) -> frozenset:
        return frozenset((k, p) for k, p in latent.items() if p > 0)

    def distance(self, a: Any, b: Any) -> float:
        ca, cb = self.canonical(a), self.canonical(b)
        _, mat = _align([ca, cb])
        return float(kl_matrix(mat[:1], mat[1:])[0, 0])

    def _bayes(self, items: list[dict], w: np.ndarray) -> BayesResult:
        labels, mat = _align(items)
        wn = w / w.sum()
        mean = wn @ mat
        mean = mean / mean.sum()  # exact simplex despite rounding
        risk = float(entropy(mean) - wn @ entropy(mat))
        return BayesResult({lab: float(p) for lab, p in zip(labels, mean)}, max(0.0, risk))

    def _risk(self, action: dict, items: list[dict], w: np.ndarray) -> float:
        _, mat = _align(items + [action])
        d = kl_matrix(mat[:-1], mat[-1:])[:, 0]
        with np.errstate(invalid="ignore"):
            return float(w @ d / w.sum())

    def batch(self, prompts: Sequence[Sequence[Any]]) -> SimplexBatch:
        return SimplexBatch(self, prompts)

    def _pairwise_distances(self, items: list[dict]) -> np.ndarray:
        _, mat = _align(items)
        return kl_matrix(mat, mat)

    def encode(self, latent: Any) -> dict[str, float]:
        if not isinstance(latent, dict):
            raise ValueError(f"simplex latent must be a dict, got {type(latent).__name__}")
        for key in latent:
            if not isinstance(key, str):
                raise LatentTypeError(
                    f"simplex labels must be strings to round-trip through JSON, got {key!r}"
                )
        return {k: float(json_scalar(v, "simplex probability")) for k, v in latent.items()}

    def decode(self, payload: Any) -> dict[str, float]:
        if not isinstance(payload, dict):
            raise ValueError(f"simplex: expected a JSON object, got {payload!r:.200}")
        return {k: float(v) for k, v in payload.items()}

    def labels(self, latent: Any) -> list[str] | None:
        return None if latent is None else [str(k) for k in latent]

    def distribution(self, latents: Sequence[Any], weights: Any = None) -> dict[str, float] | None:
        """The mean distribution (the Bayes action), most probable label first."""
        items, w = self._prepare(latents, weights)
        if not items:
            return None
        totals: dict[str, float] = {}
        for item, wi in zip(items, w):
            for k, v in item.items():
                totals[str(k)] = totals.get(str(k), 0.0) + float(wi) * float(v)
        total = float(w.sum())
        return dict(
            sorted(((k, v / total) for k, v in totals.items()), key=lambda kv: (-kv[1], kv[0]))
        )

    def max_risk(self, latents: Sequence[Any]) -> float:
        # H(mean) - mean H(l) <= H(mean) <= log K, K the labels the samples give mass to
        support = {k for x in latents for k, v in self.canonical(x).items() if v > 0}
        return float(np.log(len(support))) if support else 0.0

    def agreement(self, action: Any, latent: Any) -> float:
        # exp(-KL(l || a)): for a one-hot sample, the probability the answer gives its label,
        # so confidence reads as the chance the answer puts on what a sample says
        return float(np.exp(-self.distance(latent, action)))

    def describe(self, latent: Any, texts: Sequence[str] = ()) -> str:
        """Labels with their probabilities, most probable first."""
        if latent is None:
            return ""
        return ", ".join(f"{k}: {v:.3f}" for k, v in sorted(latent.items(), key=lambda kv: -kv[1]))
