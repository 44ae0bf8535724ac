"""Benchmark pipeline.evaluation against the reference implementations, in one run.

1. PRR at n = 10,000 (tie-free data): ours (ties="polygraph" and "average") versus lm-polygraph
   0.7.0's normalised PRR computed exactly as UEManager.eval_ue does it: PredictionRejectionArea
   for the raw and oracle (-q, q) areas, get_random_scores (1000 shuffles, seed 42) for the random
   baseline, normalize_metric for the ratio. Values, the difference in units of the Monte-Carlo
   error of lm-polygraph's random baseline, and timings.
2. Concordance AUC at n = 100,000 (with ties) versus lifelines.utils.concordance_index.

lm-polygraph's PRR code is numpy-only but `import lm_polygraph` pulls torch/transformers/spaCy
(~45 s here), so its two files `ue_metrics/ue_metric.py` and `ue_metrics/pred_rej_area.py` are
executed unchanged from the installed package under a private package name
(`pipeline.evaluation._polygraph_ref`, shared with the tests).

Usage: python scripts/bench_eval.py [--n-prr 10000] [--n-auc 100000] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import types
from collections.abc import Callable

import numpy as np

from pipeline.evaluation import concordance_auc, prr, prr_components
from pipeline.evaluation._polygraph_ref import (
    PolygraphNotInstalledError,
    load_polygraph_ue_metrics,
)


def best_time(fn: Callable[[], object], repeats: int) -> tuple[object, float]:
    """Result and the fastest of `repeats` wall-clock runs (the least disturbed by other load)."""
    best, result = math.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return result, best


def bench_prr(n: int, seed: int, polygraph: types.SimpleNamespace) -> None:
    rng = np.random.default_rng(seed)
    u = rng.normal(size=n)
    q = -0.5 * u + rng.normal(size=n)
    metric = polygraph.PredictionRejectionArea(0.5)

    def theirs() -> float:  # UEManager.eval_ue, step by step
        raw = metric(u, q)
        oracle = metric(-q, q)
        random = polygraph.get_random_scores(metric, q)
        return polygraph.normalize_metric(raw, oracle, random)

    their_value, their_time = best_time(theirs, repeats=2)

    def theirs_exact_random() -> float:  # like for like: their two areas, the exact baseline
        raw = metric(u, q)
        oracle = metric(-q, q)
        random = prr_components(u, q, 0.5, ties="polygraph").random
        return polygraph.normalize_metric(raw, oracle, random)

    _, their_exact_time = best_time(theirs_exact_random, repeats=5)
    ours_poly, t_poly = best_time(lambda: prr(u, q, 0.5, ties="polygraph"), repeats=20)
    ours_avg, t_avg = best_time(lambda: prr(u, q, 0.5, ties="average"), repeats=20)

    parts = prr_components(u, q, 0.5, ties="polygraph")
    random_mc = polygraph.get_random_scores(metric, q)
    draws = [metric(rng.permutation(n).astype(float), q) for _ in range(300)]
    se_random = float(np.std(draws, ddof=1)) / math.sqrt(1000)
    slope = abs(parts.raw - parts.oracle) / (parts.oracle - parts.random) ** 2
    se_normalised = se_random * slope

    print(f"== PRR (max_rejection=0.5), n = {n:,}, tie-free data")
    print(f"  raw area      ours {parts.raw:.15f}  lm-polygraph {metric(u, q):.15f}")
    print(f"  oracle area   ours {parts.oracle:.15f}  lm-polygraph {metric(-q, q):.15f}")
    print(
        f"  random        ours {parts.random:.15f} (exact)  lm-polygraph {random_mc:.15f}"
        f" (1000 shuffles; MC s.e. {se_random:.2e}, off by {abs(random_mc - parts.random) / se_random:.2f} s.e.)"
    )
    print(f"  normalised    lm-polygraph {their_value:.12f}")
    print(f"                ours polygraph {ours_poly:.12f}   ours average {ours_avg:.12f}")
    print(
        f"                |ours - lm-polygraph| = {abs(ours_poly - their_value):.2e}"
        f" = {abs(ours_poly - their_value) / se_normalised:.2f} x its MC s.e. ({se_normalised:.2e})"
    )
    print(
        f"  time          lm-polygraph as UEManager runs it (1000 Monte-Carlo shuffles for the "
        f"random baseline) {their_time * 1e3:9.1f} ms"
    )
    print(
        f"                lm-polygraph's two areas + the same exact random baseline as ours "
        f"(like for like) {their_exact_time * 1e3:9.2f} ms"
    )
    for label, t in (("ours polygraph", t_poly), ("ours average  ", t_avg)):
        print(
            f"                {label} {t * 1e3:7.2f} ms  -> {their_time / t:,.0f}x faster than "
            f"UEManager's way; like for like {their_exact_time / t:,.2f}x"
        )


def bench_concordance(n: int, seed: int) -> None:
    from lifelines.utils import concordance_index

    rng = np.random.default_rng(seed + 1)
    u = np.round(rng.normal(size=n), 2)  # ~800 distinct values: many ties
    q = np.round(-0.5 * u + rng.normal(size=n), 1)  # ties in quality too
    theirs, t_theirs = best_time(lambda: concordance_index(q, -u), repeats=2)
    ours, t_ours = best_time(lambda: concordance_auc(u, q), repeats=5)
    print(f"== Concordance AUC, n = {n:,} (ties in both inputs)")
    print(f"  lifelines {theirs:.15f}   ours {ours:.15f}   |diff| = {abs(theirs - ours):.1e}")
    print(
        f"  time      lifelines {t_theirs * 1e3:9.1f} ms   ours {t_ours * 1e3:7.1f} ms"
        f"  -> {t_theirs / t_ours:,.1f}x faster"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-prr", type=int, default=10_000)
    parser.add_argument("--n-auc", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    try:
        polygraph = load_polygraph_ue_metrics()
    except PolygraphNotInstalledError as exc:
        sys.exit(str(exc))
    bench_prr(args.n_prr, args.seed, polygraph)
    bench_concordance(args.n_auc, args.seed)


if __name__ == "__main__":
    main()
