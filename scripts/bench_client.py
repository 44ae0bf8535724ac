"""The project's own OpenAI-compatible client (`pipeline.clients.llm_client.LLMClient`: aiohttp
on one event loop, a bound on requests in flight, retries, a rate limit, a disk cache) against
the official `openai.AsyncOpenAI` with what a user writes around it (an asyncio semaphore for
the in-flight bound; for the rate limit, a sleep per request's start slot), both against the
same stand-in server in its own process (scripts/openai_stand_in.py, a fixed delay per reply),
so the CPU measured is the client's.

    python scripts/bench_client.py                     # 400 requests, 16 in flight
    python scripts/bench_client.py --requests 1000 --rpm 1200

Prints, per client: the wall time, requests/s, CPU ms per request (this process's user+system
time: what the client costs the machine that also maps and scores), and with --rpm the
achieved share of the ideal rate (1.0 = exactly the asked requests per minute). The cache is
off for ours (a fresh folder per run): every request goes to the server.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def start_server(folder: Path, delay: float) -> tuple[subprocess.Popen, str]:
    port_file = folder / "port"
    server = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "openai_stand_in.py"),
            "--port-file",
            str(port_file),
            "--delay",
            str(delay),
        ],
        stdout=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(HERE.parent)},
    )
    for _ in range(600):
        if port_file.exists() and port_file.read_text().strip():
            break
        time.sleep(0.05)
    return server, f"http://127.0.0.1:{port_file.read_text().strip()}/v1"


def messages(i: int) -> list[dict]:
    return [{"role": "user", "content": f"Which oceans border country {i}? Answer briefly."}]


def ours(base_url: str, n: int, in_flight: int, rpm: float | None, cache: Path) -> float:
    from pipeline.clients.llm_client import LLMClient

    client = LLMClient(
        model="rule-server",
        base_url=base_url,
        cache_dir=cache,
        max_workers=in_flight,
        requests_per_minute=rpm,
        api_key="x",
    )
    client.choices_many([(messages(-1), {"n": 1})])  # connection, imports: not timed
    t0 = time.perf_counter()
    client.choices_many([(messages(i), {"n": 1}) for i in range(n)])
    return time.perf_counter() - t0


def official(base_url: str, n: int, in_flight: int, rpm: float | None) -> float:
    import openai

    async def run() -> float:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=2)
        slots = asyncio.Semaphore(in_flight)
        start = time.monotonic()

        async def one(i: int) -> None:
            if rpm:  # request i may start at i / rate: the plain way to keep a rate
                await asyncio.sleep(max(0.0, start + i * 60.0 / rpm - time.monotonic()))
            async with slots:
                await client.chat.completions.create(model="rule-server", messages=messages(i))

        await one(-1) if not rpm else None
        t0 = time.perf_counter()
        start = time.monotonic()
        await asyncio.gather(*(one(i) for i in range(n)))
        took = time.perf_counter() - t0
        await client.close()
        return took

    return asyncio.run(run())


def measured(fn, *args) -> tuple[float, float]:
    cpu0 = time.process_time()
    wall = fn(*args)
    return wall, time.process_time() - cpu0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--in-flight", type=int, default=16)
    ap.add_argument("--delay", type=float, default=0.05, help="the server's seconds per reply")
    ap.add_argument(
        "--rpm",
        type=float,
        default=1200.0,
        help="requests per minute of the rate-limited round (0: skip it)",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server, base_url = start_server(Path(tmp), args.delay)
        try:
            print(
                f"{args.requests} requests, {args.in_flight} in flight, the server "
                f"{args.delay * 1e3:.0f} ms a reply (own process)"
            )
            print(f"{'client':<44} {'wall s':>7} {'req/s':>7} {'CPU ms/req':>11} {'of ideal':>9}")
            rounds = [(None, "full speed")] + (
                [(args.rpm, f"{args.rpm:.0f}/min")] if args.rpm else []
            )
            for rpm, label in rounds:
                ideal = args.requests / (rpm / 60.0) if rpm else None
                for name, fn, extra in (
                    ("ours (LLMClient)", ours, (Path(tmp) / f"cache-{label}",)),
                    ("openai.AsyncOpenAI + semaphore", official, ()),
                ):
                    wall, cpu = measured(fn, base_url, args.requests, args.in_flight, rpm, *extra)
                    share = f"{ideal / wall:9.2f}" if ideal else f"{'-':>9}"
                    print(
                        f"{name + ', ' + label:<34} {wall:7.2f} {args.requests / wall:7.1f} "
                        f"{1e3 * cpu / args.requests:11.2f} {share}",
                        flush=True,
                    )
        finally:
            server.terminate()


if __name__ == "__main__":
    main()
