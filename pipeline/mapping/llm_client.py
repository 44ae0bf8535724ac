"""OpenAI-compatible chat client with an on-disk cache (DESIGN.md s6).

Used for the paper's extractors (gpt-4.1-mini for sets and distributions) or any
OpenAI-compatible server (`vllm serve`, a local loopback server in tests). Properties:

- the API key is read from the environment only (`api_key_env`, default OPENAI_API_KEY); a remote
  base URL without it raises `MissingAPIKeyError` naming the variable; loopback servers get a
  placeholder key (vLLM and friends accept any);
- temperature 0 by default (deterministic extraction);
- retries with exponential backoff on 429, 5xx, timeouts and connection errors, waiting as long
  as a Retry-After header asks (up to RETRY_AFTER_MAX_S);
- bounded concurrency: `chat_many` runs at most `max_workers` requests at once;
- an on-disk cache, one JSON file per sha256(endpoint, model, messages, params) key, written
  atomically (temp file + rename), so reruns make zero calls; identical in-flight requests share
  one call. A record is served only when it recomputes to its own key (a swapped or edited file
  is a miss); a reply with no content (null or "") is a failed call, retried and never cached;
- a base URL holding credentials (user:password@) is refused: keys come from the environment.

Requests are plain JSON over httpx (imported when a request is sent).
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pipeline.errors import PipelineError
from pipeline.mapping.disk_cache import JsonRecordCache, sha256_key

__all__ = ["LLMClient", "LLMStats", "MissingAPIKeyError", "LLMCallError", "FatalLLMCallError",
           "api_key_from_env", "cache_key"]

Messages = list[dict[str, str]]

_LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}


class MissingAPIKeyError(PipelineError, RuntimeError):
    """A remote endpoint needs an API key and the environment variable holding it is unset."""


class LLMCallError(RuntimeError):
    """A request still failed after all retries (transient: a rerun may succeed)."""


class FatalLLMCallError(PipelineError, LLMCallError):
    """The endpoint refused the request in a way no retry fixes (rejected key, no permission,
    unknown model, invalid request): the stage stops at once with the provider's message."""


@dataclass
class LLMStats:
    """Counters of one client: HTTP requests made, cache hits, retries, final failures."""

    calls: int = 0  # requests sent to the server (retries included)
    requests: int = 0  # chat() calls answered from the server or failed (cache hits excluded)
    cache_hits: int = 0
    retries: int = 0
    failures: int = 0  # requests that failed after their retries (nothing cached for them)
    last_error: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)

    def failed(self, error: str) -> None:
        with self._lock:
            self.failures += 1
            self.last_error = error


def endpoint_id(base_url: str | None) -> str:
    """The endpoint as the cache keys it: scheme, host, port and path ("openai" for the default)."""
    if not base_url:
        return "openai"
    url = urlparse(base_url)
    return f"{url.scheme}://{url.hostname or ''}{f':{url.port}' if url.port else ''}{url.path.rstrip('/')}"


def check_base_url(base_url: str | None) -> None:
    """Refuse a base URL with credentials in it: they would land in caches, manifests and logs."""
    url = urlparse(base_url or "")
    if url.username or url.password:
        raise ValueError(f"task.extractor.base_url holds credentials ({url.hostname} "
                         "with user:password@): remove them and export the key in the variable "
                         "named by task.extractor.api_key_env")


def cache_key(model: str, messages: Messages, params: dict[str, Any],
              endpoint: str = "openai") -> str:
    """sha256 of the canonical JSON of (endpoint, model, messages, params): the cache file name.
    Another server answering to the same model name is another key."""
    return sha256_key({"endpoint": endpoint, "model": model, "messages": messages,
                       "params": params})


DEFAULT_BASE_URL = "https://api.openai.com/v1"

# OpenAI's names for the statuses (what its SDK raised, and what users search for)
_STATUS_NAMES = {400: "BadRequestError", 401: "AuthenticationError", 403: "PermissionDeniedError",
                 404: "NotFoundError", 409: "ConflictError", 422: "UnprocessableEntityError",
                 429: "RateLimitError"}


