"""Sets under the F_beta loss: exact Bayes action by the General F-measure Maximizer (GFM).

Waegeman, Dembczynski, Jachnik, Cheng, Huellermeier (2014), "On the Bayes-optimality of
F-measure maximizers", JMLR 15:3513-3568, Algorithm 1 (GFM), applied to the empirical (weighted)
distribution of the sampled sets.

With y the reference set (a sample), h the candidate and s = |y|, k = |h|:
    F_beta(y, h) = (1 + beta^2) |y & h| / (beta^2 s + k),   F_beta(empty, empty) = 1,
    E[F_beta(y, h)] = P(y = empty) [h = empty] + sum_{i in h} sum_s P(y_i = 1, s_y = s) W[s, k],
    W[s, k] = (1 + beta^2) / (beta^2 s + k).
For each k the best h of size k holds the k largest entries of column k of Delta = P W; the
Bayes action is the best of these K candidates and the empty set (value P(y = empty)).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pipeline.latent.base import (
    BayesResult,
    LatentSpace,
    first_min_index,
    first_min_index_rows,
    padded_chunks,
    register,
)
from pipeline.tasks.sets.space import (
    IncidenceBatch,
    SetSpace,
    _canonical_set,
    encode_label_set,
    incidence_matrix,
)


def f_beta(reference: frozenset, candidate: frozenset, beta: float) -> float:
    """F_beta(truth=reference, prediction=candidate) with F(empty, empty) = 1."""
    if not reference and not candidate:
        return 1.0
    b2 = beta * beta
    return (1.0 + b2) * len(reference & candidate) / (b2 * len(reference) + len(candidate))


def gfm(x: np.ndarray, w: np.ndarray, beta: float) -> tuple[np.ndarray, float]:
    """GFM on an empirical distribution: x bool (M, K) sample incidence, w (M,) normalised weights.

    Returns (bool mask (K,) of the optimal prediction, its expected F_beta).  Cost
    O(M K + K^2 S + K^2 log K) with S <= min(M, K) the number of distinct non-empty set sizes.
    """
    n_labels = x.shape[1]
    sizes = x.sum(axis=1)
    p_empty = float(w[sizes == 0].sum())
    if n_labels == 0:
        return np.zeros(0, dtype=bool), p_empty
    # P[i, j] = P(y_i = 1, |y| = size_values[j]), only over the observed sizes (others are 0).
    size_values, size_code = np.unique(sizes, return_inverse=True)
    rows, cols = np.nonzero(x)
    p_mat = np.zeros((n_labels, size_values.size))
    np.add.at(p_mat, (cols, size_code[rows]), w[rows])
    b2 = beta * beta
    k = np.arange(1, n_labels + 1, dtype=np.float64)
    s = size_values.astype(np.float64)
    with np.errstate(divide="ignore"):
        w_mat = (1.0 + b2) / (b2 * s[:, None] + k[None, :])  # (S, K); s = 0 rows meet P = 0
    w_mat[~np.isfinite(w_mat)] = 0.0  # only for s = 0, where P is zero anyway
    delta = p_mat @ w_mat  # (K labels, K sizes)
    order = np.argsort(-delta, axis=0, kind="stable")  # ties: label order
    top_sums = np.cumsum(np.take_along_axis(delta, order, axis=0), axis=0)
    values = np.concatenate([[p_empty], top_sums[np.arange(n_labels), np.arange(n_labels)]])
    best_k = first_min_index(-values)  # ties: the smaller prediction (empty set first)
    mask = np.zeros(n_labels, dtype=bool)
    if best_k > 0:
        mask[order[:best_k, best_k - 1]] = True
    return mask, float(values[best_k])


def f_beta_losses(refs: np.ndarray, cands: np.ndarray, beta: float) -> np.ndarray:
    """1 - F_beta(truth=refs[.., j], prediction=cands[.., i]) as (..., j, i) from bool incidence
    (..., J, K) and (..., I, K); F(empty, empty) = 1."""
    r, c = refs.astype(np.float64), cands.astype(np.float64)
    inter = np.matmul(r, np.swapaxes(c, -1, -2))
    b2 = beta * beta
    denom = b2 * r.sum(axis=-1)[..., :, None] + c.sum(axis=-1)[..., None, :]
    empty = denom == 0
    return 1.0 - np.where(empty, 1.0, (1.0 + b2) * inter / np.where(empty, 1.0, denom))


def gfm_batch(x: np.ndarray, w: np.ndarray, widths: np.ndarray, beta: float) -> np.ndarray:
    """`gfm` for many prompts: x bool (P, M, K) padded incidence, w (P, M) normalised weights
    (0 on padding), widths (P,) each prompt's own labels. Returns bool (P, K) predictions.

    Sizes run over 0..K for every prompt (unobserved sizes have P = 0, as in `gfm`); the top-k
    sums beyond a prompt's own labels are excluded."""
    n_prompts, _, n_labels = x.shape
    xf = x.astype(np.float64)
    sizes = xf.sum(axis=2).astype(np.int64)  # (P, M)
    p_empty = np.where(sizes == 0, w, 0.0).sum(axis=1)
    by_size = np.zeros((n_prompts, x.shape[1], n_labels + 1))
    np.put_along_axis(by_size, sizes[:, :, None], w[:, :, None], axis=2)
    p_mat = np.matmul(np.swapaxes(xf, 1, 2), by_size)  # (P, K, sizes): P(y_k = 1, |y| = s)
    b2 = beta * beta
    k = np.arange(1, n_labels + 1, dtype=np.float64)
    s = np.arange(n_labels + 1, dtype=np.float64)
    with np.errstate(divide="ignore"):
        w_mat = (1.0 + b2) / (b2 * s[:, None] + k[None, :])
    w_mat[~np.isfinite(w_mat)] = 0.0
    delta = np.matmul(p_mat, w_mat)  # (P, K labels, K sizes)
    order = np.argsort(-delta, axis=1, kind="stable")  # ties: label order, own labels first
    top_sums = np.cumsum(np.take_along_axis(delta, order, axis=1), axis=1)
    diag = top_sums[:, np.arange(n_labels), np.arange(n_labels)]  # (P, K)
    values = np.concatenate([p_empty[:, None], diag], axis=1)
    values[np.arange(n_labels + 1)[None, :] > widths[:, None]] = -np.inf
    best_k = first_min_index_rows(-values)
    masks = np.zeros((n_prompts, n_labels), dtype=bool)
    for p in np.flatnonzero(best_k):
        masks[p, order[p, : best_k[p], best_k[p] - 1]] = True
    return masks


