"""What `taskaware serve` costs over its upstream (docs/serve.md), against the loopback stand-in
answering after a fixed delay, each number beside its target (issue 52):

1. scoring CPU per request: `TaskScorer.score` + the answer's fields for 20 samples (target
   <= 5 ms);
2. throughput at `--concurrency` clients (8), each sending requests back to back for
   `--seconds`: requests/s to the upstream alone and through `taskaware serve --workers W`
   (a subprocess: its own interpreter), for W in `--workers` (target >= 0.9x the upstream's);
3. the latency one sequential client sees: median overhead over the upstream.

    .venv/bin/python scripts/bench_serve.py [--delay 0.2] [--n 20] [--concurrency 8]
                                            [--seconds 8] [--workers 1 2] [--rounds 10]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import openai

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
from openai_stand_in import FakeOpenAIServer

CPU_TARGET_MS = 5.0
THROUGHPUT_TARGET = 0.9
ANSWERS = {
    "sets": ["Paris and Lyon", "Paris", "Paris, Lyon", "Nice"],
    "classes": ["Paris", "paris", "Lyon", "Paris."],
    "reals": ["2", "two", "3", "2.5"],
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scoring_cpu_ms(n: int, rounds: int = 100) -> dict[str, float]:
    """CPU ms per request of the scoring alone (best of 3 runs of `rounds` requests)."""
    from pipeline.serve.scoring import TaskScorer, extension

    out = {}
    for task, answers in ANSWERS.items():
        scorer = TaskScorer(task)
        texts = [answers[i % len(answers)] for i in range(n)]
        logprobs = [-0.5] * n
        best = float("inf")
        for _ in range(3):
            started = time.process_time()
            for _ in range(rounds):
                row, latents = scorer.score(task, texts, logprobs)
                extension(scorer, row, latents, texts, logprobs)
            best = min(best, (time.process_time() - started) / rounds * 1000)
        out[task] = best
    return out


def throughput(call, concurrency: int, seconds: float) -> float:
    """Requests per second that `concurrency` threads calling back to back complete."""
    done = [0] * concurrency
    stop = time.monotonic() + seconds

    def client(k: int) -> None:
        while time.monotonic() < stop:
            call()
            done[k] += 1

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.monotonic() - started)


def start_serve(
    upstream: str, n: int, workers: int, concurrency: int
) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "TASKAWARE_API_KEY": ""}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pipeline.serve",
            "--upstream",
            upstream,
            "--port",
            str(port),
            "--n",
            str(n),
            "--workers",
            str(workers),
            "--max-concurrency",
            str(concurrency),
            "--access-log",
            os.devnull,
            "--log-level",
            "warning",
            "--default-task",
            "sets",
        ],
        cwd=REPO,
        env=env,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            urllib.request.urlopen(url + "/health/live", timeout=2).close()
            return process, url
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit(f"taskaware serve did not start on {url}")


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--delay", type=float, default=0.2, help="the upstream's answer time (s)")
    p.add_argument("--n", type=int, default=20, help="samples a request")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--rounds", type=int, default=10, help="sequential latency rounds")
    args = p.parse_args()

    cpu = scoring_cpu_ms(args.n)
    for task, ms in cpu.items():
        print(
            f"scoring CPU, {task}, n={args.n}: {ms:.2f} ms per request (target <= "
            f"{CPU_TARGET_MS:g}: {'met' if ms <= CPU_TARGET_MS else 'NOT met'})",
            flush=True,
        )

    with FakeOpenAIServer() as stand_in:
        stand_in.state.delay = args.delay

        def sampler(request):
            texts = ANSWERS[request["messages"][-1]["content"]]
            return [
                {"text": texts[i % len(texts)], "tokens": [("a", -0.5)]}
                for i in range(request.get("n", 1))
            ]

        stand_in.state.sampler = sampler
        direct = openai.OpenAI(base_url=stand_in.base_url, api_key="x", max_retries=0)
        msg = [{"role": "user", "content": "sets"}]

        def upstream_call():
            direct.chat.completions.create(model="m", messages=msg, n=args.n, logprobs=True)

        base = throughput(upstream_call, args.concurrency, args.seconds)
        print(
            f"upstream alone, {args.concurrency} clients, delay {args.delay * 1000:.0f} ms, "
            f"n={args.n}: {base:.1f} requests/s",
            flush=True,
        )
        for workers in args.workers:
            process, url = start_serve(stand_in.base_url, args.n, workers, args.concurrency)
            try:
                proxy = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)

                def serve_call():
                    proxy.chat.completions.create(model="m:sets", messages=msg)  # noqa: B023 - called in this iteration

                serve_call()  # the task's config is composed on first use
                got = throughput(serve_call, args.concurrency, args.seconds)
                ratio = got / base
                print(
                    f"through serve --workers {workers}: {got:.1f} requests/s = {ratio:.2f}x "
                    f"the upstream's (target >= {THROUGHPUT_TARGET}x: "
                    f"{'met' if ratio >= THROUGHPUT_TARGET else 'NOT met'})",
                    flush=True,
                )
                if workers == args.workers[0]:
                    times: dict[str, list[float]] = {"upstream": [], "serve": []}
                    for _ in range(args.rounds):
                        for name, call in (("upstream", upstream_call), ("serve", serve_call)):
                            started = time.perf_counter()
                            call()
                            times[name].append((time.perf_counter() - started) * 1000)
                    med = {k: statistics.median(v) for k, v in times.items()}
                    print(
                        f"one client, sequential: upstream {med['upstream']:.1f} ms, through "
                        f"serve {med['serve']:.1f} ms: overhead "
                        f"{med['serve'] - med['upstream']:.1f} ms median",
                        flush=True,
                    )
            finally:
                process.terminate()
                process.wait(timeout=60)


if __name__ == "__main__":
    main()
