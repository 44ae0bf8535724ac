"""How well an uncertainty score ranks generations by quality: PRR and concordance AUC.

Conventions (docs/design.md s4): ``uncertainty`` higher = less confident; ``quality`` higher = better
(pass ``-loss`` for distances such as Hamming or KL). numpy only.

PRR follows lm-polygraph 0.7.0 (``ue_metrics.PredictionRejectionArea`` normalised as in
``UEManager.eval_ue``) with two differences, both deliberate:

* the random baseline is the exact expectation over uniformly random orderings instead of the mean
  of 1000 seeded shuffles (its closed form is below);
* ``ties="average"`` (default) makes the score independent of how tied uncertainties are ordered.

The prediction-rejection curve: sort items by uncertainty, most confident first, giving the
min-max-normalised qualities ``s_1..s_n``; with ``C_k = s_1 + ... + s_k`` the curve point after
rejecting the ``n - k`` least confident items is ``C_k / k``. lm-polygraph averages it over the
``r = int(max_rejection * n)`` points ``k = n - r + 1 .. n`` (0 to ``r - 1`` items rejected).
Under a uniformly random ordering ``E[C_k] = k * mean(s)``, so every curve point has expectation
``mean(s)`` and the exact random baseline is ``mean(s)``, whatever ``r`` is.
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

import numpy as np

TiesMode = Literal["average", "polygraph"]
_TIES_MODES = ("average", "polygraph")


class PRRComponents(NamedTuple):
    """Unnormalised areas under the rejection curve (lm-polygraph's scale: quality min-max scaled).

    ``normalized == (raw - random) / (oracle - random)``; NaN where that is undefined.
    """

    raw: float
    oracle: float
    random: float
    normalized: float


# ---------------------------------------------------------------------------------------------
# Input checking shared by both metrics. Kept cheap: bootstrap_ci calls these 1000s of times.
# ---------------------------------------------------------------------------------------------


def _as_1d_float(values: object, name: str) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"{name} must be a sequence of numbers; could not convert it: {err}"
        ) from err
    if arr.ndim != 1:
        raise ValueError(
            f"{name} must be one-dimensional (one value per item), got shape {arr.shape}; "
            "flatten it or pass one column"
        )
    return arr


def _check_pair(uncertainty: object, quality: object) -> tuple[np.ndarray, np.ndarray]:
    u = _as_1d_float(uncertainty, "uncertainty")
    q = _as_1d_float(quality, "quality")
    if u.shape[0] != q.shape[0]:
        raise ValueError(
            f"uncertainty has {u.shape[0]} values but quality has {q.shape[0]}; "
            "pass exactly one uncertainty and one quality value per item"
        )
    n_nan_u = int(np.isnan(u).sum())
    n_nan_q = int(np.isnan(q).sum())
    if n_nan_u or n_nan_q:
        raise ValueError(
            f"found NaN in the inputs (uncertainty: {n_nan_u}, quality: {n_nan_q} of {u.shape[0]}); "
            "drop those items first, e.g. keep = ~(np.isnan(u) | np.isnan(q)); "
            "metric(u[keep], q[keep])"
        )
    return u, q


def _check_max_rejection(max_rejection: float) -> None:
    is_number = isinstance(max_rejection, int | float | np.floating | np.integer)
    if isinstance(max_rejection, bool) or not is_number or not 0.0 < float(max_rejection) <= 1.0:
        raise ValueError(
            f"max_rejection must be a number in (0, 1] (the largest fraction of items rejected), "
            f"got {max_rejection!r}; the paper uses 0.5"
        )


# ---------------------------------------------------------------------------------------------
# PRR
# ---------------------------------------------------------------------------------------------


def _polygraph_isclose(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``np.isclose(lo, hi)`` with its defaults (rtol 1e-5, atol 1e-8), elementwise and cheap."""
    return np.abs(lo - hi) <= 1e-8 + 1e-5 * np.abs(hi)


def _normalize_rows(quality: np.ndarray) -> np.ndarray:
    """lm-polygraph's ``ue_metric.normalize`` per row: min-max scaling, widened by 1 if constant."""
    lo = quality.min(axis=1, keepdims=True)
    hi = quality.max(axis=1, keepdims=True)
    close = _polygraph_isclose(lo, hi)
    lo = np.where(close, lo - 1.0, lo)
    hi = np.where(close, hi + 1.0, hi)
    return (quality - lo) / (hi - lo)


def _sorted_by_confidence(u: np.ndarray, t: np.ndarray, ties: str) -> np.ndarray:
    """Per row, the qualities ordered most confident (lowest uncertainty) first."""
    n_rows, n = t.shape
    if ties == "polygraph":
        # The very call lm-polygraph makes (default, unstable sort): identical order even with ties.
        if n_rows == 1:
            return t[:, np.argsort(u[0])]
        return np.take_along_axis(t, np.argsort(u, axis=1), axis=1)
    order = np.argsort(u, axis=1, kind="stable")
    s = np.take_along_axis(t, order, axis=1)
    su = np.take_along_axis(u, order, axis=1)
    # Blocks of equal uncertainty (a new block also starts at every row). Every curve point
    # C_k / k is linear in s, so its expectation over uniformly random tie-breaks replaces each
    # position of a block by the block mean.
    new_block = np.empty((n_rows, n), dtype=bool)
    new_block[:, 0] = True
    np.not_equal(su[:, 1:], su[:, :-1], out=new_block[:, 1:])
    starts = np.flatnonzero(new_block)
    if starts.shape[0] == n_rows * n:
        return s  # no ties
    counts = np.diff(np.append(starts, n_rows * n))
    means = np.add.reduceat(s.reshape(-1), starts) / counts
    return np.repeat(means, counts).reshape(n_rows, n)


def _curve_area(s: np.ndarray, n_rejection_points: int) -> float:
    """Mean of C_k / k over the last ``n_rejection_points`` values of k (lm-polygraph's sum)."""
    n = s.shape[0]
    r = n_rejection_points
    cumsum = np.cumsum(s)[-r:]
    scores = (cumsum / np.arange(n - r + 1, n + 1))[::-1]
    return float(np.sum(scores) / r)


def _prr_rows(
    uncertainty: np.ndarray,
    quality: np.ndarray,
    max_rejection: float = 0.5,
    ties: str = "average",
    _parts: list | None = None,
) -> np.ndarray:
    """Normalised PRR of each row of two (rows, n) float arrays, inputs assumed valid.

    Vectorised over rows (bootstrap_ci uses it for all replicates at once). If ``_parts`` is a
    list, (t, s_raw, s_oracle) are appended to it for :func:`prr_components`.
    """
    n_rows, n = quality.shape
    # Same expression as lm-polygraph (float product, then int) so r matches it bit for bit.
    r = int(max_rejection * n)
    # Undefined ratio: with n < 2 or r < 2 (only the full-set point, shared by every ordering)
    # oracle == random mathematically.
    if n < 2 or r < 2:
        return np.full(n_rows, np.nan)
    t = _normalize_rows(quality)
    mean_t = t.mean(axis=1, keepdims=True)
    s_raw = _sorted_by_confidence(uncertainty, t, ties)
    s_oracle = np.sort(t, axis=1)[:, ::-1]
    if _parts is not None:
        _parts.extend([t, s_raw, s_oracle])
    # Ratio from centred cumulative sums: (raw - random) / (oracle - random) without the
    # cancellation of two nearly equal areas.
    inv_k = 1.0 / np.arange(n - r + 1, n + 1)
    num = np.cumsum(s_raw - mean_t, axis=1)[:, n - r :] @ inv_k
    den = np.cumsum(s_oracle - mean_t, axis=1)[:, n - r :] @ inv_k
    constant = quality.max(axis=1) == quality.min(axis=1)
    ok = (den > 0) & ~constant
    out = np.full(n_rows, np.nan)
    np.divide(num, den, out=out, where=ok)
    return out


def _validate_prr_args(
    uncertainty: object, quality: object, max_rejection: float, ties: str
) -> tuple[np.ndarray, np.ndarray]:
    if ties not in _TIES_MODES:
        raise ValueError(f"ties must be one of {_TIES_MODES}, got {ties!r}")
    _check_max_rejection(max_rejection)
    u, q = _check_pair(uncertainty, quality)
    if not np.isfinite(q).all():
        n_inf = int(np.isinf(q).sum())
        raise ValueError(
            f"quality has {n_inf} infinite values; PRR min-max scales quality, so it must be "
            "finite: drop or clip those items"
        )
    return u, q


def prr_components(
    uncertainty: object,
    quality: object,
    max_rejection: float = 0.5,
    ties: TiesMode = "average",
) -> PRRComponents:
    """Raw, oracle and exact random areas under the prediction-rejection curve, and their ratio.

    ``raw`` and ``oracle`` are lm-polygraph's ``PredictionRejectionArea(max_rejection)`` of
    ``(uncertainty, quality)`` and of ``(-quality, quality)``; ``random`` is the exact expectation
    of ``raw`` over uniformly random orderings (``mean`` of the min-max-scaled quality). See
    :func:`prr` for arguments, errors and when ``normalized`` is NaN. The three areas are NaN
    when no rejection point exists (``int(max_rejection * n) < 1``).
    """
    u, q = _validate_prr_args(uncertainty, quality, max_rejection, ties)
    n = q.shape[0]
    r = int(max_rejection * n)
    if r < 1:
        return PRRComponents(math.nan, math.nan, math.nan, math.nan)
    parts: list = []
    normalized = float(_prr_rows(u[None], q[None], max_rejection, ties, parts)[0])
    if not parts:  # r == 1 (n >= 1): only the full-set point, the same for every ordering
        t = _normalize_rows(q[None])
        s_raw = _sorted_by_confidence(u[None], t, ties)
        s_oracle = np.sort(t, axis=1)[:, ::-1]
    else:
        t, s_raw, s_oracle = parts
    return PRRComponents(
        raw=_curve_area(s_raw[0], r),
        oracle=_curve_area(s_oracle[0], r),
        random=float(np.mean(t[0])),
        normalized=normalized,
    )


def prr(
    uncertainty: object,
    quality: object,
    max_rejection: float = 0.5,
    ties: TiesMode = "average",
) -> float:
    """Normalised prediction-rejection ratio: 1 = oracle ranking, 0 = random, < 0 = worse.

    ``(raw - random) / (oracle - random)`` with lm-polygraph's ``PredictionRejectionArea``
    (areas averaged over rejecting 0 .. ``int(max_rejection * n) - 1`` items) and the exact
    random baseline (no shuffling).

    Args:
        uncertainty: one score per item, higher = less confident (``inf`` is allowed).
        quality: one value per item, higher = better; finite.
        max_rejection: largest rejected fraction, in (0, 1]; the paper uses 0.5.
        ties: ``"average"`` (default): the exact expectation over uniformly random orderings of
            tied uncertainties, so the score does not depend on input order.
            ``"polygraph"``: order ties exactly as lm-polygraph does (``np.argsort``); equal to
            lm-polygraph's number on tie-free input up to its Monte-Carlo random baseline.

    Returns NaN (never raises) when the ratio is undefined because oracle == random: fewer than
    2 items, ``int(max_rejection * n) < 2`` (with fewer than two rejection points every ordering
    gives the same area; this includes ``max_rejection * n < 1``), or constant quality.
    lm-polygraph would return the unnormalised area in the constant case.

    Raises:
        ValueError: length mismatch, non-1-D input, NaN anywhere (message gives the counts and
            how to drop them), infinite quality, ``max_rejection`` outside (0, 1], unknown ``ties``.
    """
    u, q = _validate_prr_args(uncertainty, quality, max_rejection, ties)
    return float(_prr_rows(u[None], q[None], max_rejection, ties)[0])


def _prr_batched(
    uncertainty: np.ndarray, quality: np.ndarray, max_rejection: float = 0.5, ties: str = "average"
) -> np.ndarray:
    """prr of each row of (rows, n) arrays; used by bootstrap_ci after prr validated the data."""
    if ties not in _TIES_MODES:
        raise ValueError(f"ties must be one of {_TIES_MODES}, got {ties!r}")
    _check_max_rejection(max_rejection)
    return _prr_rows(
        np.asarray(uncertainty, dtype=float), np.asarray(quality, dtype=float), max_rejection, ties
    )


# bootstrap_ci looks for this attribute to evaluate all replicates in one vectorised call.
prr.batched = _prr_batched  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------------
# Concordance AUC
# ---------------------------------------------------------------------------------------------


def _tied_pairs_rows(
    sorted_rows: np.ndarray, same_as_previous: np.ndarray | None = None
) -> np.ndarray:
    """Per row, the number of pairs inside runs of equal neighbours of a row-wise sorted array.

    ``same_as_previous`` (rows, n - 1) may be given instead of comparing neighbours for equality.
    """
    n_rows, n = sorted_rows.shape
    if same_as_previous is None:
        same_as_previous = sorted_rows[:, 1:] == sorted_rows[:, :-1]
    new_run = np.ones((n_rows, n), dtype=bool)
    new_run[:, 1:] = ~same_as_previous
    starts = np.flatnonzero(new_run)
    lengths = np.diff(np.append(starts, n_rows * n)).astype(np.int64)
    pairs = lengths * (lengths - 1) // 2
    return np.bincount(starts // n, weights=pairs, minlength=n_rows).astype(np.int64)


def _ascending_pairs_rows(ranks: np.ndarray) -> np.ndarray:
    """Per row of a (rows, n) array of non-negative ints: pairs i < j with ranks[i] < ranks[j].

    Vectorised wavelet-style counting: a pair with ``a_i < a_j`` is counted once, at the highest
    bit where they differ (``a_i`` has 0 there, ``a_j`` 1, equal higher bits). Positions are kept
    sorted by (row, higher bits, position); each of the ``bit_length(max rank)`` levels is a
    constant number of O(rows * n) numpy passes, so O(n log n) per row in total.
    """
    n_rows, n = ranks.shape
    total = np.zeros(n_rows, dtype=np.int64)
    if n < 2:
        return total
    flat = ranks.reshape(-1).astype(np.int64)
    size = flat.shape[0]
    row_start = np.zeros(size, dtype=bool)
    row_start[::n] = True
    positions = np.arange(size)
    order = np.arange(size)  # flat positions sorted by (row, flat >> (b + 1), position)
    for b in range(int(flat.max()).bit_length() - 1, -1, -1):
        a = flat[order]
        zero = ((a >> b) & 1) == 0
        prefix = a >> (b + 1)
        # A group (same row, same higher bits) is contiguous in `order`; rows never mix.
        is_start = row_start.copy()
        is_start[1:] |= prefix[1:] != prefix[:-1]
        start_pos = np.flatnonzero(is_start)
        group_of = np.cumsum(is_start) - 1
        group_start = start_pos[group_of]
        zeros_cum = np.cumsum(zero)
        zeros_so_far = zeros_cum - (zeros_cum - zero)[group_start]  # zeros in group up to here
        # Every 1 pairs with the 0s before it in its group; rows are contiguous blocks of n.
        total += np.where(zero, 0, zeros_so_far).reshape(n_rows, n).sum(axis=1)
        # Stable partition of every group by this bit gives the order for the next level.
        zeros_per_group = np.add.reduceat(zero.astype(np.int64), start_pos)
        new_pos = np.where(
            zero,
            group_start + zeros_so_far - 1,
            positions + zeros_per_group[group_of] - zeros_so_far,
        )
        new_order = np.empty_like(order)
        new_order[new_pos] = order
        order = new_order
    return total


def _dense_ranks_rows(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row dense ranks (0 = smallest, ties share a rank) and each row sorted."""
    order = np.argsort(values, axis=1)
    sorted_rows = np.take_along_axis(values, order, axis=1)
    new_value = np.ones(values.shape, dtype=np.int64)
    new_value[:, 0] = 0
    new_value[:, 1:] = sorted_rows[:, 1:] != sorted_rows[:, :-1]
    ranks = np.empty(values.shape, dtype=np.int64)
    np.put_along_axis(ranks, order, np.cumsum(new_value, axis=1), axis=1)
    return ranks, sorted_rows


def count_ascending_pairs(values: object) -> int:
    """Number of index pairs ``i < j`` with ``values[i] < values[j]`` (strict), in O(n log n)."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"values must be one-dimensional, got shape {arr.shape}")
    if arr.shape[0] < 2:
        return 0
    ranks, _ = _dense_ranks_rows(arr.reshape(1, -1))
    return int(_ascending_pairs_rows(ranks)[0])


class ConcordanceCounts(NamedTuple):
    """Pair counts behind :func:`concordance_auc` (pairs tied in quality are not comparable)."""

    concordant: int  # higher quality has strictly lower uncertainty
    discordant: int  # higher quality has strictly higher uncertainty
    tied_uncertainty: int  # different quality, equal uncertainty (scored 1/2)
    comparable: int  # all pairs with different quality


def _concordance_counts_rows(u: np.ndarray, q: np.ndarray) -> np.ndarray:
    """(rows, 4) int64 array of ConcordanceCounts fields for each row of (rows, n) arrays."""
    n_rows, n = u.shape
    if n < 2:
        return np.zeros((n_rows, 4), dtype=np.int64)
    # Sort each row by quality ascending, ties in quality by uncertainty DESCENDING: then for
    # positions i < j, u_i < u_j can only happen across quality groups (q_i < q_j), and it is
    # exactly a discordant pair.
    order = np.lexsort((-u, q), axis=-1)
    u_sorted = np.take_along_axis(u, order, axis=1)
    q_sorted = np.take_along_axis(q, order, axis=1)
    same_q = q_sorted[:, 1:] == q_sorted[:, :-1]
    both_tied = _tied_pairs_rows(u_sorted, same_q & (u_sorted[:, 1:] == u_sorted[:, :-1]))
    q_tied = _tied_pairs_rows(q_sorted, same_q)
    ranks, u_by_value = _dense_ranks_rows(u_sorted)
    u_tied = _tied_pairs_rows(u_by_value)
    comparable = n * (n - 1) // 2 - q_tied
    tied_u = u_tied - both_tied
    discordant = _ascending_pairs_rows(ranks)
    concordant = comparable - tied_u - discordant
    return np.stack([concordant, discordant, tied_u, comparable], axis=1)


def concordance_counts(uncertainty: object, quality: object) -> ConcordanceCounts:
    """Concordant / discordant / uncertainty-tied / comparable pair counts, in O(n log n)."""
    u, q = _check_pair(uncertainty, quality)
    row = _concordance_counts_rows(u[None], q[None])[0]
    return ConcordanceCounts(*(int(x) for x in row))


def _auc_from_counts(counts: np.ndarray) -> np.ndarray:
    concordant, tied_u, comparable = counts[:, 0], counts[:, 2], counts[:, 3]
    out = np.full(counts.shape[0], np.nan)
    np.divide(concordant + 0.5 * tied_u, comparable, out=out, where=comparable > 0)
    return out


def concordance_auc(uncertainty: object, quality: object) -> float:
    """Concordance AUC (Therneau & Atkinson): P(q_i > q_j | u_i < u_j) over comparable pairs.

    ``(concordant + tied_uncertainty / 2) / comparable`` where pairs with equal quality are
    dropped and pairs with equal uncertainty count 1/2. 0.5 = chance, 1 = perfect ranking.
    O(n log n). Only ranks matter, so ``inf`` is allowed in either input.

    Returns NaN when no pair is comparable (fewer than 2 items or constant quality).

    Raises:
        ValueError: length mismatch, non-1-D input, or NaN anywhere (with counts and a fix).
    """
    u, q = _check_pair(uncertainty, quality)
    return float(_auc_from_counts(_concordance_counts_rows(u[None], q[None]))[0])


def _concordance_auc_batched(uncertainty: np.ndarray, quality: np.ndarray) -> np.ndarray:
    """concordance_auc of each row of (rows, n) arrays; used by bootstrap_ci."""
    u = np.asarray(uncertainty, dtype=float)
    q = np.asarray(quality, dtype=float)
    return _auc_from_counts(_concordance_counts_rows(u, q))


# bootstrap_ci looks for this attribute to evaluate all replicates in one vectorised call.
concordance_auc.batched = _concordance_auc_batched  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------------
# Bootstrap from counts: a resample of n items is how often it drew each distinct (uncertainty,
# quality) pair, so a replicate costs O(n) instead of the O(n log n) sort of the resampled arrays
# (at n = 100k, 1000 replicates of PRR and AUC: ~1 minute instead of ~2 CPU-minutes each).
# ---------------------------------------------------------------------------------------------


class CountedMetric(NamedTuple):
    """A metric prepared for bootstrap_ci's resamples given as counts.

    ``cells[i]`` is item i's cell (items with equal (uncertainty, quality) share one); ``replicates``
    maps a (rows, n_cells) int64 array of how often each resample drew each cell to one value per
    row: the metric of that resample, up to floating-point rounding of the sums (AUC exactly).
    """

    cells: np.ndarray
    n_cells: int
    replicates: object  # Callable[[np.ndarray], np.ndarray]


class _Cells(NamedTuple):
    item_cell: np.ndarray  # (n,) cell of each item
    u: np.ndarray  # (K,) the cells' uncertainty, ascending; ties by quality ascending
    q: np.ndarray  # (K,) the cells' quality


def _cells(u: np.ndarray, q: np.ndarray) -> _Cells:
    order = np.lexsort((q, u))
    su, sq = u[order], q[order]
    new = np.ones(u.shape[0], dtype=bool)
    new[1:] = (su[1:] != su[:-1]) | (sq[1:] != sq[:-1])
    item_cell = np.empty(u.shape[0], dtype=np.int64)
    item_cell[order] = np.cumsum(new) - 1
    return _Cells(item_cell, su[new], sq[new])


def _group_starts(sorted_values: np.ndarray) -> np.ndarray:
    """Start of each run of equal values in a sorted 1-D array."""
    new = np.ones(sorted_values.shape[0], dtype=bool)
    new[1:] = sorted_values[1:] != sorted_values[:-1]
    return np.flatnonzero(new)


def _expanded_cumsum_area(values: np.ndarray, counts: np.ndarray, n: int, r: int) -> np.ndarray:
    """Per row, sum over the last r positions k of C_k / k, where row i's sequence is
    ``values[i, b]`` repeated ``counts[i, b]`` times (each row's counts sum to n)."""
    expanded = np.repeat(values.reshape(-1), counts.reshape(-1)).reshape(values.shape[0], n)
    return np.cumsum(expanded, axis=1)[:, n - r :] @ (1.0 / np.arange(n - r + 1, n + 1))


def _prr_counted(
    uncertainty: object, quality: object, max_rejection: float = 0.5, ties: str = "average"
) -> CountedMetric | None:
    """prr for bootstrap_ci's counted resamples; None under ``ties="polygraph"`` (its order of
    tied items depends on where they sit in the resample, which counts do not keep)."""
    if ties != "average":
        return None
    u, q = _validate_prr_args(uncertainty, quality, max_rejection, ties)
    n = u.shape[0]
    r = int(max_rejection * n)
    cells = _cells(u, q)
    u_starts = _group_starts(cells.u)  # blocks of tied uncertainty (cells sorted by u)
    by_quality = np.argsort(-cells.q, kind="stable")  # the oracle's order, best first
    q_starts = _group_starts(cells.q[by_quality])
    q_values = cells.q[by_quality][q_starts]

    def replicates(w: np.ndarray) -> np.ndarray:
        rows = w.shape[0]
        if n < 2 or r < 2:
            return np.full(rows, np.nan)
        drawn = w > 0
        lo = np.where(drawn, cells.q, np.inf).min(axis=1, keepdims=True)
        hi = np.where(drawn, cells.q, -np.inf).max(axis=1, keepdims=True)
        constant = (lo == hi)[:, 0]
        close = _polygraph_isclose(lo, hi)  # lm-polygraph's normalize, as _normalize_rows
        lo, hi = np.where(close, lo - 1.0, lo), np.where(close, hi + 1.0, hi)
        t = (cells.q - lo) / (hi - lo)  # (rows, K) the scaled quality of each cell
        weighted = w * t
        mean_t = weighted.sum(axis=1, keepdims=True) / n
        # raw: blocks of tied uncertainty, each position the block's mean (ties="average")
        w_block = np.add.reduceat(w, u_starts, axis=1)
        t_block = np.add.reduceat(weighted, u_starts, axis=1)
        block_mean = np.divide(t_block, w_block, out=np.zeros_like(t_block), where=w_block > 0)
        num = _expanded_cumsum_area(block_mean - mean_t, w_block, n, r)
        # oracle: quality descending
        w_value = np.add.reduceat(w[:, by_quality], q_starts, axis=1)
        t_value = (q_values - lo) / (hi - lo)
        den = _expanded_cumsum_area(t_value - mean_t, w_value, n, r)
        out = np.full(rows, np.nan)
        np.divide(num, den, out=out, where=(den > 0) & ~constant)
        return out

    return CountedMetric(cells.item_cell, int(cells.u.shape[0]), replicates)


prr.counted = _prr_counted  # type: ignore[attr-defined]


class _AscendingPairsPlan:
    """:func:`_ascending_pairs_rows` for fixed ranks and varying weights: the pairs i < j with
    ranks[i] < ranks[j], each counted ``w_i * w_j`` times. The wavelet levels (each position's
    order, bit and group) depend on the ranks only, so they are built once; a row of weights
    then costs a few O(K) passes per level."""

    def __init__(self, ranks: np.ndarray) -> None:
        k = ranks.shape[0]
        flat = ranks.astype(np.int64)
        positions = np.arange(k)
        order = np.arange(k)
        self.levels: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        if k < 2:
            return
        for b in range(int(flat.max()).bit_length() - 1, -1, -1):
            a = flat[order]
            zero = ((a >> b) & 1) == 0
            prefix = a >> (b + 1)
            is_start = np.zeros(k, dtype=bool)
            is_start[0] = True
            is_start[1:] = prefix[1:] != prefix[:-1]
            start_pos = np.flatnonzero(is_start)
            group_of = np.cumsum(is_start) - 1
            group_start = start_pos[group_of]
            ones = np.flatnonzero(~zero)
            self.levels.append((order, zero, ones, group_start[ones]))
            zeros_cum = np.cumsum(zero)
            zeros_so_far = zeros_cum - (zeros_cum - zero)[group_start]
            zeros_per_group = np.add.reduceat(zero.astype(np.int64), start_pos)
            new_pos = np.where(
                zero,
                group_start + zeros_so_far - 1,
                positions + zeros_per_group[group_of] - zeros_so_far,
            )
            new_order = np.empty_like(order)
            new_order[new_pos] = order
            order = new_order

    def weighted(self, w: np.ndarray) -> np.ndarray:
        total = np.zeros(w.shape[0], dtype=np.int64)
        for order, zero, ones, ones_group_start in self.levels:
            a = w[:, order]
            zero_w = a * zero
            cum = np.cumsum(zero_w, axis=1)
            # zero-weight before each 1 of the level, within its group
            before = cum[:, ones] - (cum - zero_w)[:, ones_group_start]
            total += (a[:, ones] * before).sum(axis=1)
        return total


def _pairs_within(w: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per row, pairs of drawn items inside each group of cells (``starts``: the groups' first
    cells, in the order of ``w``'s columns)."""
    g = np.add.reduceat(w, starts, axis=1)
    return (g * (g - 1) // 2).sum(axis=1)


def _concordance_auc_counted(uncertainty: object, quality: object) -> CountedMetric:
    """concordance_auc for bootstrap_ci's counted resamples (exact: integer pair counts)."""
    u, q = _check_pair(uncertainty, quality)
    n = u.shape[0]
    cells = _cells(u, q)
    u_starts = _group_starts(cells.u)
    # As _concordance_counts_rows: quality ascending, ties by uncertainty descending, so a pair
    # i < j with u_i < u_j is exactly a discordant one.
    order = np.lexsort((-cells.u, cells.q))
    q_starts = _group_starts(cells.q[order])
    u_rank = np.zeros(cells.u.shape[0], dtype=np.int64)  # dense rank of each cell's u
    u_rank[u_starts[1:]] = 1
    plan = _AscendingPairsPlan(np.cumsum(u_rank)[order])

    def replicates(w: np.ndarray) -> np.ndarray:
        w = w.astype(np.int64, copy=False)
        w_ordered = w[:, order]
        q_tied = _pairs_within(w_ordered, q_starts)
        u_tied = _pairs_within(w, u_starts)
        both_tied = (w * (w - 1) // 2).sum(axis=1)  # a cell is one (u, q) pair
        counts = np.empty((w.shape[0], 4), dtype=np.int64)
        counts[:, 3] = n * (n - 1) // 2 - q_tied
        counts[:, 2] = u_tied - both_tied
        counts[:, 1] = plan.weighted(w_ordered)
        counts[:, 0] = counts[:, 3] - counts[:, 2] - counts[:, 1]
        return _auc_from_counts(counts)

    return CountedMetric(cells.item_cell, int(cells.u.shape[0]), replicates)


concordance_auc.counted = _concordance_auc_counted  # type: ignore[attr-defined]
