"""Real numbers with the absolute (l1) or squared (l2) error (paper Table 6 "Reals").

l1: d(a, b) = |a - b|; Bayes action = the LOWER weighted median (the smallest sample x with
    cumulative weight of samples <= x at least half the total; for an even number of unweighted
    samples the lower of the two middle values); every point between the lower and upper median
    is optimal and the lower one is a sample, so it is also l_Sample's answer.
    Risk = weighted mean absolute deviation from it.  O(M log M) (one sort).
l2: d(a, b) = (a - b)^2; Bayes action = weighted mean, risk = weighted variance.  O(M).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from .base import (
    TIE_TOLERANCE,
    BayesResult,
    LatentBatch,
    LatentSpace,
    LatentTypeError,
    json_scalar,
    padded_chunks,
    register,
    reject_none,
)

_LOSSES = ("l1", "l2")


def weighted_lower_median(values: np.ndarray, w: np.ndarray) -> float:
    """Smallest value whose cumulative weight reaches half of the total (raw weights)."""
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(w[order])
    total = cum[-1]
    # 2*cum >= total, with a relative slack so rounding in the cumulative sum of exact halves
    # (e.g. ten weights of 0.1) cannot skip the lower median.
    idx = int(np.argmax(2.0 * cum >= total * (1.0 - TIE_TOLERANCE)))
    return float(values[order[idx]])


class RealBatch(LatentBatch):
    """Numbers of many prompts as one (prompts, samples) array, padded with NaN."""

    def __init__(self, space: LatentSpace, prompts: Sequence[Sequence[Any]]) -> None:
        super().__init__(space, prompts)
        self.values = np.full((len(self.items), self.n_samples), np.nan)
        for row, items in enumerate(self.items):
            self.values[row, : len(items)] = items
        self.valid = ~np.isnan(self.values)

    def _losses(self, actions: np.ndarray) -> np.ndarray:
        diff = self.values - actions[:, None]
        loss = np.abs(diff) if self.space.loss == "l1" else diff * diff
        return np.where(self.valid, loss, 0.0)

    def bayes(self) -> tuple[list[Any], np.ndarray]:
        if self.space.loss == "l1":  # the lower median: the ceil(n / 2)-th smallest value
            ordered = np.sort(np.where(self.valid, self.values, np.inf), axis=1)
            action = ordered[np.arange(len(self.items)), (self.sizes - 1) // 2]
        else:
            action = np.where(self.valid, self.values, 0.0).sum(axis=1) / self.sizes
        return [float(a) for a in action], self._losses(action).sum(axis=1) / self.sizes

    def risk(self, actions: Sequence[Any]) -> np.ndarray:
        known = np.array([a is not None for a in actions], dtype=bool)
        chosen = np.array([self.space.canonical(a) if a is not None else 0.0 for a in actions])
        return np.where(known, self._losses(chosen).sum(axis=1) / self.sizes, np.nan)

    def _compute_sample_risks(self) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for sl, _ in padded_chunks(np.full(len(self.items), self.n_samples), self.n_samples):
            values, valid = self.values[sl], self.valid[sl]
            diff = values[:, :, None] - values[:, None, :]
            loss = np.abs(diff) if self.space.loss == "l1" else diff * diff
            loss = np.where(valid[:, :, None] & valid[:, None, :], loss, 0.0)
            risks = loss.sum(axis=1) / self.sizes[sl, None]
            out.extend(row[:n] for row, n in zip(risks, self.sizes[sl]))
        return out


@register("reals")
class RealSpace(LatentSpace[float]):
    """Finite real numbers; ``loss="l1"`` (median) or ``"l2"`` (mean)."""

    def __init__(self, loss: str = "l1") -> None:
        if loss not in _LOSSES:
            raise ValueError(f"RealSpace: loss must be one of {_LOSSES}, got {loss!r}")
        self.loss = loss

    def __repr__(self) -> str:
        return f"RealSpace(loss={self.loss!r})"

    def canonical(self, latent: Any) -> float:
        reject_none(latent, "reals")
        if isinstance(latent, (bool, np.bool_)) or not isinstance(
            latent, (numbers.Real, np.floating, np.integer)
        ):
            raise LatentTypeError(
                f"reals: a latent must be a real number, got {type(latent).__name__} {latent!r}"
            )
        value = float(latent)
        if not np.isfinite(value):
            raise ValueError(f"reals: a latent must be finite, got {value!r}")
        return value

    def distance(self, a: Any, b: Any) -> float:
        diff = self.canonical(a) - self.canonical(b)
        return abs(diff) if self.loss == "l1" else diff * diff

    def max_risk(self, latents: Sequence[Any]) -> float:
        # E|x - median| <= R / 2 and Var <= (R / 2)^2 (Popoviciu) for values spanning R
        values = [self.canonical(x) for x in latents]
        if not values:
            return 0.0
        half = (max(values) - min(values)) / 2.0
        return half if self.loss == "l1" else half * half

    def agreement(self, action: Any, latent: Any) -> float:
        # 1 - the relative error of the answer against a sample (the rel_error metric with the
        # sample as truth), floored at 0: scale-free, 1 only for the same number
        if latent == 0.0:
            return float(action == 0.0)
        return max(0.0, 1.0 - abs(action - latent) / abs(latent))

    def _bayes(self, items: list[float], w: np.ndarray) -> BayesResult:
        x = np.array(items, dtype=np.float64)
        if self.loss == "l1":
            action = weighted_lower_median(x, w)
        else:
            action = float(w @ x / w.sum())
        return BayesResult(action, self._risk(action, items, w))

    def _risk(self, action: float, items: list[float], w: np.ndarray) -> float:
        diff = np.array(items, dtype=np.float64) - action
        loss = np.abs(diff) if self.loss == "l1" else diff * diff
        return float(w @ loss / w.sum())

    def batch(self, prompts: Sequence[Sequence[Any]]) -> RealBatch:
        return RealBatch(self, prompts)

    def _pairwise_distances(self, items: list[float]) -> np.ndarray:
        x = np.array(items, dtype=np.float64)
        diff = x[:, None] - x[None, :]
        return np.abs(diff) if self.loss == "l1" else diff * diff

    def encode(self, latent: Any) -> float:
        value = json_scalar(latent, "reals latent")
        if isinstance(value, (bool, str)):
            raise ValueError(f"reals latent must be a number, got {value!r}")
        return float(value)

    def decode(self, payload: Any) -> float:
        if isinstance(payload, bool) or not isinstance(payload, (int, float)):
            raise LatentTypeError(f"reals: expected a number, got {payload!r:.200}")
        return float(payload)
