"""The latency `taskaware serve` adds over its upstream (docs/serve.md): the loopback stand-in
with a fixed delay, called directly and through the proxy (both with the `openai` client),
alternately, sequentially; the medians' difference is the proxy's overhead.

    .venv/bin/python scripts/bench_serve.py [--delay 0.2] [--rounds 30] [--n 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path

import openai
import uvicorn

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
from openai_stand_in import FakeOpenAIServer

from pipeline.serve.app import build_app
from pipeline.serve.settings import ServeSettings

ANSWERS = {"sets": ["Paris and Lyon", "Paris", "Paris, Lyon", "Nice"],
           "classes": ["Paris", "paris", "Lyon", "Paris."], "reals": ["2", "two", "3", "2.5"]}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--delay", type=float, default=0.2)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--n", type=int, default=20)
    args = p.parse_args()
    import socket

    with FakeOpenAIServer() as stand_in:
        stand_in.state.delay = args.delay

        def sampler(request):
            texts = ANSWERS[request["messages"][-1]["content"]]
            return [{"text": texts[i % len(texts)], "tokens": [("a", -0.5)]}
                    for i in range(request.get("n", 1))]

        stand_in.state.sampler = sampler
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        settings = ServeSettings(upstream=stand_in.base_url, port=port, n=args.n,
                                 access_log=str(Path("/tmp") / f"serve-bench-{port}.jsonl"))
        server = uvicorn.Server(uvicorn.Config(build_app(settings, proxy_key=""), port=port,
                                               log_level="warning", access_log=False))
        threading.Thread(target=server.run, daemon=True).start()
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health/live").close()
                break
            except OSError:
                time.sleep(0.1)
        direct = openai.OpenAI(base_url=stand_in.base_url, api_key="x", max_retries=0)
        proxy = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
        for task in ANSWERS:
            times: dict[str, list[float]] = {"upstream": [], "serve": []}
            for i in range(args.rounds + 2):
                msg = [{"role": "user", "content": task}]
                for name, call in (("upstream", lambda: direct.chat.completions.create(
                        model="m", messages=msg, n=args.n, logprobs=True)),
                                   ("serve", lambda: proxy.chat.completions.create(
                        model=f"m:{task}", messages=msg))):  # --n samples, 1 choice
                    started = time.perf_counter()
                    call()
                    if i >= 2:  # two warm-up rounds (the task's config is composed once)
                        times[name].append((time.perf_counter() - started) * 1000)
            med = {k: statistics.median(v) for k, v in times.items()}
            p90 = {k: statistics.quantiles(v, n=10)[-1] for k, v in times.items()}
            print(f"{task}: delay {args.delay * 1000:.0f} ms, n={args.n}: upstream median "
                  f"{med['upstream']:.1f} ms, through serve {med['serve']:.1f} ms: overhead "
                  f"{med['serve'] - med['upstream']:.1f} ms median (p90 {p90['serve'] - p90['upstream']:.1f})",
                  flush=True)
        server.should_exit = True


if __name__ == "__main__":
    main()