class APIStatusError(Exception):
    """The server answered with an HTTP error status."""

    def __init__(self, status_code: int, body: str, headers: Any) -> None:
        self.status_code = status_code
        self.name = _STATUS_NAMES.get(status_code, "InternalServerError" if status_code >= 500
                                      else "APIStatusError")
        self.response = type("Response", (), {"headers": headers})()  # for retry_after
        super().__init__(f"Error code: {status_code} - {body[:500]}")


class EmptyReplyError(Exception):
    """The server answered 200 with no content (null or ""): retried like a transient error."""


RETRY_AFTER_MAX_S = 120.0  # a server asking for longer is waited on this long per attempt


def retry_after(exc: BaseException) -> float | None:
    """Seconds the server asked to wait (the Retry-After header, in seconds), if it did."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    value = headers.get("retry-after") if headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: fall back to the exponential backoff
        return None


def _first_content(completion: dict[str, Any]) -> str:
    content = ((completion.get("choices") or [{}])[0].get("message") or {}).get("content")
    if not isinstance(content, str) or not content.strip():
        raise EmptyReplyError(f"200 with content {content!r}")
    return content


def _usable_text(reply: Any) -> bool:
    return isinstance(reply, str) and bool(reply)


def _usable_choices(reply: Any) -> bool:
    return isinstance(reply, list) and bool(reply) and all(
        isinstance(c, dict) and isinstance(c.get("text"), str) for c in reply)


def _choices(completion: dict[str, Any]) -> list[dict[str, Any]]:
    """Every choice as {"text", "tokens", "logprobs", "top_logprobs"} (token log-probs as the
    server reports them; empty lists when it gives none). A reply with no choice is empty."""
    out = []
    for choice in sorted(completion.get("choices") or [], key=lambda c: c.get("index", 0)):
        content = (choice.get("message") or {}).get("content")
        if not isinstance(content, str):
            raise EmptyReplyError(f"200 with a choice whose content is {content!r}")
        entries = (choice.get("logprobs") or {}).get("content") or []
        out.append({"text": content, "tokens": [e["token"] for e in entries],
                    "logprobs": [float(e["logprob"]) for e in entries],
                    "top_logprobs": [{t["token"]: float(t["logprob"])
                                      for t in (e.get("top_logprobs") or [])} for e in entries]})
    if not out:
        raise EmptyReplyError("200 with no choices")
    return out


def _is_loopback(base_url: str | None) -> bool:
    if not base_url:
        return False
    host = urlparse(base_url).hostname or ""
    return host in _LOOPBACK_HOSTS or host.startswith("127.")


def api_key_from_env(api_key_env: str, base_url: str | None, where: str | None = None) -> str:
    """The API key from `api_key_env`; a placeholder for loopback servers (vLLM and friends accept
    any); else `MissingAPIKeyError` naming the variable and `where` it is needed."""
    key = os.environ.get(api_key_env, "")
    if key:
        return key
    if _is_loopback(base_url):
        return "EMPTY"
    where = where or base_url or "the OpenAI API (default base_url)"
    raise MissingAPIKeyError(
        f"environment variable {api_key_env} is not set; it must hold the API key for {where}. "
        f"Export it (export {api_key_env}=...) or point the base URL at a local server."
    )



class LLMClient:
    """Cached, retrying, concurrency-bounded chat completions against an OpenAI-compatible API."""

    def __init__(
        self,
        model: str = "gpt-4.1-mini",
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        cache_dir: str | os.PathLike[str] | None = ".cache/llm",
        max_workers: int = 4,
        max_retries: int = 5,
        backoff_base: float = 1.0,
        backoff_max: float = 30.0,
        timeout: float = 60.0,
        temperature: float = 0.0,
        max_tokens: int = 512,
        extra_params: dict[str, Any] | None = None,
        api_key: str | None = None,
    ) -> None:
        if max_workers < 1:
            raise ValueError(f"LLMClient.max_workers must be >= 1 (got {max_workers})")
        if max_retries < 0:
            raise ValueError(f"LLMClient.max_retries must be >= 0 (got {max_retries})")
        if not model:
            raise ValueError("LLMClient.model must name the served model, e.g. 'gpt-4.1-mini'")
        check_base_url(base_url)
        self.model = model
        self.base_url = base_url
        self.endpoint = endpoint_id(base_url)
        self.api_key_env = api_key_env
        self._api_key = api_key  # given in code: used for requests only, never stored
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._cache = JsonRecordCache(self.cache_dir, key_of=lambda record: cache_key(
            record["model"], record["messages"], record["params"], record.get("endpoint", "")))
        self.max_workers = max_workers
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.timeout = timeout
        self.params: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens, **(extra_params or {})}
        self.stats = LLMStats()
        self._local = threading.local()  # per worker thread: its HTTP client
        self._bearer: str | None = None  # the key, read once from the environment
        self._client_lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self._key_locks_guard = threading.Lock()
        self._failed: dict[str, str] = {}  # cache key -> why it failed (`_cached_call`)

    # ------------------------------------------------------------------ key and client
    def _http(self) -> Any:
        """This thread's HTTP client (keep-alive). One client per worker thread: a pool shared
        by 64 threads spends its time matching queued requests to connections (httpcore scans
        every connection per request), more CPU than the requests themselves. Requests are plain
        JSON over httpx: the openai SDK cost 2.4 ms of CPU per request, httpx 1.5 ms, which
        bounds how many calls one process keeps in flight (scripts/bench_paper_scale.py)."""
        client = getattr(self._local, "client", None)
        if client is None:
            import httpx  # only when a request is really sent

            with self._client_lock:
                if self._bearer is None:
                    self._bearer = self._api_key or api_key_from_env(self.api_key_env,
                                                                     self.base_url)
            client = httpx.Client(
                base_url=(self.base_url or DEFAULT_BASE_URL).rstrip("/") + "/",
                headers={"Authorization": f"Bearer {self._bearer}"}, timeout=self.timeout,
                limits=httpx.Limits(max_connections=2, max_keepalive_connections=2))
            self._local.client = client
        return client

    def _post(self, messages: Messages, params: dict[str, Any]) -> dict[str, Any]:
        """POST chat/completions; an HTTP error status raises APIStatusError."""
        body = {"model": self.model, "messages": messages,
                **{k: v for k, v in params.items() if k != "extra_body"},
                **(params.get("extra_body") or {})}
        response = self._http().post("chat/completions", json=body)
        if response.status_code >= 400:
            raise APIStatusError(response.status_code, response.text, response.headers)
        return response.json()

    # ------------------------------------------------------------------ cache
    def _key(self, messages: Messages) -> str:
        return cache_key(self.model, messages, self.params, self.endpoint)

    def _read_cache(self, key: str, usable: Any = None) -> Any:
        """The cached reply of `key` if its record recomputes to that key (a record swapped in
        from another request, or edited, is a miss and is overwritten by the next answer) and
        `usable(reply)` holds (default: a non-empty text, what `chat` returns)."""
        record = self._cache.get(key)
        reply = None if record is None else record.get("response")
        return reply if (usable or _usable_text)(reply) else None

    def _lock_for(self, key: str) -> threading.Lock:
        with self._key_locks_guard:
            return self._key_locks.setdefault(key, threading.Lock())

    # ------------------------------------------------------------------ requests
    def _retryable(self, exc: BaseException) -> bool:
        import httpx

        if isinstance(exc, EmptyReplyError | httpx.TransportError | json.JSONDecodeError):
            return True  # timeouts, refused or dropped connections, a garbled body
        if isinstance(exc, APIStatusError):
            return exc.status_code == 429 or exc.status_code >= 500
        return False

    @staticmethod
    def _fatal(exc: BaseException) -> bool:
        """No retry or rerun fixes it: 400 (invalid request), 401/403 (key), 404 (model), 422."""
        return isinstance(exc, APIStatusError) and exc.status_code in (400, 401, 403, 404, 422)

    def _call(self, messages: Messages, params: dict[str, Any], parse: Any) -> Any:
        """One chat completion, retried with backoff; `parse(completion)` raises EmptyReplyError
        for a reply with no content."""
        self._http()  # a missing key is said before any attempt (MissingAPIKeyError)
        attempt = 0
        while True:
            self.stats.add(calls=1)
            try:
                return parse(self._post(messages, params))
            except Exception as exc:  # noqa: BLE001 - classified below
                if not self._retryable(exc) or attempt >= self.max_retries:
                    message = (f"chat completion to {self.base_url or 'OpenAI'} (model {self.model}) "
                               f"failed after {attempt + 1} attempt(s): "
                               f"{getattr(exc, 'name', type(exc).__name__)}: {exc}")
                    self.stats.failed(message)
                    error = FatalLLMCallError if self._fatal(exc) else LLMCallError
                    raise error(message) from exc
                delay = min(self.backoff_max, self.backoff_base * 2**attempt) * (0.5 + random.random() / 2)
                if (asked := retry_after(exc)) is not None:  # a 429/503 saying when to come back
                    delay = min(asked, RETRY_AFTER_MAX_S)
                attempt += 1
                self.stats.add(retries=1)
                time.sleep(delay)

    def chat(self, messages: Messages) -> str:
        """The assistant's reply to `messages` (from the cache when this exact request was made)."""
        if not isinstance(messages, list) or not all(isinstance(m, dict) and "role" in m and "content" in m for m in messages):
            raise ValueError("messages must be a list of {'role': ..., 'content': ...} dicts")
        return self._cached_call(messages, self.params, _first_content, _usable_text)

    def choices(self, messages: Messages, **params: Any) -> list[dict[str, Any]]:
        """All choices of one request with `params` over the client's (n, temperature, seed,
        logprobs, ...), each {"text", "tokens", "logprobs", "top_logprobs"}; cached under the
        endpoint, model, messages and every parameter, like `chat`."""
        return self._cached_call(messages, {**self.params, **params}, _choices, _usable_choices)

    def _cached_call(self, messages: Messages, params: dict[str, Any], parse: Any,
                     usable: Any) -> Any:
        """The reply from the cache, else from one request (`_call`), then cached. Identical
        concurrent requests make one call, the rest hit the cache; a request that failed after
        its retries is not sent again by this client (a queued prefetch and the per-prompt call
        ask once between them), and a new run retries it."""
        key = cache_key(self.model, messages, params, self.endpoint)
        if (cached := self._read_cache(key, usable)) is not None:
            self.stats.add(cache_hits=1)
            return cached
        with self._lock_for(key):
            if (cached := self._read_cache(key, usable)) is not None:
                self.stats.add(cache_hits=1)
                return cached
            if key in self._failed:
                raise LLMCallError(self._failed[key])
            self.stats.add(requests=1)
            try:
                reply = self._call(messages, params, parse)
            except LLMCallError as exc:
                self._failed[key] = str(exc)
                raise
            self._cache.put(key, {"endpoint": self.endpoint, "model": self.model,
                                  "messages": messages, "params": params, "response": reply})
            return reply

    def is_cached(self, messages: Messages) -> bool:
        """Whether this exact request's reply is on disk (a rerun would not call the model)."""
        return self._read_cache(self._key(messages)) is not None

    def chat_many(self, batch: list[Messages], raise_on_error: bool = False) -> list[str | None]:
        """Replies for many requests in order, at most `max_workers` in flight.

        A request that fails after its retries gives None (counted in `stats.failures`, never
        cached) unless `raise_on_error`; a missing API key or a fatal refusal (rejected key,
        unknown model, invalid request) always raises: no other request would fare better.
        """

        def one(messages: Messages) -> str | None:
            try:
                return self.chat(messages)
            except FatalLLMCallError:
                raise
            except LLMCallError:
                if raise_on_error:
                    raise
                return None

        if not batch:
            return []
        if self.max_workers == 1 or len(batch) == 1:
            return [one(m) for m in batch]
        with ThreadPoolExecutor(max_workers=self.max_workers) as pool:
            return list(pool.map(one, batch))

    def complete(self, prompts: list[str], raise_on_error: bool = False) -> list[str | None]:
        """Single-user-message convenience over `chat_many`."""
        return self.chat_many([[{"role": "user", "content": p}] for p in prompts], raise_on_error=raise_on_error)
