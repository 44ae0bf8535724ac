"""Unit sphere with the cosine distance d(a, b) = 1 - <a, b> (paper Lemma "SemanticBayes").

Bayes action mu / ||mu||, risk 1 - ||mu|| with mu the weighted mean of the normalised samples.
When ||mu|| <= ZERO_MEAN_TOLERANCE every unit vector has risk 1 (mu = 0 means <mu, a> = 0 for all
a), so the risk is reported as exactly 1 and the action is, deterministically, the first
positive-weight sample (a real latent, so it maps back to a text).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pipeline.latent.base import (
    BayesResult,
    LatentBatch,
    LatentSpace,
    first_min_index,
    first_min_index_rows,
    padded_chunks,
    register,
    reject_none,
    validate_batch_weights,
)

ZERO_MEAN_TOLERANCE = 1e-12
_CHUNK_CELLS = 1 << 20


def _normalise_rows(x: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """Rows scaled to unit norm; zero rows are allowed only where their weight is 0 (padding)."""
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    zero = norms[..., 0] == 0
    if np.any(zero):
        bad = zero if w is None else zero & (w > 0)
        if np.any(bad):
            where = np.argwhere(bad)[0].tolist()
            raise ValueError(
                f"sphere: zero vector at index {where} cannot be normalised; drop that sample"
            )
        norms = np.where(zero[..., None], 1.0, norms)
    with np.errstate(invalid="ignore"):  # inf rows give NaN here; callers report them clearly
        return x / norms


def _as_batch(x: np.ndarray, check_finite: bool = True) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim != 3 or arr.shape[0] == 0 or arr.shape[1] == 0 or arr.shape[2] == 0:
        raise ValueError(
            f"X must have shape (prompts, samples, dim) with all sizes > 0, got {arr.shape}"
        )
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    if check_finite and not np.all(np.isfinite(arr)):
        raise ValueError("sphere: embeddings must be finite (no NaN or inf)")
    return arr


# The weighted means and dot products below go through einsum, not matmul: numpy's matmul hands
# them to OpenBLAS, whose small gemv kernels round by the data's memory alignment (seen on an
# AVX-512 host: 1 ulp between a prompt scored alone and in a batch, in 597 of 1200 random
# trials), and a prompt's decision must not depend on which prompts share its chunk. einsum's
# own loops gave 0 of 1200 (any offset), at 1.2-2.4x matmul's time.
def _weighted_mean(arr: np.ndarray, w: np.ndarray) -> np.ndarray:
    """(P, M, d), (P, M) -> sum_j w_j x_j / sum_j w_j, (P, d)."""
    return np.einsum("pm,pmd->pd", (w / w.sum(axis=1, keepdims=True)).astype(arr.dtype), arr)


def _row_dots(x: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """(P, M, d), (P, d) -> <x_pm, mu_p>, (P, M)."""
    return np.einsum("pmd,pd->pm", x, mu)


def sphere_bayes_batch(
    x: np.ndarray, weights: np.ndarray | None = None, assume_normalized: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Cosine Bayes action and risk for many prompts: x (P, M, d) -> (actions (P, d), risks (P,)).

    Rows are normalised first unless ``assume_normalized``; pad with zero-weight samples.  The
    float dtype of x is kept (float32 in, float32 actions out).  O(P M d).
    """
    # NaN/inf inputs propagate into mu, so checking mu replaces a full pass over x (which would
    # cost more than the Bayes action itself).
    arr = _as_batch(x, check_finite=False)
    n_prompts, n_samples, _ = arr.shape
    w = validate_batch_weights(weights, n_prompts, n_samples)
    if not assume_normalized:
        arr = _normalise_rows(arr, w)
    mu = arr.mean(axis=1) if w is None else _weighted_mean(arr, w)
    if not np.all(np.isfinite(mu)):
        bad = np.flatnonzero(~np.all(np.isfinite(mu), axis=1))
        raise ValueError(
            f"sphere: embeddings must be finite (no NaN or inf); see prompts {bad[:10].tolist()}"
        )
    norm = np.linalg.norm(mu, axis=1)
    degenerate = norm <= ZERO_MEAN_TOLERANCE
    safe = np.where(degenerate, 1.0, norm)
    actions = mu / safe[:, None].astype(mu.dtype)
    risks = np.clip(1.0 - norm.astype(np.float64), 0.0, 2.0)
    if np.any(degenerate):
        first = np.zeros(n_prompts, dtype=np.int64) if w is None else np.argmax(w > 0, axis=1)
        rows = np.flatnonzero(degenerate)
        actions[rows] = arr[rows, first[rows]]
        risks[rows] = 1.0
    return actions, risks


