"""The task_aware filter of lm-evaluation-harness against lm-eval's own majority_vote on the
same responses: milliseconds per document (the filter scores all documents at once through
`pipeline.score`), for the classes and the sets task.

    python scripts/bench_harness.py                    # 200 documents, M = 20
    python scripts/bench_harness.py --docs 1000 --m 20
"""

from __future__ import annotations

import argparse
import random
import time
import warnings


def documents(task: str, n: int, m: int, seed: int = 0):
    rng = random.Random(seed)
    cities = ["Paris", "Lyon", "Nice", "Lille", "Nantes"]
    oceans = ["Pacific", "Atlantic", "Arctic", "Indian", "Southern"]
    docs, resps = [], []
    for i in range(n):
        if task == "classes":
            docs.append({"question": f"Capital number {i}?", "aliases": ["Paris"]})
            resps.append([rng.choice(cities) for _ in range(m)])
        else:
            docs.append({"question": f"Which oceans, case {i}?", "answers": [["Pacific"]]})
            resps.append([", ".join(rng.sample(oceans, rng.randint(1, 3))) for _ in range(m)])
    return docs, resps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--m", type=int, default=20)
    args = ap.parse_args()

    from lm_eval.filters.selection import MajorityVoteFilter

    from pipeline.harness.filter import TaskAwareFilter

    print(
        f"{args.docs} documents x M = {args.m}; ms per document (the first call of a process "
        "composes the config and loads the libraries: a warm-up call is not timed)"
    )
    print(f"{'task':<8} {'task_aware':>11} {'majority_vote':>14} {'ratio':>7}")
    for task, reference in (("classes", "aliases"), ("sets", "answers")):
        docs, resps = documents(task, args.docs, args.m)
        ours = TaskAwareFilter(task=task, question_field="question", reference_field=reference)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours.apply(resps[:2], docs[:2])  # warm-up
            t0 = time.perf_counter()
            ours.apply(resps, docs)
            t_ours = time.perf_counter() - t0
        t0 = time.perf_counter()
        list(MajorityVoteFilter().apply(resps, docs))
        t_vote = time.perf_counter() - t0
        print(
            f"{task:<8} {1e3 * t_ours / args.docs:11.3f} {1e3 * t_vote / args.docs:14.4f} "
            f"{t_ours / t_vote:6.0f}x",
            flush=True,
        )


if __name__ == "__main__":
    main()
