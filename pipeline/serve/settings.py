"""The settings of `taskaware serve` (the command line's flags; docs/serve.md)."""

from __future__ import annotations

from dataclasses import dataclass

API_KEY_ENV = "TASKAWARE_API_KEY"  # the proxy's own key: requests need `Authorization: Bearer`


@dataclass
class ServeSettings:
    upstream: str  # the upstream's base URL, ending in /v1
    host: str = "127.0.0.1"
    port: int = 8080
    n: int = 20  # samples when the request gives no `n`
    max_n: int = 64  # a larger `n` is refused (400)
    max_concurrency: int = 8  # requests sampled and scored at once; more wait
    max_queue: int = 256  # requests waiting beyond max_concurrency; more get 429
    timeout: float = 120.0  # seconds per request, queue wait included (504 past it)
    upstream_retries: int = 1  # retries of a failed upstream request (429, 5xx, timeouts)
    cache_dir: str | None = None  # the endpoint request cache (off by default)
    default_task: str | None = None  # the task of a request that names none
    mapper: str = "rule"  # g_T kind (task.extractor.kind): rule | llm | local
    temperature: float | None = None  # sent when the request gives none (None: not sent)
    top_p: float | None = None
    max_tokens: int = 256  # max_tokens when the request gives none
    upstream_api_key_env: str = "OPENAI_API_KEY"
    api_key_env: str = API_KEY_ENV
    log_prompts: bool = False  # the access log holds the last user message too
    access_log: str | None = None  # a file for the JSON access log (default: stderr)
    logprobs: bool = True  # ask the upstream for token log-probs (white-box scores)
    max_body_bytes: int = 4 * 2**20  # a larger request body is refused (413)

    def __post_init__(self) -> None:
        from pipeline.runtime.secrets import url_secrets

        if url_secrets(self.upstream):  # never echoed: not even in this message
            raise ValueError(
                "--upstream holds credentials inside the URL: they would be printed "
                "and logged. Remove them and export the upstream's key in "
                f"${self.upstream_api_key_env} (--upstream-api-key-env)"
            )
        if not self.upstream.startswith(("http://", "https://")):
            raise ValueError(
                f"--upstream {self.upstream[:200]!r}: give the upstream's base URL, "
                "e.g. http://127.0.0.1:8000/v1"
            )
        for name in ("n", "max_n", "max_concurrency", "max_tokens", "max_body_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1")
        if self.n > self.max_n:
            raise ValueError(f"--n {self.n} is above --max-n {self.max_n}")
        if not self.timeout > 0:
            raise ValueError("--timeout must be > 0 seconds")
        if self.max_queue < 0 or self.upstream_retries < 0:
            raise ValueError("--max-queue and --upstream-retries must be >= 0")
