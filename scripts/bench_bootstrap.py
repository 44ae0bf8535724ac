"""Percentile bootstrap of PRR and concordance AUC: the counted form (a replicate from how often
it drew each distinct (uncertainty, quality) pair, O(n)) against the metric on each resampled
array (a sort per replicate: the batched path, and one call per replicate as a plain lambda
takes), on the same draws.

    python scripts/bench_bootstrap.py                        # n = 1k, 10k, 100k; 200 replicates
    python scripts/bench_bootstrap.py --sizes 1000 --n-boot 1000

Per size and data kind ("tied": uncertainties and qualities with few distinct values, as Bayes
risks of M samples and set F1; "continuous": all distinct, the counted form's worst case) it
prints ms per replicate for each path, the ratio, and the largest difference of the interval
bounds (AUC: 0, integer pair counts; PRR: the rounding of sums). Then the library one would use
instead, `scipy.stats.bootstrap` (paired, percentile, the metric called per resample as it
must be): ms per replicate, how many times slower, and how far its bounds are from ours (its
own random draws: a Monte-Carlo difference, which shrinks as the replicates grow).
"""

from __future__ import annotations

import argparse
import functools
import time

import numpy as np


def data(kind: str, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if kind == "tied":
        u = rng.integers(0, 21, size=n) / 20  # Bayes risks of 20 samples
        q = np.round(np.clip(1 - u + rng.normal(scale=0.3, size=n), 0, 1), 1)
    else:
        u = rng.normal(size=n)
        q = -u + rng.normal(size=n)
    return u, q


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    ap.add_argument("--n-boot", type=int, default=200)
    args = ap.parse_args()

    from pipeline.evaluation import bootstrap_ci, concordance_auc, prr

    print(f"{args.n_boot} replicates; ms per replicate")
    print(
        f"{'metric':<6} {'data':<10} {'n':>7} {'counted':>9} {'batched sort':>13} "
        f"{'ratio':>6} {'per call':>9} {'ratio':>6} {'max |bound diff|':>17}"
    )
    scipy_rows = []
    for n in args.sizes:
        for kind in ("tied", "continuous"):
            u, q = data(kind, n)
            for name, metric in (
                ("PRR", functools.partial(prr, max_rejection=0.5)),
                ("AUC", concordance_auc),
            ):
                fast, t_fast = timed(bootstrap_ci, metric, u, q, n_boot=args.n_boot, seed=1)
                owner = metric.func if isinstance(metric, functools.partial) else metric
                counted = owner.counted
                del owner.counted  # the same call without the counted form: the batched sort
                try:
                    batched, t_batched = timed(
                        bootstrap_ci, metric, u, q, n_boot=args.n_boot, seed=1
                    )
                finally:
                    owner.counted = counted
                per_call = None
                if n <= 10_000:  # one call per replicate is too slow beyond
                    per_call, t_call = timed(
                        bootstrap_ci,
                        lambda a, b, m=metric: m(a, b),
                        u,
                        q,
                        n_boot=args.n_boot,
                        seed=1,
                    )
                gap = max(abs(fast.low - batched.low), abs(fast.high - batched.high))
                ms = 1e3 / args.n_boot
                call = (
                    f"{t_call * ms:9.2f} {t_call / t_fast:5.1f}x"
                    if per_call is not None
                    else f"{'-':>9} {'-':>6}"
                )
                print(
                    f"{name:<6} {kind:<10} {n:>7} {t_fast * ms:9.2f} {t_batched * ms:13.2f} "
                    f"{t_batched / t_fast:5.1f}x {call} {gap:17.1e}",
                    flush=True,
                )
                if n <= 10_000:
                    scipy_rows.append((name, kind, n, t_fast, fast, metric))
    if scipy_rows:
        compare_scipy(scipy_rows, args.n_boot)


def compare_scipy(rows, n_boot: int) -> None:
    """Ours against `scipy.stats.bootstrap` on the same data: speed and interval bounds."""
    from scipy.stats import bootstrap

    print(f"\nscipy.stats.bootstrap (paired, percentile, {n_boot} resamples): ms per replicate")
    print(
        f"{'metric':<6} {'data':<10} {'n':>7} {'ours':>8} {'scipy':>9} {'slower':>7} "
        f"{'ours [low, high]':>20} {'scipy [low, high]':>20}"
    )
    for name, kind, n, t_fast, fast, metric in rows:
        u, q = data(kind, n)
        res, t_scipy = timed(
            bootstrap,
            (u, q),
            lambda a, b, m=metric: m(a, b),
            paired=True,
            vectorized=False,
            n_resamples=n_boot,
            method="percentile",
            confidence_level=0.95,
            random_state=1,
        )
        ci = res.confidence_interval
        ms = 1e3 / n_boot
        print(
            f"{name:<6} {kind:<10} {n:>7} {t_fast * ms:8.2f} {t_scipy * ms:9.2f} "
            f"{t_scipy / t_fast:6.1f}x   [{fast.low:.3f}, {fast.high:.3f}]"
            f"       [{ci.low:.3f}, {ci.high:.3f}]",
            flush=True,
        )


if __name__ == "__main__":
    main()
