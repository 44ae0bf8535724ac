"""`taskaware serve --upstream http://127.0.0.1:8000/v1 [--port 8080] ...` (= `python -m
pipeline.serve ...`): task-aware answers behind an OpenAI-compatible endpoint (docs/serve.md)."""

from __future__ import annotations

import argparse
import sys

from pipeline.serve.settings import API_KEY_ENV, ServeSettings


# size: a flat list of add_argument calls, one per option in the order --help prints them;
# split, an option's definition would be harder to find
def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="taskaware serve",
        description="OpenAI-compatible chat completions whose answer is the task-aware Bayes "
        "answer over n samples of an upstream OpenAI-compatible endpoint. Name the "
        "task in the model name (qwen3-4b:sets) or the body ('task': 'sets'). "
        f"${API_KEY_ENV}, when set, is the key requests must bear.",
    )
    p.add_argument(
        "--upstream",
        required=True,
        help="the upstream's base URL, ending in /v1 (vLLM, TGI, SGLang, a hosted API)",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument(
        "--n",
        type=int,
        default=20,
        help="samples drawn when a request gives no 'samples' (its 'n' is choices)",
    )
    p.add_argument(
        "--max-n", type=int, default=64, help="the most samples (and choices) a request may ask"
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="server processes (uvicorn workers), each with its own slots and "
        "scorers: scoring runs on more than one core",
    )
    p.add_argument(
        "--max-concurrency",
        type=int,
        default=8,
        help="requests sampled and scored at once; more wait",
    )
    p.add_argument(
        "--max-queue",
        type=int,
        default=256,
        help="requests waiting beyond --max-concurrency; more get 429",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds per request, queue wait included (504 past it)",
    )
    p.add_argument(
        "--upstream-retries",
        type=int,
        default=1,
        help="retries of a failed upstream request (429, 5xx, timeouts)",
    )
    p.add_argument(
        "--cache-dir",
        default=None,
        help="cache upstream requests on disk here (off by default: every request is a fresh draw)",
    )
    p.add_argument(
        "--default-task",
        default=None,
        help="the task of a request whose model name and body name none",
    )
    p.add_argument(
        "--mapper",
        default="rule",
        choices=("rule", "llm", "local"),
        help="g_T kind for sets, graphs, simplex (task.extractor.kind)",
    )
    p.add_argument(
        "--temperature",
        type=float,
        default=None,
        help="sent when a request gives none (default: the upstream decides)",
    )
    p.add_argument("--top-p", type=float, default=None, help="as --temperature")
    p.add_argument(
        "--max-tokens", type=int, default=256, help="max_tokens when a request gives none"
    )
    p.add_argument(
        "--upstream-api-key-env",
        default="OPENAI_API_KEY",
        help="the environment variable holding the upstream's key (loopback upstreams need none)",
    )
    p.add_argument(
        "--api-key-env",
        default=API_KEY_ENV,
        help="the environment variable holding this server's own key",
    )
    p.add_argument(
        "--access-log", default=None, help="write the JSON access log here (default: stderr)"
    )
    p.add_argument(
        "--log-prompts",
        action="store_true",
        help="put each request's last user message into the access log",
    )
    p.add_argument(
        "--max-body-bytes",
        type=int,
        default=4 * 2**20,
        help="a larger request body is refused with 413 (default 4 MiB)",
    )
    p.add_argument(
        "--no-logprobs",
        dest="logprobs",
        action="store_false",
        help="do not ask the upstream for token log-probs (servers that refuse them)",
    )
    p.add_argument("--log-level", default="info", help="uvicorn's log level")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from pipeline.runtime.errors import PipelineError
    from pipeline.runtime.extras import MissingExtraError, require

    options = {k: v for k, v in vars(args).items() if k not in ("log_level", "workers")}
    if args.workers < 1:
        print("[taskaware serve] --workers must be >= 1", file=sys.stderr)
        return 2
    try:
        require("fastapi", "uvicorn", needed_for="taskaware serve")
        settings = ServeSettings(**options)
        from pipeline.serve.app import build_app

        app = build_app(settings)
    except (ValueError, MissingExtraError, PipelineError) as exc:
        print(f"[taskaware serve] {exc}", file=sys.stderr)
        return 2
    import uvicorn

    print(
        f"[taskaware serve] http://{settings.host}:{settings.port}/v1 in front of "
        f"{settings.upstream} ({settings.n} samples a request, max concurrency "
        f"{settings.max_concurrency}{f' per worker, {args.workers} workers' if args.workers > 1 else ''}, "
        f"proxy key {'required' if app.state.service.proxy_key else 'not required'})",
        file=sys.stderr,
        flush=True,
    )
    # uvicorn's own access log is off: ours is one JSON line a request
    if args.workers > 1:  # each worker process builds the app from the settings in its env
        import dataclasses
        import json
        import os

        os.environ[SETTINGS_ENV] = json.dumps(dataclasses.asdict(settings))
        uvicorn.run(
            "pipeline.serve.cli:worker_app",
            factory=True,
            workers=args.workers,
            host=settings.host,
            port=settings.port,
            log_level=args.log_level,
            access_log=False,
            timeout_graceful_shutdown=settings.timeout,
        )
        return 0
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=args.log_level,
        access_log=False,
        timeout_graceful_shutdown=settings.timeout,
    )
    return 0


SETTINGS_ENV = "TASKAWARE_SERVE_SETTINGS"  # the settings a --workers process builds its app from


def worker_app():
    """The app of one --workers process (uvicorn's factory), from the parent's settings."""
    import json
    import os

    from pipeline.serve.app import build_app

    return build_app(ServeSettings(**json.loads(os.environ[SETTINGS_ENV])))


if __name__ == "__main__":
    sys.exit(main())
