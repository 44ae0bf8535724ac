"""Percentile bootstrap confidence intervals for any metric of paired per-item arrays (numpy only)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

# Rows x items per vectorised call: bounds the temporary arrays to a few tens of MB.
_BATCH_ELEMENTS = 2_000_000


def _batched_version(metric_fn: Callable[..., float]) -> Callable[..., np.ndarray] | None:
    """The metric's vectorised form (``metric_fn.batched``: 2-D stacks in, one value per row out).

    Also found through ``functools.partial(metric, **keywords)``; None when there is none.
    """
    fn, keywords = metric_fn, {}
    if isinstance(metric_fn, functools.partial) and not metric_fn.args:
        fn, keywords = metric_fn.func, dict(metric_fn.keywords)
    batched = getattr(fn, "batched", None)
    if batched is None:
        return None
    return lambda *stacks: batched(*stacks, **keywords)


class BootstrapCI(NamedTuple):
    """Point estimate on the full data and the percentile interval; unpacks as a 3-tuple."""

    point: float
    low: float
    high: float


def bootstrap_ci(
    metric_fn: Callable[..., float],
    *arrays: object,
    n_boot: int = 1000,
    alpha: float = 0.05,
    seed: int | np.random.Generator | None = 0,
) -> BootstrapCI:
    """Percentile bootstrap of ``metric_fn(*arrays)``, resampling rows of all arrays jointly.

    Each replicate draws ``n`` row indices with replacement (one draw shared by all arrays, so
    pairs such as (uncertainty_i, quality_i) stay together) and evaluates ``metric_fn`` on the
    resampled arrays. The interval is the ``alpha/2`` and ``1 - alpha/2`` quantiles (numpy's
    default linear interpolation) of the replicates.

    Metrics with a vectorised form (``prr``, ``concordance_auc``; also through
    ``functools.partial(metric, **keywords)``) are evaluated
    on all replicates at once: 1000 replicates of prr at n = 1000 take well under a second.

    NaN replicates are ignored: a resample can be degenerate (e.g. constant quality makes PRR
    and concordance AUC NaN) and says nothing about the spread. If every replicate is NaN the
    interval is (NaN, NaN). The point estimate is ``metric_fn`` on the original data, NaN or not.

    Args:
        metric_fn: called as ``metric_fn(*resampled_arrays)``, returns a float.
        arrays: one or more array-likes with the same length along axis 0 (rows = items).
        n_boot: number of replicates, >= 1.
        alpha: 1 - confidence level, in (0, 1).
        seed: int seed or a ``numpy.random.Generator``; the same seed gives the same interval.

    Raises:
        ValueError: no arrays, arrays of different lengths, zero-length or 0-d arrays,
            ``n_boot < 1``, ``alpha`` outside (0, 1).
    """
    if not arrays:
        raise ValueError("bootstrap_ci needs at least one array to resample after metric_fn")
    if isinstance(n_boot, bool) or not isinstance(n_boot, int | np.integer) or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot!r}")
    if not isinstance(alpha, int | float | np.floating) or not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"alpha must be in (0, 1) (0.05 gives a 95% interval), got {alpha!r}")
    arrs = [np.asarray(a) for a in arrays]
    for i, a in enumerate(arrs):
        if a.ndim == 0:
            raise ValueError(f"array {i} is a scalar; pass one value (row) per item")
    lengths = [a.shape[0] for a in arrs]
    if len(set(lengths)) != 1:
        raise ValueError(
            f"arrays must have the same number of rows to be resampled jointly, got {lengths}"
        )
    n = lengths[0]
    if n == 0:
        raise ValueError("cannot bootstrap empty arrays (0 rows)")

    point = float(metric_fn(*arrs))
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    # All indices drawn at once (one RNG call), so the batched and the per-replicate paths see
    # exactly the same resamples.
    indices = rng.integers(0, n, size=(int(n_boot), n))
    batched = _batched_version(metric_fn)
    if batched is not None and all(a.ndim == 1 for a in arrs):
        step = max(1, _BATCH_ELEMENTS // n)
        replicates = np.concatenate(
            [
                np.asarray(batched(*(a[indices[i : i + step]] for a in arrs)), dtype=float)
                for i in range(0, int(n_boot), step)
            ]
        )
    else:
        replicates = np.fromiter(
            (float(metric_fn(*(a[idx] for a in arrs))) for idx in indices),
            dtype=float,
            count=int(n_boot),
        )
    valid = replicates[~np.isnan(replicates)]
    if valid.size == 0:
        return BootstrapCI(point, math.nan, math.nan)
    low, high = np.quantile(valid, [alpha / 2.0, 1.0 - alpha / 2.0])
    return BootstrapCI(point, float(low), float(high))