class FBetaBatch(IncidenceBatch):
    """F-beta sets: GFM and every risk in padded array code."""

    def bayes(self) -> tuple[list[Any], np.ndarray]:
        actions: list[Any] = []
        for sl, width in padded_chunks(self.widths, self.n_samples, square=True):
            w = self.weights(sl)
            masks = gfm_batch(
                self.incidence(sl, width),
                w / w.sum(axis=1, keepdims=True),
                self.widths[sl],
                self.space.beta,
            )
            actions.extend(self.to_set(p, m) for p, m in zip(range(sl.start, sl.stop), masks))
        # the risk recomputed from the action, as the one-prompt `bayes` does
        return actions, self.risk(actions)

    def _compute_sample_risks(self) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for sl, width in self.chunks:
            x = self.incidence(sl, width)
            w = self.weights(sl)
            risks = np.matmul(w[:, None, :], f_beta_losses(x, x, self.space.beta))[:, 0, :]
            out.extend(row[:n] / n for row, n in zip(risks, self.sizes[sl]))
        return out

    def risk(self, actions: Sequence[Any]) -> np.ndarray:
        """sum_j (1 - F_beta(s_j, a)) / n; an action's labels beyond its prompt's count in |a|."""
        known, masks, beyond = self.action_masks(actions)
        b2 = self.space.beta**2
        out = np.full(len(self.items), np.nan)
        for sl, width in self.chunks:
            x = self.incidence(sl, width)
            mask = masks[sl, :width]
            inter = np.matmul(x.astype(np.float64), mask[:, :, None].astype(np.float64))[:, :, 0]
            denom = b2 * x.sum(axis=2) + (mask.sum(axis=1) + beyond[sl])[:, None]
            empty = denom == 0
            loss = 1.0 - np.where(empty, 1.0, (1.0 + b2) * inter / np.where(empty, 1.0, denom))
            total = np.where(self.weights(sl) > 0, loss, 0.0).sum(axis=1)
            out[sl] = np.where(known[sl], total / self.sizes[sl], np.nan)
        return out


