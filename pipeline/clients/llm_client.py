"""OpenAI-compatible chat client with an on-disk cache (docs/design.md s6).

Used for the paper's extractors (gpt-4.1-mini for sets and distributions) or any
OpenAI-compatible server (`vllm serve`, a local loopback server in tests). Properties:

- the API key is read from the environment only (`api_key_env`, default OPENAI_API_KEY); a remote
  base URL without it raises `MissingAPIKeyError` naming the variable; loopback servers get a
  placeholder key (vLLM and friends accept any);
- temperature 0 by default (deterministic extraction);
- retries with exponential backoff on 429, 5xx, timeouts and connection errors, waiting as long
  as a Retry-After header asks (up to RETRY_AFTER_MAX_S);
- bounded concurrency: at most `max_workers` requests of a client are in flight at once, however
  many threads call it; `chat_many` / `choices_many` queue a whole batch through that bound;
- an on-disk cache, one JSON file per sha256(endpoint, model, messages, params) key, written
  atomically (temp file + rename), so reruns make zero calls; identical in-flight requests share
  one call. A record is served only when it verifies (its digest and key: a swapped or edited
  file is a miss, pipeline/clients/disk_cache.py) and holds a usable reply; a reply with no
  usable content (null, "", blank text, a log-prob that is NaN, infinite or positive) is a failed
  call, retried and never cached;
- a base URL holding credentials (user:password@) is refused: keys come from the environment;
- failures say what the user can act on, in one line: the first error body the server returned
  (a crashed server's 500 comes before its refused connections), a refused connection after two
  quick retries (seconds, not six backoffs), a 404 that means a missing `/v1` or a model name the
  server does not list (`/v1/models` is asked; `check_model=True` asks it before the first
  request);
- limits: `timeout` per request, body included (a server that sends its headers and then hangs
  fails after `timeout` seconds, not never), `deadline` for a whole batch (every request and
  retry of a `chat_many` / `choices_many` call), `max_response_bytes` per response body (read in
  chunks; a bigger one is refused without retry, before it is held in memory or cached),
  `requests_per_minute` spacing requests evenly (hosted APIs' rate limits), `max_workers` in
  flight.

Requests are plain JSON over aiohttp, run as coroutines on one event loop in a thread of the
client's own (started with the first request), so callers stay synchronous, work from any thread
(a notebook's running loop included), and many requests in flight cost one thread's HTTP work:
64 threads on httpx spent 4.1-4.5 ms of CPU per request, mostly taking turns on the interpreter
lock; the loop 0.8-1.0 ms, disk cache included (64 in flight against a 100 ms server: 0.45-0.51
of the ideal rate before, 0.89-0.91 after; scripts/bench_paper_scale.py).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pipeline.clients.disk_cache import JsonRecordCache, sha256_key
from pipeline.runtime.errors import PipelineError

__all__ = [
    "LLMClient",
    "LLMStats",
    "MissingAPIKeyError",
    "LLMCallError",
    "FatalLLMCallError",
    "api_key_from_env",
    "cache_key",
]

Messages = list[dict[str, str]]

_LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}


class MissingAPIKeyError(PipelineError, RuntimeError):
    """A remote endpoint needs an API key and the environment variable holding it is unset."""


class LLMCallError(PipelineError, RuntimeError):
    """A request still failed after all retries (transient: a rerun may succeed). Its message is
    one line naming the endpoint, the attempts and the server's last (and first) error, so the
    command line prints it alone and exits 2."""


class FatalLLMCallError(LLMCallError):
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
    """Refuse a base URL with credentials in it (user:key@, ?api_key=...: what the command line
    refuses, pipeline.runtime.secrets): they would land in caches, manifests and logs."""
    from pipeline.runtime.secrets import url_secrets

    if url_secrets(base_url or ""):
        raise ValueError(
            f"task.extractor.base_url holds credentials ({urlparse(base_url).hostname} "
            "with user:password@ or a key in its query): remove them and export the "
            "key in the variable named by task.extractor.api_key_env"
        )


def cache_key(
    model: str, messages: Messages, params: dict[str, Any], endpoint: str = "openai"
) -> str:
    """sha256 of the canonical JSON of (endpoint, model, messages, params): the cache file name.
    Another server answering to the same model name is another key."""
    return sha256_key(
        {"endpoint": endpoint, "model": model, "messages": messages, "params": params}
    )


DEFAULT_BASE_URL = "https://api.openai.com/v1"

# OpenAI's names for the statuses (what its SDK raised, and what users search for)
_STATUS_NAMES = {
    400: "BadRequestError",
    401: "AuthenticationError",
    403: "PermissionDeniedError",
    404: "NotFoundError",
    409: "ConflictError",
    422: "UnprocessableEntityError",
    429: "RateLimitError",
}


class APIStatusError(Exception):
    """The server answered with an HTTP error status."""

    def __init__(self, status_code: int, body: str, headers: Any) -> None:
        self.status_code = status_code
        self.name = _STATUS_NAMES.get(
            status_code, "InternalServerError" if status_code >= 500 else "APIStatusError"
        )
        self.response = type("Response", (), {"headers": headers})()  # for retry_after
        super().__init__(f"{status_code} {one_line(body)}")


class ConnectError(Exception):
    """The endpoint could not be reached (refused, unknown host): retried twice, quickly."""


CONNECT_RETRIES = 2  # a refused connection: two quick retries, then the batch stops
CONNECT_RETRY_WAIT_S = 0.5


def one_line(text: str, limit: int = 300) -> str:
    """An error body as one line: the JSON error's message when there is one."""
    try:
        payload = json.loads(text)
        err = payload.get("error", payload) if isinstance(payload, dict) else payload
        if isinstance(err, dict) and err.get("message"):
            text = str(err["message"])
        elif isinstance(err, str):
            text = err
        elif isinstance(payload, dict) and payload.get("detail"):
            text = str(payload["detail"])
    except ValueError:
        pass
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + " ..."


