"""Throughput and memory of `pipeline.score` on the sets task: N synthetic prompts x M responses,
rule reading, references given (so quality, PRR / AUC with 1000 bootstrap draws are computed).

    python scripts/bench_score.py                          # 1000 and 10000 prompts, M = 20
    python scripts/bench_score.py --prompts 1000 10000 100000
    python scripts/bench_score.py --merge-labels           # + merging labels across samples

Per size it prints the wall time of the whole call on a cold artifact store (read, map, decide,
uq, evaluate, write), prompts/s, the peak memory of the process tree (this process and its
workers, their PSS summed, sampled every 0.25 s: psutil) and the seconds per 1k prompts (linear scaling
means a flat column), then a cached rerun. The issue-41 targets: 100k prompts x 20 in <= 5
minutes wall on 2 cores and <= 1.5 GiB; each printed beside its measured (or, for a size not
run, linearly extrapolated) value. `--check-against DIR` compares the 1k output with a file
written by another revision (`--write DIR`): identical rows and summaries (a CSV that differs:
its largest difference in a number). The rows go to --out; the returned frame is the lean one
the CLI keeps when it writes --out (`score(lean=True)`), or with `--full-rows` the full one
(every per-sample Python object, ~9 KiB per prompt more).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

COUNTRIES = [
    "France",
    "Spain",
    "Italy",
    "Germany",
    "Portugal",
    "Austria",
    "Belgium",
    "Poland",
    "Greece",
    "Sweden",
    "Norway",
    "Finland",
    "Denmark",
    "Ireland",
    "Hungary",
    "Croatia",
]
TARGET_SECONDS, TARGET_GIB, TARGET_PROMPTS = 300.0, 1.5, 100_000


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
                responses.append(
                    ", ".join(labels[:-1]) + " and " + labels[-1]
                    if len(labels) > 1
                    else (labels[0] if labels else "I don't know")
                )
            fh.write(
                json.dumps(
                    {
                        "id": f"b{i:06d}",
                        "question": f"Which countries ... ({i})?",
                        "responses": responses,
                        "reference": truth,
                    }
                )
                + "\n"
            )


class PeakMemory:
    """Peak summed PSS of this process and its children, sampled every `every` seconds: the
    proportional set size counts a page shared by forked workers once over all of them (RSS
    would count it in each, overstating a forked pool)."""

    def __init__(self, every: float = 0.25) -> None:
        import psutil

        self.me, self.every, self.peak = psutil.Process(os.getpid()), every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _rss(self) -> int:
        total = 0
        for proc in [self.me, *self.me.children(recursive=True)]:
            try:
                total += proc.memory_full_info().pss
            except Exception:  # a worker that just ended
                pass
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._rss())
            time.sleep(self.every)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())


def compare(before: Path, after: Path) -> str:
    """ "identical" (same bytes), else how far apart: a CSV's largest difference in a number
    (the bootstrap bounds move in the last bits when the arithmetic changes)."""
    if before.read_bytes() == after.read_bytes():
        return "identical"
    if before.suffix != ".csv":
        return "DIFFERENT"
    import pandas as pd

    a, b = pd.read_csv(before), pd.read_csv(after)
    if list(a.columns) != list(b.columns) or a.shape != b.shape:
        return "DIFFERENT (columns or rows)"
    numeric = a.select_dtypes("number").columns
    if not a.drop(columns=numeric).equals(b.drop(columns=numeric)):
        return "DIFFERENT (text)"
    gap = float((a[numeric] - b[numeric]).abs().max().max())
    return f"numbers within {gap:.1e}"


ONE_PROMPT_TARGET_S = 0.2  # issue 54: a notebook scoring one prompt at a time


def one_prompt_at_a_time(score, calls: int = 20) -> None:
    """The fixed cost of a call: `score` on one prompt, the first call of the process (Hydra
    and the libraries load) and the median of the next `calls` (each a new prompt)."""
    import statistics
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        score([["Paris", "Paris", "Lyon"]], "classes")
        first = time.perf_counter() - t0
        times = []
        for i in range(calls):
            t0 = time.perf_counter()
            score([[f"Paris {i}", "Paris", "Lyon"]], "classes")
            times.append(time.perf_counter() - t0)
    median = statistics.median(times)
    print(
        f"  one prompt a call (classes, M = 3): first call {first:.2f} s, then median "
        f"{median:.3f} s (max {max(times):.3f} s) over {calls} calls; target <= "
        f"{ONE_PROMPT_TARGET_S} s after the first: {'met' if median <= ONE_PROMPT_TARGET_S else 'NOT met'}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--prompts", type=int, nargs="+", default=[1000, 10_000])
    ap.add_argument("--m", type=int, default=20)
    ap.add_argument(
        "--merge-labels",
        action="store_true",
        help="merge labels across samples (the default: canonical form + content-word containment)",
    )
    ap.add_argument(
        "--full-rows",
        action="store_true",
        help="return the full frame (every per-sample Python object) instead of the "
        "lean one the CLI keeps when it writes --out (score(lean=True))",
    )
    ap.add_argument("--write", type=Path, help="keep the 1k-prompt output files in this folder")
    ap.add_argument(
        "--check-against",
        type=Path,
        help="a folder written by --write (another revision): compare the 1k output",
    )
    args = ap.parse_args()

    from pipeline.runtime.devices import cpu_threads
    from pipeline.scorer.run import score

    print(
        f"sets, rule reading, merge_labels={args.merge_labels}, M={args.m}, references given, "
        f"1000 bootstrap draws; {cpu_threads()} cores; rows to --out, the returned frame "
        f"{'full' if args.full_rows else 'lean (as the CLI with --out)'}"
    )
    rows = []
    for n in args.prompts:
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            src = tmp / "bench.jsonl"
            synthetic_file(src, n, args.m)
            overrides = [
                f"cache_dir={tmp / 'cache'}",
                f"task.extractor.merge_labels={str(args.merge_labels).lower()}",
            ]
            out = tmp / "out.parquet"
            with PeakMemory() as memory:
                t0 = time.perf_counter()
                df = score(
                    src, "sets", "rule", out=out, overrides=overrides, lean=not args.full_rows
                )
                cold = time.perf_counter() - t0
            t0 = time.perf_counter()
            score(src, "sets", "rule", out=out, overrides=overrides, lean=not args.full_rows)
            warm = time.perf_counter() - t0
            if n == 1000 and args.write:
                args.write.mkdir(parents=True, exist_ok=True)
                for f in tmp.glob("out.*"):
                    if f.is_file():
                        (args.write / f.name).write_bytes(f.read_bytes())
            if n == 1000 and args.check_against:
                print(
                    f"  1k output vs {args.check_against}: "
                    + ", ".join(
                        f"{f.name} {compare(f, tmp / f.name)}"
                        for f in sorted(args.check_against.glob("out.*"))
                    )
                )
        gib = memory.peak / 2**30
        rows.append((n, cold, gib))
        print(
            f"  {n:>7d} prompts: cold {cold:7.1f} s ({n / cold:5.0f} prompts/s, "
            f"{1e3 * cold / n:.2f} s per 1k), peak memory {gib:.2f} GiB; cached rerun "
            f"{warm:.1f} s; mean Bayes risk {df['bayes_risk'].mean():.3f}, mean F1 of the "
            f"Bayes set {df['quality_bayes_f1'].mean():.3f}",
            flush=True,
        )
        del df
    one_prompt_at_a_time(score)
    n, cold, gib = max(rows)
    measured = n >= TARGET_PROMPTS
    scale = TARGET_PROMPTS / n
    print(
        f"targets at {TARGET_PROMPTS} prompts x {args.m}: wall <= {TARGET_SECONDS:.0f} s: "
        f"{'measured' if measured else f'extrapolated linearly from {n}'} "
        f"{cold * scale:.0f} s; peak memory <= {TARGET_GIB} GiB: "
        f"{'measured' if measured else 'measured at ' + str(n)} {gib:.2f} GiB"
    )


if __name__ == "__main__":
    main()
