"""Percentile bootstrap: definition, joint resampling, NaN handling, vectorised prr path."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from pipeline.evaluation import bootstrap_ci, concordance_auc, prr


def _reference_percentile_ci(metric, arrays, n_boot, alpha, seed):
    """The textbook definition, written out: same index draws, loop, drop NaN, quantiles."""
    n = len(arrays[0])
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    reps = np.array([metric(*(np.asarray(a)[i] for a in arrays)) for i in idx], dtype=float)
    reps = reps[~np.isnan(reps)]
    return np.quantile(reps, [alpha / 2, 1 - alpha / 2])


def test_mean_matches_definition_and_normal_theory() -> None:
    x = np.random.default_rng(0).normal(loc=2.0, scale=3.0, size=400)
    point, low, high = bootstrap_ci(np.mean, x, n_boot=2000, alpha=0.1, seed=5)
    assert point == pytest.approx(float(np.mean(x)), abs=1e-15)
    ref_low, ref_high = _reference_percentile_ci(np.mean, [x], 2000, 0.1, 5)
    assert (low, high) == (pytest.approx(ref_low, abs=1e-15), pytest.approx(ref_high, abs=1e-15))
    # 90% normal-theory half width 1.645 * sd / sqrt(n); the bootstrap agrees to ~10%.
    half = 1.645 * np.std(x) / math.sqrt(len(x))
    assert (high - low) / 2 == pytest.approx(half, rel=0.1)


def test_rows_are_resampled_jointly() -> None:
    a = np.arange(50.0)
    # If a and b were resampled independently, mean(a - b) would vary around 0.
    assert tuple(bootstrap_ci(lambda x, y: float(np.mean(x - y)), a, a.copy(), n_boot=200)) == (
        0.0,
        0.0,
        0.0,
    )
    # 2-D arrays: rows stay whole.
    m = np.stack([a, a], axis=1)
    assert bootstrap_ci(lambda z: float(np.mean(z[:, 0] - z[:, 1])), m, n_boot=50) == (
        0.0,
        0.0,
        0.0,
    )


def test_seed_reproducible() -> None:
    x = np.random.default_rng(1).normal(size=100)
    assert bootstrap_ci(np.median, x, seed=3) == bootstrap_ci(np.median, x, seed=3)
    assert bootstrap_ci(np.median, x, seed=3) != bootstrap_ci(np.median, x, seed=4)
    rng_a, rng_b = np.random.default_rng(9), np.random.default_rng(9)
    assert bootstrap_ci(np.median, x, seed=rng_a) == bootstrap_ci(np.median, x, seed=rng_b)


def test_nan_replicates_are_ignored() -> None:
    x = np.arange(10.0)

    def mean_or_nan(v: np.ndarray) -> float:  # NaN for roughly half of the resamples
        return float(np.mean(v)) if np.mean(v) > 4.5 else math.nan

    point, low, high = bootstrap_ci(mean_or_nan, x, n_boot=500, seed=2)
    assert math.isnan(point)  # the full-data mean is 4.5: NaN by construction, reported as is
    ref_low, ref_high = _reference_percentile_ci(mean_or_nan, [x], 500, 0.05, 2)
    assert low == pytest.approx(ref_low, abs=1e-15) and high == pytest.approx(ref_high, abs=1e-15)
    assert low > 4.5


def test_all_nan_replicates_give_nan_interval() -> None:
    point, low, high = bootstrap_ci(lambda v: math.nan, np.arange(5.0), n_boot=20)
    assert math.isnan(point) and math.isnan(low) and math.isnan(high)


def test_prr_with_degenerate_resamples() -> None:
    # Resamples without the single good item have constant quality: prr NaN, ignored.
    u, q = np.array([0.0, 1.0, 2.0, 3.0]), np.array([1.0, 0.0, 0.0, 0.0])
    point, low, high = bootstrap_ci(functools.partial(prr, max_rejection=1.0), u, q, n_boot=300)
    ref = _reference_percentile_ci(lambda a, b: prr(a, b, 1.0), [u, q], 300, 0.05, 0)
    assert point == pytest.approx(1.0)
    assert (low, high) == (pytest.approx(ref[0], abs=1e-12), pytest.approx(ref[1], abs=1e-12))


@pytest.mark.parametrize("ties", ["average", "polygraph"])
@pytest.mark.parametrize("max_rejection", [0.5, 1.0])
def test_vectorised_prr_path_equals_per_replicate_loop(ties: str, max_rejection: float) -> None:
    rng = np.random.default_rng(4)
    u = rng.integers(0, 12, size=300) / 12  # ties, as Bayes risks of 12 samples
    q = -u + rng.normal(size=300)
    fast = bootstrap_ci(
        functools.partial(prr, max_rejection=max_rejection, ties=ties), u, q, seed=1
    )
    slow = bootstrap_ci(lambda a, b: prr(a, b, max_rejection, ties), u, q, seed=1)  # no .batched
    assert fast.point == slow.point
    assert fast.low == pytest.approx(slow.low, abs=1e-12)
    assert fast.high == pytest.approx(slow.high, abs=1e-12)


def test_vectorised_concordance_path_equals_per_replicate_loop() -> None:
    rng = np.random.default_rng(8)
    u = rng.integers(0, 6, size=40).astype(float)
    q = rng.integers(0, 3, size=40).astype(float)  # small: some resamples are degenerate
    q[:37] = 1.0
    fast = bootstrap_ci(concordance_auc, u, q, n_boot=400, seed=2)
    slow = bootstrap_ci(lambda a, b: concordance_auc(a, b), u, q, n_boot=400, seed=2)
    assert fast == slow
    ref = _reference_percentile_ci(concordance_auc, [u, q], 400, 0.05, 2)
    assert (fast.low, fast.high) == (
        pytest.approx(ref[0], abs=1e-15),
        pytest.approx(ref[1], abs=1e-15),
    )


def test_concordance_interval_contains_point() -> None:
    rng = np.random.default_rng(6)
    u = rng.normal(size=200)
    q = -u + rng.normal(size=200)
    point, low, high = bootstrap_ci(concordance_auc, u, q, n_boot=200)
    assert low < point < high


def test_bad_arguments() -> None:
    x = np.arange(5.0)
    with pytest.raises(ValueError, match="at least one array"):
        bootstrap_ci(np.mean)
    with pytest.raises(ValueError, match=r"same number of rows.*\[5, 4\]"):
        bootstrap_ci(lambda a, b: 0.0, x, x[:4])
    with pytest.raises(ValueError, match="n_boot"):
        bootstrap_ci(np.mean, x, n_boot=0)
    with pytest.raises(ValueError, match="alpha"):
        bootstrap_ci(np.mean, x, alpha=1.0)
    with pytest.raises(ValueError, match="empty"):
        bootstrap_ci(np.mean, np.array([]))
    with pytest.raises(ValueError, match="scalar"):
        bootstrap_ci(np.mean, 3.0)


def _tied_and_continuous_data():
    rng = np.random.default_rng(11)
    tied_u = rng.integers(0, 15, size=250) / 15  # Bayes risks of 15 samples
    tied_q = np.round(-tied_u + rng.normal(size=250), 1)
    cont_u = rng.normal(size=180)
    cont_u[:5] = np.inf  # inf is a valid uncertainty
    cont_q = -np.minimum(cont_u, 3.0)[::-1] + rng.normal(size=180)
    few_q = np.where(np.arange(30) < 28, 1.0, 0.0)  # most resamples constant: NaN replicates
    return [(tied_u, tied_q), (cont_u, cont_q), (rng.integers(0, 3, size=30) * 1.0, few_q)]


@pytest.mark.parametrize("case", range(3))
@pytest.mark.parametrize("max_rejection", [0.5, 1.0, 0.01])
def test_counted_prr_equals_the_replicates_computed_on_the_resampled_arrays(case, max_rejection):
    """The counted form (a replicate from how often each item was drawn) against prr on each
    resample itself: the same draws, the same values up to the rounding of sums."""
    u, q = _tied_and_continuous_data()[case]
    fast = bootstrap_ci(
        functools.partial(prr, max_rejection=max_rejection), u, q, n_boot=300, seed=3
    )
    assert fast.point == prr(u, q, max_rejection) or math.isnan(fast.point)
    if max_rejection * len(u) < 2:  # fewer than 2 rejection points: every replicate NaN
        assert math.isnan(fast.low) and math.isnan(fast.high)
        return
    ref = _reference_percentile_ci(lambda a, b: prr(a, b, max_rejection), [u, q], 300, 0.05, 3)
    assert (fast.low, fast.high) == (
        pytest.approx(ref[0], abs=1e-12),
        pytest.approx(ref[1], abs=1e-12),
    )
    assert fast.low != fast.high


@pytest.mark.parametrize("case", range(3))
def test_counted_auc_equals_the_replicates_computed_on_the_resampled_arrays_exactly(case):
    u, q = _tied_and_continuous_data()[case]
    fast = bootstrap_ci(concordance_auc, u, q, n_boot=300, seed=4)
    ref = _reference_percentile_ci(concordance_auc, [u, q], 300, 0.05, 4)
    assert (fast.low, fast.high) == tuple(ref)  # integer pair counts: bit for bit
    assert fast.low < fast.high


def test_counted_auc_replicates_are_the_pair_counts_of_the_expanded_sample() -> None:
    """Per replicate, not only the interval: the weighted pair counts against brute force over
    all pairs of the resample written out."""
    from pipeline.evaluation.uq_metrics import _concordance_auc_counted

    rng = np.random.default_rng(5)
    u = rng.integers(0, 6, size=40) / 6
    q = rng.integers(0, 4, size=40) * 1.0
    counted = _concordance_auc_counted(u, q)
    idx = rng.integers(0, 40, size=(25, 40))
    weights = np.stack([np.bincount(counted.cells[i], minlength=counted.n_cells) for i in idx])
    got = counted.replicates(weights)
    for row, i in zip(got, idx):
        a, b = u[i], q[i]
        conc = disc = tied = comp = 0
        for x in range(40):
            for y in range(x + 1, 40):
                if b[x] == b[y]:
                    continue
                comp += 1
                hi, lo = (x, y) if b[x] > b[y] else (y, x)
                if a[hi] < a[lo]:
                    conc += 1
                elif a[hi] > a[lo]:
                    disc += 1
                else:
                    tied += 1
        assert row == (conc + 0.5 * tied) / comp


def test_polygraph_ties_have_no_counted_form_and_take_the_sorting_path() -> None:
    from pipeline.evaluation.uq_metrics import _prr_counted

    u, q = _tied_and_continuous_data()[0]
    assert _prr_counted(u, q, ties="polygraph") is None
    fast = bootstrap_ci(functools.partial(prr, ties="polygraph"), u, q, n_boot=200, seed=1)
    ref = _reference_percentile_ci(lambda a, b: prr(a, b, ties="polygraph"), [u, q], 200, 0.05, 1)
    assert (fast.low, fast.high) == (
        pytest.approx(ref[0], abs=1e-12),
        pytest.approx(ref[1], abs=1e-12),
    )


def test_draws_in_blocks_are_the_draws_of_one_call(monkeypatch) -> None:
    """Blocks of replicates (memory bounded at any n) see the resamples of one (n_boot, n) call."""
    from pipeline.evaluation import bootstrap

    x = np.random.default_rng(2).normal(size=97)
    whole = bootstrap_ci(np.mean, x, n_boot=250, seed=7)
    monkeypatch.setattr(bootstrap, "_BATCH_ELEMENTS", 97 * 3)  # blocks of 3 replicates
    assert bootstrap_ci(np.mean, x, n_boot=250, seed=7) == whole
    ref = _reference_percentile_ci(np.mean, [x], 250, 0.05, 7)
    assert (whole.low, whole.high) == (
        pytest.approx(ref[0], abs=1e-15),
        pytest.approx(ref[1], abs=1e-15),
    )


@pytest.mark.parametrize("case", range(3))
def test_several_metrics_on_one_set_of_resamples_equal_each_bootstrapped_alone(case, monkeypatch):
    """bootstrap_cis draws once for all metrics (and counts the cells PRR and AUC share once):
    each interval is the one bootstrap_ci gives that metric alone with the same seed."""
    from pipeline.evaluation import bootstrap, bootstrap_cis

    u, q = _tied_and_continuous_data()[case]
    metrics = [
        functools.partial(prr, max_rejection=0.5, ties="average"),
        concordance_auc,
        functools.partial(prr, ties="polygraph"),  # the sorting path
        lambda a, b: float(np.mean(a) - np.mean(b)),
    ]  # one call per replicate
    for blocks in (None, 3):  # the default blocks of draws, then blocks of 3 replicates
        if blocks:
            monkeypatch.setattr(bootstrap, "_COUNTED_ELEMENTS", blocks * len(u))
        alone = [bootstrap_ci(m, u, q, n_boot=300, seed=5) for m in metrics]
        together = bootstrap_cis(metrics, u, q, n_boot=300, seed=5)
        np.testing.assert_array_equal(np.array(together), np.array(alone))  # NaN equals NaN
    with pytest.raises(ValueError, match="at least one metric"):
        bootstrap_cis([], u, q)
