"""Real numbers with the absolute (l1) or squared (l2) error (paper Table 6 "Reals").

l1: d(a, b) = |a - b|; Bayes action = the LOWER weighted median (the smallest sample x with
    cumulative weight of samples <= x at least half the total; for an even number of unweighted
    samples the lower of the two middle values); every point between the lower and upper median
    is optimal and the lower one is a sample, so it is also l_Sample's answer.
    Risk = weighted mean absolute deviation from it.  O(M log M) (one sort).
l2: d(a, b) = (a - b)^2; Bayes action = weighted mean, risk = weighted variance.  O(M).

Means and risks are computed on the values divided by 2^e, the power of two just above the
largest magnitude involved (samples and action): every scaled value lies in [-1, 1], so no
difference, square or sum overflows, and dividing by a power of two is exact, so a result is the
one unscaled arithmetic gives wherever that does not overflow ([1e308, 1e308, -1e308] has the l1
risk 6.67e307, not inf). A risk whose true value exceeds the largest float (an l2 risk needs
values more than 2.68e154 apart; an l1 risk, values near the limit on both sides) is refused:
RiskOverflowError names the prompt (its row in a batch) and the values' range.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from pipeline.latent.base import (
    TIE_TOLERANCE,
    BayesResult,
    LatentBatch,
    LatentSpace,
    LatentTypeError,
    RiskOverflowError,  # defined beside LatentSpace; re-exported here (its first raiser)
    first_min_index,
    json_scalar,
    padded_chunks,
    register,
    reject_none,
)

_LOSSES = ("l1", "l2")


def _overflow_message(
    loss: str,
    what: str,
    lows: Sequence[float],
    highs: Sequence[float],
    rows: Sequence[int] | None = None,
) -> str:
    where = (
        ""
        if rows is None
        else (
            f" of batch row {rows[0]}"
            if len(rows) == 1
            else f" of batch rows {', '.join(map(str, rows[:10]))}{' ...' if len(rows) > 10 else ''}"
        )
    )
    spans = "; ".join(f"{lo!r} to {hi!r}" for lo, hi in list(zip(lows, highs))[:3])
    cause = "squared" if loss == "l2" else "absolute"
    fix = (
        "give the numbers in larger units, or use loss=l1 (its Bayes risk never overflows)"
        if loss == "l2"
        else "give the numbers in larger units"
    )
    return (
        f"reals ({loss}): the {what}{where} exceeds the largest float "
        f"({np.finfo(np.float64).max:.4g}): the values span {spans}, and their mean {cause} "
        f"difference cannot be represented; {fix}"
    )


def _exponent(magnitude: Any) -> Any:
    """e with magnitude / 2^e in [0.5, 1) (0 for 0): the scale that keeps differences finite."""
    return np.frexp(magnitude)[1]


def _to_size(scaled: Any, e: Any, loss: str) -> Any:
    """A mean loss of values scaled by 2^-e back to their size (exact: a power of two); inf,
    without a warning, where it exceeds the largest float."""
    with np.errstate(over="ignore"):
        return np.ldexp(scaled, e if loss == "l1" else 2 * e)


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
        self.lowest = np.where(self.valid, self.values, np.inf).min(axis=1, initial=np.inf)
        self.highest = np.where(self.valid, self.values, -np.inf).max(axis=1, initial=-np.inf)
        self.magnitude = np.maximum(np.abs(self.lowest), np.abs(self.highest))

    def _unscaled(
        self,
        scaled_risks: np.ndarray,
        e: np.ndarray,
        rows: np.ndarray,
        what: str,
        actions: np.ndarray | None = None,
    ) -> np.ndarray:
        """Risks of the values scaled by 2^-e back to their size (one row per prompt `rows`);
        RiskOverflowError naming the prompts where that exceeds the largest float."""
        out = _to_size(
            scaled_risks, e.reshape((-1,) + (1,) * (scaled_risks.ndim - 1)), self.space.loss
        )
        finite = np.isfinite(out)
        bad = ~(finite if finite.ndim == 1 else finite.all(axis=1))
        if bad.any():
            lows, highs = self.lowest[rows], self.highest[rows]
            if actions is not None:
                lows, highs = np.minimum(lows, actions), np.maximum(highs, actions)
            raise RiskOverflowError(
                _overflow_message(
                    self.space.loss,
                    what,
                    lows[bad].tolist(),
                    highs[bad].tolist(),
                    rows[bad].tolist(),
                ),
                rows[bad],
            )
        return out

    def _risks_of(self, actions: np.ndarray, known: np.ndarray, what: str) -> np.ndarray:
        """Each prompt's mean loss of its action, scaled as the module doc says; NaN where the
        action is not `known`."""
        e = _exponent(np.maximum(self.magnitude, np.abs(actions)))
        diff = np.ldexp(self.values, -e[:, None]) - np.ldexp(actions, -e)[:, None]
        loss = np.abs(diff) if self.space.loss == "l1" else diff * diff
        scaled = np.where(self.valid & known[:, None], loss, 0.0).sum(axis=1) / self.sizes
        risks = self._unscaled(scaled, e, np.arange(len(self.items)), what, actions)
        return np.where(known, risks, np.nan)

    def bayes(self) -> tuple[list[Any], np.ndarray]:
        if self.space.loss == "l1":  # the lower median: the ceil(n / 2)-th smallest value
            ordered = np.sort(np.where(self.valid, self.values, np.inf), axis=1)
            action = ordered[np.arange(len(self.items)), (self.sizes - 1) // 2]
        else:
            e = _exponent(self.magnitude)
            mean = np.where(self.valid, np.ldexp(self.values, -e[:, None]), 0.0).sum(axis=1)
            # the mean lies between the extremes: rounding must not push it past them (nor past
            # the largest float)
            action = np.clip(np.ldexp(mean / self.sizes, e), self.lowest, self.highest)
        known = np.ones(len(self.items), dtype=bool)
        return [float(a) for a in action], self._risks_of(action, known, "Bayes risk")

    def risk(self, actions: Sequence[Any]) -> np.ndarray:
        known = np.array([a is not None for a in actions], dtype=bool)
        chosen = np.array([self.space.canonical(a) if a is not None else 0.0 for a in actions])
        return self._risks_of(chosen, known, "risk")

    def _compute_sample_risks(self) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for sl, _ in padded_chunks(np.full(len(self.items), self.n_samples), self.n_samples):
            valid, e = self.valid[sl], _exponent(self.magnitude[sl])
            values = np.ldexp(self.values[sl], -e[:, None])
            diff = values[:, :, None] - values[:, None, :]
            loss = np.abs(diff) if self.space.loss == "l1" else diff * diff
            loss = np.where(valid[:, :, None] & valid[:, None, :], loss, 0.0)
            scaled = loss.sum(axis=1) / self.sizes[sl, None]
            risks = self._unscaled(scaled, e, np.arange(len(self.items))[sl], "risk of a sample")
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
        # Python floats: inf (no warning) where |a - b| or its square exceeds the largest float
        diff = self.canonical(a) - self.canonical(b)
        return abs(diff) if self.loss == "l1" else diff * diff

    def max_risk(self, latents: Sequence[Any]) -> float:
        # E|x - median| <= R / 2 and Var <= (R / 2)^2 (Popoviciu) for values spanning R
        values = np.array([self.canonical(x) for x in latents], dtype=np.float64)
        if not values.size:
            return 0.0
        lo, hi = float(values.min()), float(values.max())
        e = int(_exponent(max(abs(lo), abs(hi))))
        half = (math.ldexp(hi, -e) - math.ldexp(lo, -e)) / 2.0
        bound = _to_size(half if self.loss == "l1" else half * half, e, self.loss)
        return self._refuse(float(bound), lo, hi, "bound on the Bayes risk")

    def agreement(self, action: Any, latent: Any) -> float:
        # 1 - the relative error of the answer against a sample (the rel_error metric with the
        # sample as truth), floored at 0: scale-free, 1 only for the same number. A difference
        # that overflows to inf is more than |latent| (a finite float) apart: 0, as it should be.
        if latent == 0.0:
            return float(action == 0.0)
        return max(0.0, 1.0 - abs(action - latent) / abs(latent))

    def _mean_losses(self, x: np.ndarray, actions: np.ndarray, w: np.ndarray) -> np.ndarray:
        """sum_i w_i d(x_i, a) / sum_i w_i for each action a, scaled as the module doc says;
        inf where the true value exceeds the largest float."""
        e = int(_exponent(max(np.abs(x).max(), np.abs(actions).max())))
        diff = np.ldexp(x, -e)[:, None] - np.ldexp(actions, -e)[None, :]
        loss = np.abs(diff) if self.loss == "l1" else diff * diff
        return _to_size((w @ loss) / w.sum(), e, self.loss)

    def _refuse(self, risk: float, lo: float, hi: float, what: str) -> float:
        """`risk`, unless it overflowed: then RiskOverflowError with the values' range."""
        if not math.isfinite(risk):
            raise RiskOverflowError(_overflow_message(self.loss, what, [lo], [hi]))
        return risk

    def _bayes(self, items: list[float], w: np.ndarray) -> BayesResult:
        x = np.array(items, dtype=np.float64)
        if self.loss == "l1":
            action = weighted_lower_median(x, w)
        else:
            e = int(_exponent(np.abs(x).max()))
            mean = math.ldexp(float(w @ np.ldexp(x, -e) / w.sum()), e)
            action = min(max(mean, float(x.min())), float(x.max()))  # rounding stays inside
        return BayesResult(action, self._risk(action, items, w, "Bayes risk"))

    def _risk(self, action: float, items: list[float], w: np.ndarray, what: str = "risk") -> float:
        x = np.array(items, dtype=np.float64)
        risk = float(self._mean_losses(x, np.array([action]), w)[0])
        return self._refuse(risk, min(float(x.min()), action), max(float(x.max()), action), what)

    def sample_mbr(self, latents: Sequence[Any], weights: Any = None) -> BayesResult:
        """l_Sample as `LatentSpace.sample_mbr`, with the risks scaled as the module doc says
        (the pairwise distances themselves may overflow where the risks do not)."""
        items, w = self._prepare(latents, weights)
        x = np.array(items, dtype=np.float64)
        risks = self._mean_losses(x, x, w)
        best = first_min_index(risks)
        return BayesResult(
            items[best],
            self._refuse(
                float(risks[best]), float(x.min()), float(x.max()), "risk of the chosen sample"
            ),
        )

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