class EmptyReplyError(Exception):
    """The server answered 200 with no usable reply (content null, "" or blank; a log-prob that
    is NaN, infinite or positive; a body that is not a JSON object): retried like a transient
    error, never cached."""


class ResponseTooLargeError(Exception):
    """The response body passed `max_response_bytes`: refused at once (a retry would send it
    again), before it is held whole in memory or cached."""


# The longest body this pipeline asks for: n=20 choices of 4096 tokens with log-probs, 8.7 MiB
# (vLLM's format); the paper's datasets (<= 256 tokens) 0.55 MiB. Twice that, and 16 requests
# in flight hold at most 256 MiB; a broken server's 30 MB choices are refused.
DEFAULT_MAX_RESPONSE_BYTES = 16 * 2**20
# A log-prob above 0 by at most this is float rounding (servers add a top token's log-softmax
# in float32): read as 0.0. Anything higher is no log-prob, and the reply is a failed call.
LOGPROB_ROUNDING = 1e-6


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


# the backoff's wait (a name of its own: tests read the waits on a clock instead of sleeping)
_wait = asyncio.sleep


class _EventLoop:
    """An asyncio loop running on a daemon thread; `run` hands it a coroutine from any other
    thread and waits for the result. The aiohttp session lives (and is closed) on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.session: Any = None
        self.slots: asyncio.Semaphore | None = None  # the client's in-flight bound
        self.thread = threading.Thread(target=self.loop.run_forever, name="llm-client", daemon=True)
        self.thread.start()

    def run(self, coro: Awaitable[Any]) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # e.g. Ctrl-C in the caller: its requests stop too
            raise

    def close(self) -> None:
        """Close the session and stop the loop (at the client's collection or at exit)."""
        if self.loop.is_closed() or not self.thread.is_alive():
            return
        if self.session is not None:
            try:
                self.run(self.session.close())
            except Exception:  # noqa: BLE001 - closing at exit: nothing left to report to
                pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not self.thread.is_alive():
            self.loop.close()


def _first_content(completion: dict[str, Any]) -> str:
    try:
        content = ((completion.get("choices") or [{}])[0].get("message") or {}).get("content")
    except (AttributeError, TypeError):  # a choice or message that is no JSON object
        content = None
    if not isinstance(content, str) or not content.strip():
        raise EmptyReplyError(f"200 with content {content!r}")
    return content


def _usable_text(reply: Any) -> bool:
    return isinstance(reply, str) and bool(reply.strip())


def _logprob(value: Any, sampled: bool) -> float:
    """A log-prob as the server gave it (rounding above 0 read as 0.0); EmptyReplyError for one
    that is NaN or positive, or -inf for a sampled token (a token of probability 0 was not
    sampled; -inf among the top log-probs is a probability of 0 and is kept)."""
    lp = float(value)
    if lp > 0.0 and lp <= LOGPROB_ROUNDING:
        return 0.0
    if math.isnan(lp) or lp > 0.0 or (sampled and math.isinf(lp)):
        raise EmptyReplyError(
            f"200 with a {'token' if sampled else 'top'} log-prob of {lp!r} "
            "(log-probs are <= 0, not NaN, and finite for sampled tokens)"
        )
    return lp


def _usable_choices(reply: Any) -> bool:
    """A cached choices reply as `_choices` writes it: non-blank texts, log-probs that are
    log-probs (a record written before these checks, or edited, is asked again)."""
    if not isinstance(reply, list) or not reply:
        return False
    try:
        for c in reply:
            if not (isinstance(c, dict) and isinstance(c.get("text"), str) and c["text"].strip()):
                return False
            for lp in c.get("logprobs", ()):
                _logprob(lp, sampled=True)
            for top in c.get("top_logprobs", ()):
                for lp in top.values():
                    _logprob(lp, sampled=False)
    except (EmptyReplyError, AttributeError, TypeError, ValueError):
        return False
    return True


USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens")


def _choices(completion: dict[str, Any]) -> list[dict[str, Any]]:
    """Every choice as {"text", "tokens", "logprobs", "top_logprobs"} (token log-probs as the
    server reports them; empty lists when it gives none). A reply with no choice, a blank
    choice, or a log-prob that is none (`_logprob`) is a failed call (EmptyReplyError)."""
    out = []
    try:
        ordered = sorted(completion.get("choices") or [], key=lambda c: c.get("index", 0))
        for choice in ordered:
            content = (choice.get("message") or {}).get("content")
            if not isinstance(content, str) or not content.strip():
                raise EmptyReplyError(f"200 with a choice whose content is {content!r}")
            entries = (choice.get("logprobs") or {}).get("content") or []
            reason = choice.get("finish_reason")
            out.append(
                {
                    "text": content,
                    "finish_reason": reason if isinstance(reason, str) else None,
                    "tokens": [str(e["token"]) for e in entries],
                    "logprobs": [_logprob(e["logprob"], sampled=True) for e in entries],
                    "top_logprobs": [
                        {
                            str(t["token"]): _logprob(t["logprob"], sampled=False)
                            for t in (e.get("top_logprobs") or [])
                        }
                        for e in entries
                    ],
                }
            )
    except (AttributeError, KeyError, TypeError, ValueError) as exc:  # not the wire format
        raise EmptyReplyError(f"200 with malformed choices ({type(exc).__name__}: {exc})") from None
    if not out:
        raise EmptyReplyError("200 with no choices")
    usage = completion.get("usage")
    if isinstance(usage, dict):  # the request's usage, on its first choice (Generation.usage)
        out[0]["usage"] = {
            k: int(v)
            for k, v in usage.items()
            if k in USAGE_FIELDS and isinstance(v, int) and not isinstance(v, bool)
        }
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


def _check_client_settings(
    model: str,
    max_workers: int,
    max_retries: int,
    timeout: float,
    deadline: float | None,
    requests_per_minute: float | None,
    max_response_bytes: int,
) -> None:
    """LLMClient's settings that must be positive (or None where optional), and a model name."""
    if max_workers < 1:
        raise ValueError(f"LLMClient.max_workers must be >= 1 (got {max_workers})")
    if max_retries < 0:
        raise ValueError(f"LLMClient.max_retries must be >= 0 (got {max_retries})")
    if not model:
        raise ValueError("LLMClient.model must name the served model, e.g. 'gpt-4.1-mini'")
    for name, value in (
        ("timeout", timeout),
        ("deadline", deadline),
        ("requests_per_minute", requests_per_minute),
    ):
        if value is not None and not value > 0:
            raise ValueError(f"LLMClient.{name} must be > 0 seconds or None (got {value})")
    if not max_response_bytes >= 1:
        raise ValueError(f"LLMClient.max_response_bytes must be >= 1 (got {max_response_bytes})")


class LLMClient:
    """Cached, retrying, concurrency-bounded chat completions against an OpenAI-compatible API."""

    # size: a public keyword API (LLMClient(base_url=..., ...): the extractor's and judge's
    # factories, the OpenAI backend, the serve upstream and scripts build it by these names);
    # the checks and the state between requests are the helpers it calls
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
        deadline: float | None = None,
        requests_per_minute: float | None = None,
        check_model: bool = False,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        settings_prefix: str = "",
    ) -> None:
        _check_client_settings(
            model,
            max_workers,
            max_retries,
            timeout,
            deadline,
            requests_per_minute,
            max_response_bytes,
        )
        check_base_url(base_url)
        self.model = model
        self.base_url = base_url
        self.endpoint = endpoint_id(base_url)
        self.api_key_env = api_key_env
        self._api_key = api_key  # given in code: used for requests only, never stored
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._cache = JsonRecordCache(
            self.cache_dir,
            key_of=lambda record: cache_key(
                record["model"], record["messages"], record["params"], record.get("endpoint", "")
            ),
        )
        self.max_workers = max_workers
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.timeout = timeout
        self.deadline = deadline  # seconds for one batch call (chat_many, choices_many)
        self.requests_per_minute = requests_per_minute
        self.max_response_bytes = int(max_response_bytes)
        # how the caller's config names the settings above ("backend."), for the messages that
        # tell the user which one to raise
        self.settings_prefix = settings_prefix
        self.check_model = check_model  # ask /models for the model before the first request
        self.params: dict[str, Any] = {
            "temperature": temperature,
            "max_tokens": max_tokens,
            **(extra_params or {}),
        }
        self._start_state()

    def _start_state(self) -> None:
        """What the client keeps between requests, before the first one."""
        self._checked: asyncio.Lock | bool = False
        self._next_slot = 0.0  # the loop's clock time the next request may start (rate limit)
        self.stats = LLMStats()
        self._bearer: str | None = None  # the key, read once from the environment
        self._start_lock = threading.Lock()
        self._events: _EventLoop | None = None  # started with the first request
        # on the loop's thread only: one lock per request key in flight, the in-flight bound
        self._key_locks: dict[str, list] = {}
        self._failed: dict[str, str] = {}  # cache key -> why it failed (`_cached_call`)
        self._last_attempt_error = ""  # the latest failed attempt's one line (`_call`)

    # ------------------------------------------------------------------ key, loop and session
    def _run(self, coro: Awaitable[Any]) -> Any:
        """Run `coro` on the client's event loop (started here, after the key is read: a missing
        key is said in the caller's thread before any request, as MissingAPIKeyError)."""
        try:
            with self._start_lock:
                if self._bearer is None:
                    self._bearer = self._api_key or api_key_from_env(
                        self.api_key_env, self.base_url
                    )
                if self._events is None:
                    self._events = _EventLoop()
                    weakref.finalize(self, self._events.close)
                events = self._events
        except BaseException:
            coro.close()  # never scheduled
            raise
        return events.run(coro)

    def close(self) -> None:
        """Close the HTTP session and stop the client's loop (a later request starts new ones)."""
        with self._start_lock:
            events, self._events = self._events, None
        if events is not None:
            events.close()

    async def _session(self) -> _EventLoop:
        """The loop's aiohttp session and slots (made on the loop, by its first request)."""
        events = self._events
        if events.session is None:
            import aiohttp  # only when a request is really sent

            # a connection per request in flight, kept alive; the slots bound them. `total`
            # bounds the whole request, body read included (a server that sends its headers and
            # then hangs, or drips, times out like one that never answers)
            events.session = aiohttp.ClientSession(
                headers={"Authorization": f"Bearer {self._bearer}"},
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                connector=aiohttp.TCPConnector(limit=self.max_workers),
            )
            events.slots = asyncio.Semaphore(self.max_workers)
        return events

    @property
    def _root(self) -> str:
        return (self.base_url or DEFAULT_BASE_URL).rstrip("/")

    async def _rate_limit(self) -> None:
        """Space requests 60 / requests_per_minute seconds apart (each takes the next slot)."""
        if not self.requests_per_minute:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        start = max(now, self._next_slot)
        self._next_slot = start + 60.0 / self.requests_per_minute
        if start > now:
            await _wait(start - now)

    async def _read_body(self, response: Any) -> bytes:
        """The response body, read in chunks; ResponseTooLargeError past `max_response_bytes`
        (a declared Content-Length over it is refused before any of the body is read)."""
        cap = self.max_response_bytes
        if response.content_length is not None and response.content_length > cap:
            raise self._too_large(f"{response.content_length} bytes declared")
        chunks, size = [], 0
        async for chunk in response.content.iter_any():
            size += len(chunk)
            if size > cap:
                raise self._too_large(f"over {size} bytes and counting")
            chunks.append(chunk)
        return b"".join(chunks)

    def _too_large(self, seen: str) -> ResponseTooLargeError:
        return ResponseTooLargeError(
            f"the response body passed the cap of {self.max_response_bytes} bytes ({seen}): "
            f"raise {self.settings_prefix}max_response_bytes if this server's answers are "
            "really that large, else fix the server or ask for less (max_tokens, n)"
        )

    async def _post(self, messages: Messages, params: dict[str, Any]) -> dict[str, Any]:
        """POST chat/completions; an HTTP error status raises APIStatusError, an unreachable
        endpoint ConnectError, a body over `max_response_bytes` ResponseTooLargeError, a 200
        whose body is no JSON object EmptyReplyError. Keys of `params` starting with "_" key the
        cache only (e.g. which of several identical unseeded requests this is) and are not
        sent."""
        import aiohttp

        events = await self._session()
        if self.check_model:
            await self._check_served_model()
        body = {
            "model": self.model,
            "messages": messages,
            **{k: v for k, v in params.items() if k != "extra_body" and not k.startswith("_")},
            **(params.get("extra_body") or {}),
        }
        async with events.slots:
            await self._rate_limit()
            try:
                async with events.session.post(
                    self._root + "/chat/completions", json=body
                ) as response:
                    data = await self._read_body(response)
                    if response.status >= 400:
                        raise APIStatusError(
                            response.status, data.decode("utf-8", "replace"), response.headers
                        )
            except aiohttp.ClientConnectorError as exc:
                raise self._unreachable(exc) from exc
        try:
            completion = json.loads(data)
        except UnicodeDecodeError:
            raise EmptyReplyError("200 with a body that is not UTF-8") from None
        if not isinstance(completion, dict):
            raise EmptyReplyError(f"200 with a body that is no JSON object ({data[:80]!r})")
        return completion

    async def served_models(self) -> list[str] | None:
        """The model ids GET {base_url}/models lists; None when the server has no such route or
        answers something else (then nothing is concluded from it)."""
        import aiohttp

        events = await self._session()
        try:
            async with events.session.get(self._root + "/models") as response:
                text = (await self._read_body(response)).decode("utf-8", "replace")
                if response.status == 401 or response.status == 403:
                    raise APIStatusError(response.status, text, response.headers)
                if response.status >= 400:
                    return None
        except aiohttp.ClientConnectorError as exc:
            raise self._unreachable(exc) from exc
        try:
            data = json.loads(text).get("data")
            return [str(m["id"]) for m in data]
        except (ValueError, AttributeError, TypeError, KeyError):
            return None

    def _unreachable(self, exc: Exception) -> ConnectError:
        """aiohttp's connection error (refused, unknown host) as the one line users read."""
        return ConnectError(
            f"cannot connect to {self._root} "
            f"({one_line(str(getattr(exc, 'os_error', None) or exc))})"
        )

    def _unknown_model(self, listed: list[str]) -> str:
        return (
            f"model {self.model!r} is not served at {self._root}; it serves "
            f"{', '.join(map(repr, listed[:20])) or 'no model'} (name one of them as the "
            "model / backend.served_model)"
        )

    async def _check_served_model(self) -> None:
        """Once per client, before its first request: the model is among those /models lists
        (FatalLLMCallError naming them otherwise); a server without the route passes."""
        if self._checked is True:
            return
        if self._checked is False:
            self._checked = asyncio.Lock()
        lock = self._checked
        async with lock:
            if self._checked is True:
                return
            try:
                await self._ask_models()
            except BaseException:
                self._checked = False  # a later call (maybe on a new loop) asks again
                raise
            self._checked = True

    async def _ask_models(self) -> None:
        listed = None
        for attempt in range(CONNECT_RETRIES + 1):
            try:
                listed = await self.served_models()
                break
            except ConnectError as exc:
                if attempt == CONNECT_RETRIES:
                    raise FatalLLMCallError(
                        f"{exc}: is the server running? Start it, or fix the base URL"
                    ) from None
                await _wait(CONNECT_RETRY_WAIT_S * (attempt + 1))
            except APIStatusError as exc:
                raise FatalLLMCallError(
                    f"{self._root}/models refused the key ({exc.name}: {exc})"
                ) from None
        if listed and self.model not in listed:
            raise FatalLLMCallError(self._unknown_model(listed))

    async def _explain_not_found(self, exc: APIStatusError) -> str:
        """What a 404 from chat/completions means: a model the server does not list, or a base
        URL without its /v1."""
        try:
            listed = await self.served_models()
        except Exception:  # noqa: BLE001 - only an explanation: the 404 is said without it
            listed = None
        if listed and self.model not in listed:
            return self._unknown_model(listed)
        if not urlparse(self._root).path.rstrip("/").endswith("/v1"):
            return (
                f"{self._root}/chat/completions answered 404 ({exc}): add /v1 to the base URL "
                f"(e.g. {self._root}/v1)"
            )
        return f"{self._root}/chat/completions answered 404 ({exc})"

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

    # ------------------------------------------------------------------ requests
    def _retryable(self, exc: BaseException) -> bool:
        import aiohttp

        if isinstance(
            exc,
            EmptyReplyError
            | aiohttp.ClientError
            | TimeoutError
            | json.JSONDecodeError
            | ConnectError,
        ):
            return True  # timeouts, refused or dropped connections, a garbled body
        if isinstance(exc, APIStatusError):
            return exc.status_code == 429 or exc.status_code >= 500
        return False

    def _named(self, setting: str) -> str:
        """ " (backend.timeout)": the setting as the caller's config names it, if it said."""
        return f" ({self.settings_prefix}{setting})" if self.settings_prefix else ""

    def _said(self, exc: BaseException) -> str:
        """One failed attempt in one line (a timeout's own message is empty: it names the
        setting instead)."""
        if isinstance(exc, TimeoutError) and not str(exc):
            return (
                f"TimeoutError: no whole answer within the timeout of {self.timeout:g} s"
                f"{self._named('timeout')}"
            )
        text = str(exc) if isinstance(exc, APIStatusError) else one_line(str(exc))  # one already
        return f"{getattr(exc, 'name', type(exc).__name__)}: {text}"

    @staticmethod
    def _fatal(exc: BaseException) -> bool:
        """No retry or rerun fixes it: 400 (invalid request), 401/403 (key), 404 (model), 422."""
        return isinstance(exc, APIStatusError) and exc.status_code in (400, 401, 403, 404, 422)

    async def _call(self, messages: Messages, params: dict[str, Any], parse: Any) -> Any:
        """One chat completion, retried with backoff; `parse(completion)` raises EmptyReplyError
        for a reply with no content. The error raised at the end says the first error the
        server gave as well as the last (a crashed server's 500 body, then refused connections)."""
        attempt, connect_failures, first = 0, 0, None
        while True:
            self.stats.add(calls=1)
            try:
                return parse(await self._post(messages, params))
            except FatalLLMCallError:
                raise
            except Exception as exc:  # noqa: BLE001 - classified below
                said = self._said(exc)
                self._last_attempt_error = said  # what a batch's deadline message says
                first = first or said
                connect_failures += isinstance(exc, ConnectError)
                unreachable = connect_failures > CONNECT_RETRIES
                if unreachable or not self._retryable(exc) or attempt >= self.max_retries:
                    if isinstance(exc, APIStatusError) and exc.status_code == 404:
                        said = await self._explain_not_found(exc)
                    message = (
                        f"chat completion to {self._root} (model {self.model}) failed "
                        f"after {attempt + 1} attempt(s): {said}"
                        + (f"; first error: {first}" if first != said else "")
                        + ("; is the server running?" if unreachable else "")
                    )
                    self.stats.failed(message)
                    fatal = self._fatal(exc) or unreachable
                    raise (FatalLLMCallError if fatal else LLMCallError)(message) from None
                delay = min(self.backoff_max, self.backoff_base * 2**attempt) * (
                    0.5 + random.random() / 2
                )
                if isinstance(exc, ConnectError):  # a server that is not there: say so soon
                    delay = CONNECT_RETRY_WAIT_S * connect_failures
                if (asked := retry_after(exc)) is not None:  # a 429/503 saying when to come back
                    delay = min(asked, RETRY_AFTER_MAX_S)
                attempt += 1
                self.stats.add(retries=1)
                await _wait(delay)

    @staticmethod
    def _check_messages(messages: Messages) -> None:
        if not isinstance(messages, list) or not all(
            isinstance(m, dict) and "role" in m and "content" in m for m in messages
        ):
            raise ValueError("messages must be a list of {'role': ..., 'content': ...} dicts")

    def chat(self, messages: Messages) -> str:
        """The assistant's reply to `messages` (from the cache when this exact request was made)."""
        return self.chat_many([messages], raise_on_error=True)[0]

    def choices(self, messages: Messages, **params: Any) -> list[dict[str, Any]]:
        """All choices of one request with `params` over the client's (n, temperature, seed,
        logprobs, ...), each {"text", "tokens", "logprobs", "top_logprobs"}; cached under the
        endpoint, model, messages and every parameter, like `chat`."""
        return self.choices_many([(messages, params)])[0]

    async def _cached_call(
        self, messages: Messages, params: dict[str, Any], parse: Any, usable: Any
    ) -> Any:
        """The reply from the cache, else from one request (`_call`), then cached. Identical
        concurrent requests make one call, the rest hit the cache; a request that failed after
        its retries is not sent again by this client (a queued prefetch and the per-prompt call
        ask once between them), and a new run retries it."""
        key = cache_key(self.model, messages, params, self.endpoint)
        if (cached := self._read_cache(key, usable)) is not None:
            self.stats.add(cache_hits=1)
            return cached
        entry = self._key_locks.setdefault(key, [asyncio.Lock(), 0])  # [lock, its users]
        entry[1] += 1
        try:
            async with entry[0]:
                if (cached := self._read_cache(key, usable)) is not None:
                    self.stats.add(cache_hits=1)
                    return cached
                if key in self._failed:
                    raise LLMCallError(self._failed[key])
                self.stats.add(requests=1)
                try:
                    reply = await self._call(messages, params, parse)
                except LLMCallError as exc:
                    self._failed[key] = str(exc)
                    raise
                record = {
                    "endpoint": self.endpoint,
                    "model": self.model,
                    "messages": messages,
                    "params": params,
                    "response": reply,
                }
                # on the loop, before the lock is released (a waiting identical request reads
                # it); a writer thread measured slower: 1.4-1.5 vs 0.9-1.1 ms CPU per request
                self._cache.put(key, record)
                return reply
        finally:
            entry[1] -= 1
            if entry[1] == 0:  # no one else holds or awaits it: forgotten
                del self._key_locks[key]

    def is_cached(self, messages: Messages) -> bool:
        """Whether this exact request's reply is on disk (a rerun would not call the model)."""
        return self._read_cache(self._key(messages)) is not None

    def _many(self, calls: list[Callable[[], Awaitable[Any]]], raise_on_error: bool) -> list[Any]:
        """The calls' results in order, queued through `max_workers` workers on the loop (a
        cell's 200k calls are never 200k tasks at once). A call failing after its retries gives
        None (counted in `stats.failures`, never cached) unless `raise_on_error`; a fatal
        refusal raises at once and the rest of the batch is cancelled."""
        if not calls:
            return []
        results: list[Any] = [None] * len(calls)
        queue = iter(enumerate(calls))

        async def one(call: Callable[[], Awaitable[Any]]) -> Any:
            try:
                return await call()
            except FatalLLMCallError:
                raise
            except LLMCallError:
                if raise_on_error:
                    raise
                return None

        async def worker() -> None:
            for i, call in queue:  # one thread: the workers share the iterator safely
                results[i] = await one(call)

        async def run() -> None:
            self._last_attempt_error = ""  # this batch's failures only
            workers = [
                asyncio.ensure_future(worker()) for _ in range(min(self.max_workers, len(calls)))
            ]
            try:
                if self.deadline is None:
                    await asyncio.gather(*workers)
                else:
                    await asyncio.wait_for(asyncio.gather(*workers), self.deadline)
            except TimeoutError:
                done = sum(r is not None for r in results)
                last = self._last_attempt_error
                raise LLMCallError(
                    f"requests to {self._root} (model {self.model}) passed their deadline of "
                    f"{self.deadline:g} s{self._named('deadline')} with {done} of {len(calls)} "
                    "answered"
                    + (f" (the last failed attempt: {last})" if last else "")
                    + "; answers so far are cached, a rerun resumes: raise the deadline or "
                    "lower the work"
                ) from None
            except BaseException:
                for w in workers:
                    w.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
                raise

        self._run(run())
        return results

    def chat_many(self, batch: list[Messages], raise_on_error: bool = False) -> list[str | None]:
        """Replies for many requests in order, at most `max_workers` in flight.

        A request that fails after its retries gives None (counted in `stats.failures`, never
        cached) unless `raise_on_error`; a missing API key or a fatal refusal (rejected key,
        unknown model, invalid request) always raises: no other request would fare better.
        """
        for messages in batch:
            self._check_messages(messages)
        return self._many(
            [
                lambda m=m: self._cached_call(m, self.params, _first_content, _usable_text)
                for m in batch
            ],
            raise_on_error,
        )

    def choices_many(
        self, jobs: Iterable[tuple[Messages, dict[str, Any]]], raise_on_error: bool = True
    ) -> list[list[dict[str, Any]] | None]:
        """`choices(messages, **params)` of many (messages, params) jobs, in order, queued like
        `chat_many` (a failed job raises unless `raise_on_error=False`, then gives None)."""
        jobs = list(jobs)
        for messages, _ in jobs:
            self._check_messages(messages)
        return self._many(
            [
                lambda m=m, p=p: self._cached_call(
                    m, {**self.params, **p}, _choices, _usable_choices
                )
                for m, p in jobs
            ],
            raise_on_error,
        )

    def complete(self, prompts: list[str], raise_on_error: bool = False) -> list[str | None]:
        """Single-user-message convenience over `chat_many`."""
        return self.chat_many(
            [[{"role": "user", "content": p}] for p in prompts], raise_on_error=raise_on_error
        )


def build_llm_client(extractor, cache_dir: str):
    """The OpenAI-compatible client of `extractor` (ExtractorConfig), cached on disk under
    cache_dir/llm."""
    return LLMClient(
        model=extractor.model,
        base_url=extractor.base_url,
        api_key_env=extractor.api_key_env,
        cache_dir=Path(cache_dir) / "llm",
        max_workers=extractor.max_concurrency,
        max_retries=extractor.max_retries,
        timeout=extractor.timeout,
        deadline=extractor.deadline,
        max_response_bytes=extractor.max_response_bytes,
        settings_prefix="task.extractor.",
    )