def sphere_pairwise_risks_batch(
    x: np.ndarray, weights: np.ndarray | None = None, assume_normalized: bool = False
) -> np.ndarray:
    """Risk of every sample as candidate, (P, M), in O(P M d): no M x M matrix, since

        sum_j w_j (1 - <x_i, x_j>) / W = 1 - <x_i, mu>,  mu = sum_j w_j x_j / W

    (the mean the Bayes action normalises). Zero-weight samples get +inf. The matrix form
    (`sphere_pairwise_matrix_risks_batch`) is kept as the reference it is tested against.
    """
    arr = _as_batch(x)
    n_prompts, n_samples, dim = arr.shape
    w = validate_batch_weights(weights, n_prompts, n_samples)
    out = np.empty((n_prompts, n_samples), dtype=np.float64)
    step = max(1, _CHUNK_CELLS // (n_samples * dim))
    for start in range(0, n_prompts, step):
        sl = slice(start, min(n_prompts, start + step))
        chunk = (
            arr[sl] if assume_normalized else _normalise_rows(arr[sl], None if w is None else w[sl])
        )
        if w is None:
            mu = chunk.mean(axis=1)
        else:
            wc = w[sl]
            mu = _weighted_mean(chunk, wc)
        out[sl] = 1.0 - _row_dots(chunk, mu)
        if w is not None:
            out[sl][wc <= 0] = np.inf
    return out


def sphere_pairwise_matrix_risks_batch(
    x: np.ndarray, weights: np.ndarray | None = None, assume_normalized: bool = False
) -> np.ndarray:
    """The same risks through the (P, M, M) cosine distance matrices, O(P M^2 d): what an MBR
    toolkit computes; the reference for tests and benchmarks."""
    arr = _as_batch(x)
    n_prompts, n_samples, dim = arr.shape
    w = validate_batch_weights(weights, n_prompts, n_samples)
    out = np.empty((n_prompts, n_samples), dtype=np.float64)
    step = max(1, _CHUNK_CELLS // (n_samples * max(n_samples, dim)))
    for start in range(0, n_prompts, step):
        sl = slice(start, min(n_prompts, start + step))
        chunk = (
            arr[sl] if assume_normalized else _normalise_rows(arr[sl], None if w is None else w[sl])
        )
        dist = 1.0 - np.matmul(chunk, chunk.transpose(0, 2, 1))  # (p, M, M), symmetric
        if w is None:
            out[sl] = dist.mean(axis=1)
        else:
            wc = w[sl]
            out[sl] = np.matmul(wc[:, None, :].astype(dist.dtype), dist)[:, 0, :] / wc.sum(
                axis=1, keepdims=True
            )
            out[sl][wc <= 0] = np.inf
    return out


def sphere_sample_mbr_batch(
    x: np.ndarray, weights: np.ndarray | None = None, assume_normalized: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """l_Sample for many prompts: (index of the chosen sample (P,), its risk (P,)); ties: first."""
    risks = sphere_pairwise_risks_batch(x, weights, assume_normalized)
    idx = first_min_index_rows(risks)
    return idx, risks[np.arange(risks.shape[0]), idx]


class SphereBatch(LatentBatch):
    """Unit vectors of many prompts as padded (prompts, samples, dim) chunks."""

    def __init__(self, space: LatentSpace, prompts: Sequence[Sequence[Any]]) -> None:
        super().__init__(space, prompts)
        vectors = [v for items in self.items for v in items]
        space._check_compatible(vectors)  # one padded array: one dimension across prompts too
        self.dim = vectors[0].shape[0] if vectors else 1
        self.chunks = [
            sl for sl, _ in padded_chunks(np.full(len(self.items), self.dim), self.n_samples)
        ]

    def vectors(self, sl: slice) -> np.ndarray:
        x = np.zeros((sl.stop - sl.start, self.n_samples, self.dim))
        for row, items in enumerate(self.items[sl]):
            x[row, : len(items)] = items
        return x

    def bayes(self) -> tuple[list[Any], np.ndarray]:
        actions: list[Any] = []
        risks = np.empty(len(self.items))
        for sl in self.chunks:
            chosen, risks[sl] = sphere_bayes_batch(
                self.vectors(sl), self.weights(sl), assume_normalized=True
            )
            actions.extend(chosen)
        return actions, risks

    def _compute_sample_risks(self) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for sl in self.chunks:
            risks = sphere_pairwise_risks_batch(
                self.vectors(sl), self.weights(sl), assume_normalized=True
            )
            out.extend(row[:n] for row, n in zip(risks, self.sizes[sl]))
        return out

    def risk(self, actions: Sequence[Any]) -> np.ndarray:
        out = np.full(len(self.items), np.nan)
        for sl in self.chunks:
            mu = _weighted_mean(self.vectors(sl), self.weights(sl))
            for row, p in enumerate(range(sl.start, sl.stop)):
                if actions[p] is not None:
                    action = self.space.canonical(actions[p])
                    if action.shape[0] != self.dim:
                        raise ValueError(
                            f"sphere: dimension mismatch {action.shape[0]} vs {self.dim}"
                        )
                    out[p] = float(1.0 - np.einsum("d,d->", mu[row], action))
        return out


@register("sphere")
class SphereSpace(LatentSpace[np.ndarray]):
    """1-D float vectors, normalised on input; d(a, b) = 1 - <a, b>.  O(M d)."""

    def canonical(self, latent: Any) -> np.ndarray:
        reject_none(latent, "sphere")
        try:
            v = np.asarray(latent, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                f"sphere: a latent must be a 1-D array of floats, got {type(latent).__name__}"
            ) from None
        if v.ndim != 1 or v.size == 0:
            raise ValueError(
                f"sphere: a latent must be a non-empty 1-D vector, got shape {v.shape}"
            )
        if not np.all(np.isfinite(v)):
            raise ValueError("sphere: a latent contains NaN or inf")
        norm = np.linalg.norm(v)
        if norm == 0:
            raise ValueError(
                "sphere: the zero vector cannot be normalised to the unit sphere; drop that sample"
            )
        return v / norm

    def key(self, latent: np.ndarray) -> bytes:
        return latent.tobytes()

    def _check_compatible(self, items: list[np.ndarray]) -> None:
        dims = {v.shape[0] for v in items}
        if len(dims) > 1:
            raise ValueError(
                f"sphere: all latents must have the same dimension, got {sorted(dims)}"
            )

    def max_risk(self, latents: Sequence[Any]) -> float:
        return 1.0  # 1 - |mu|

    def agreement(self, action: Any, latent: Any) -> float:
        # cosine similarity: its mean at the Bayes direction is |mu| (= 1 - risk)
        return float(action @ latent)

    def distance(self, a: Any, b: Any) -> float:
        va, vb = self.canonical(a), self.canonical(b)
        if va.shape != vb.shape:
            raise ValueError(f"sphere: dimension mismatch {va.shape[0]} vs {vb.shape[0]}")
        return float(1.0 - va @ vb)

    def _bayes(self, items: list[np.ndarray], w: np.ndarray) -> BayesResult:
        actions, risks = sphere_bayes_batch(np.stack(items)[None], w[None], assume_normalized=True)
        return BayesResult(actions[0], float(risks[0]))

    def _risk(self, action: np.ndarray, items: list[np.ndarray], w: np.ndarray) -> float:
        self._check_compatible(items + [action])
        mu = (w / w.sum()) @ np.stack(items)
        return float(1.0 - mu @ action)

    def batch(self, prompts: Sequence[Sequence[Any]]) -> SphereBatch:
        return SphereBatch(self, prompts)

    def sample_mbr(self, latents: Sequence[Any], weights: Any = None) -> BayesResult:
        """l_Sample in O(M d): a sample's risk is 1 - <x_i, mu> (`sphere_pairwise_risks_batch`)."""
        items, w = self._prepare(latents, weights)
        risks = sphere_pairwise_risks_batch(np.stack(items)[None], w[None], assume_normalized=True)[
            0
        ]
        best = first_min_index(risks)
        return BayesResult(items[best], float(risks[best]))

    def _pairwise_distances(self, items: list[np.ndarray]) -> np.ndarray:
        x = np.stack(items)
        return 1.0 - x @ x.T

    def encode(self, latent: Any) -> list[float]:
        arr = np.asarray(latent, dtype=np.float64)  # stored as given (the mapper's embedding)
        if arr.ndim != 1 or not np.all(np.isfinite(arr)):
            raise ValueError(f"sphere latent must be a finite 1-D vector, got shape {arr.shape}")
        return [float(v) for v in arr]

    def decode(self, payload: Any) -> np.ndarray:
        if not isinstance(payload, list):
            raise ValueError(f"sphere: expected a list of floats, got {payload!r:.200}")
        return np.asarray(payload, dtype=np.float64)

    def render(self, action: Any, samples: Sequence[tuple[Any, str]]) -> str:
        """The sample closest to the action in d_T: a mean embedding has no text of its own
        (the paper's appendix: COMET of the closest sampled response)."""
        if action is None or not samples:
            return ""
        emb = np.stack([self.canonical(lat) for lat, _ in samples])
        return samples[int(np.argmax(emb @ np.asarray(action, dtype=np.float64)))][1]