@register("sets-fbeta")
class FBetaSetSpace(LatentSpace[frozenset]):
    """frozenset of hashable labels; d(a, b) = 1 - F_beta(truth=a, prediction=b).

    ``beta`` > 1 weights recall more, < 1 precision.  Bayes action by the exact GFM algorithm
    (including the empty set); risk = 1 - expected F_beta of that action under the samples.
    """

    def __init__(self, beta: float = 1.0) -> None:
        beta = float(beta)
        if not np.isfinite(beta) or beta <= 0:
            raise ValueError(f"FBetaSetSpace: beta must be a positive finite number, got {beta!r}")
        self.beta = beta

    def __repr__(self) -> str:
        return f"FBetaSetSpace(beta={self.beta})"

    # Stored and written as the Hamming set space writes sets (same latents, another loss).
    renders_latent = True

    def encode(self, latent: frozenset) -> list:
        return encode_label_set(latent, self.name)

    def decode(self, payload: Any) -> frozenset:
        return SetSpace.decode(self, payload)

    def describe(self, latent: Any, texts: Sequence[str] = ()) -> str:
        return SetSpace.describe(self, latent, texts)

    def labels(self, latent: Any) -> list[str] | None:
        return SetSpace.labels(self, latent)

    def max_risk(self, latents: Sequence[Any]) -> float:
        return 1.0  # 1 - E[F_beta]

    def no_answer(self) -> frozenset:
        return frozenset()

    def agreement(self, action: Any, latent: Any) -> float:
        return f_beta(latent, action, self.beta)  # confidence = E[F_beta] = 1 - risk

    frozensets_are_canonical = True  # (IncidenceBatch skips the per-item check)

    def canonical(self, latent: Any) -> frozenset:
        return _canonical_set(latent, "sets-fbeta")

    def distance(self, a: Any, b: Any) -> float:
        return 1.0 - f_beta(self.canonical(a), self.canonical(b), self.beta)

    def _bayes(self, items: list[frozenset], w: np.ndarray) -> BayesResult:
        labels, x = incidence_matrix(items)
        mask, _ = gfm(x, w / w.sum(), self.beta)
        action = frozenset(lab for lab, keep in zip(labels, mask) if keep)
        # Risk recomputed from the action (same value as 1 - GFM's optimum, one rounding path).
        return BayesResult(action, self._risk(action, items, w))

    def _risk(self, action: frozenset, items: list[frozenset], w: np.ndarray) -> float:
        # Sum the per-sample losses 1 - F (not 1 - sum F) so exact cases stay exact.
        loss = np.array([1.0 - f_beta(item, action, self.beta) for item in items])
        return float(w @ loss / w.sum())

    def batch(self, prompts: Sequence[Sequence[Any]]) -> FBetaBatch:
        return FBetaBatch(self, prompts)

    def _pairwise_distances(self, items: list[frozenset]) -> np.ndarray:
        _, x = incidence_matrix(items)
        return f_beta_losses(x, x, self.beta)  # row = reference, column = candidate
