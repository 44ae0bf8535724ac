"""Throughput of `pipeline.score` on the sets task: N synthetic prompts x M responses, rule mapper.

    python scripts/bench_score.py                 # 1000 prompts, M = 20, labels not merged
    python scripts/bench_score.py --merge-labels  # + merging labels across samples (default rule)

Prints prompts/s for the whole command (read, map, decide, uq, evaluate with 1000 bootstrap
draws) on a cold artifact store, and for a rerun served from the stage cache.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

COUNTRIES = ["France", "Spain", "Italy", "Germany", "Portugal", "Austria", "Belgium", "Poland",
             "Greece", "Sweden", "Norway", "Finland", "Denmark", "Ireland", "Hungary", "Croatia"]


def synthetic_file(path: Path, n_prompts: int, m: int, seed: int = 0) -> None:
    """Prompts whose true set is 2-4 countries; responses keep each true one w.p. 0.8 and add a
    wrong one w.p. 0.3, written the way models list answers."""
    rng = np.random.default_rng(seed)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n_prompts):
            truth = list(rng.choice(COUNTRIES, size=int(rng.integers(2, 5)), replace=False))
            responses = []
            for _ in range(m):
                labels = [c for c in truth if rng.random() < 0.8]
                if rng.random() < 0.3:
                    labels.append(str(rng.choice(COUNTRIES)))
                responses.append(", ".join(labels[:-1]) + " and " + labels[-1] if len(labels) > 1
                                 else (labels[0] if labels else "I don't know"))
            fh.write(json.dumps({"id": f"b{i:05d}", "question": f"Which countries ... ({i})?",
                                 "responses": responses, "reference": truth}) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--prompts", type=int, default=1000)
    ap.add_argument("--m", type=int, default=20)
    ap.add_argument("--merge-labels", action="store_true",
                    help="merge labels across samples (the default: canonical form + content-word containment)")
    args = ap.parse_args()

    from pipeline.scorer.run import score

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        src = tmp / "bench.jsonl"
        synthetic_file(src, args.prompts, args.m)
        overrides = [f"cache_dir={tmp / 'cache'}",
                     f"task.extractor.merge_labels={str(args.merge_labels).lower()}"]
        t0 = time.perf_counter()
        df = score(src, "sets", "rule", out=tmp / "out.parquet", overrides=overrides)
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        score(src, "sets", "rule", out=tmp / "out.parquet", overrides=overrides)
        warm = time.perf_counter() - t0
    print(f"sets, rule mapper, merge_labels={args.merge_labels}: {args.prompts} prompts x "
          f"M={args.m} ({int(df['n_parsed'].sum())} responses parsed)")
    print(f"  cold: {cold:.1f} s -> {args.prompts / cold:.0f} prompts/s")
    print(f"  cached rerun: {warm:.1f} s -> {args.prompts / warm:.0f} prompts/s")
    print(f"  mean Bayes risk {df['bayes_risk'].mean():.3f}, mean F1 of the Bayes set "
          f"{df['quality_bayes_f1'].mean():.3f}")


if __name__ == "__main__":
    main()
