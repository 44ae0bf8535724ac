"""The upstream endpoint, through the project's endpoint client: one `backend=openai`
(pipeline.generation.openai_backend over pipeline.clients.llm_client.LLMClient) per upstream
model, so retries, log-probs, the bounded pool and the optional request cache are those of
`pipeline.generate_and_score`. Its failures become OpenAI-style errors (`UpstreamError`)."""

from __future__ import annotations

import threading
import uuid
from typing import Any

from pipeline.serve.settings import ServeSettings

PROBE_TIMEOUT_S = 5.0  # GET /models for /health and /v1/models
MAX_BACKENDS = 16  # upstream model clients kept (least recently used idle ones closed beyond)

# OpenAI's error types by status
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


class ServeError(Exception):
    """An OpenAI-style error answer: {"error": {"message", "type", "param", "code"}}."""

    def __init__(
        self,
        status: int,
        message: str,
        type: str | None = None,
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type or ERROR_TYPES.get(
            status, "server_error" if status >= 500 else "invalid_request_error"
        )
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


class _Forgetful(dict):
    """LLMClient remembers a request that failed after its retries and refuses it from then on
    (a batch's prefetch and its per-prompt call ask once); a long-running server must ask again
    once the upstream is back: nothing is remembered."""

    def __setitem__(self, key: Any, value: Any) -> None:
        pass


def _said(text: str, known: tuple[str, ...] = ()) -> str:
    """Upstream text as it may reach a caller or a log: keys redacted, at most 500 characters."""
    from pipeline.runtime.secrets import redact_text

    text = redact_text(text, known)
    return text if len(text) <= 500 else text[:500] + "..."


def upstream_error(exc: BaseException, known: tuple[str, ...] = ()) -> ServeError:
    """The endpoint client's final error as the OpenAI-style error to answer: the upstream's own
    status and message where it answered one (found on the error's context: the client raises
    its one-line error from the last attempt's), 502 where it could not be reached, 504 where it
    timed out."""
    from pipeline.clients.llm_client import APIStatusError, ConnectError

    cause: BaseException | None = exc.__context__
    seen = 0
    while (
        cause is not None
        and seen < 8
        and not isinstance(cause, (APIStatusError, ConnectError, TimeoutError))
    ):
        cause, seen = cause.__context__, seen + 1
    text = _said(str(exc), known)
    if isinstance(cause, APIStatusError):
        said = _said(str(cause), known)
        message = said.split(" ", 1)[1] if " " in said else said
        status = cause.status_code if 400 <= cause.status_code < 600 else 502
        return ServeError(status, f"upstream: {message}", code=f"upstream_{cause.status_code}")
    if isinstance(cause, TimeoutError):
        return ServeError(504, f"upstream timed out: {text}", code="upstream_timeout")
    if isinstance(cause, ConnectError) or "is the server running" in text:
        return ServeError(
            502, f"upstream unreachable: {text}", type="upstream_error", code="upstream_unreachable"
        )
    return ServeError(502, f"upstream failed: {text}", type="upstream_error", code="upstream_error")


class Upstream:
    """The upstream endpoint: a backend per model name (made on first use), /models, health."""

    def __init__(self, settings: ServeSettings) -> None:
        from collections import Counter, OrderedDict

        self.settings = settings
        self._lock = threading.Lock()
        self._backends: OrderedDict[str, Any] = OrderedDict()  # least recently used first
        self._in_use: Counter = Counter()
        self._probe: Any = None

    def known_secrets(self) -> tuple[str, ...]:
        """The upstream key this process holds (redacted from what the upstream says)."""
        import os

        key = os.environ.get(self.settings.upstream_api_key_env, "")
        return (key,) if key else ()

    def _evict(self) -> list[Any]:
        """Least recently used idle backends beyond MAX_BACKENDS, out of the table (closed by
        the caller, outside the lock): a client thread per model name stays bounded however
        many names callers invent."""
        out = []
        for model in list(self._backends):
            if len(self._backends) <= MAX_BACKENDS:
                break
            if not self._in_use[model]:
                out.append(self._backends.pop(model))
                del self._in_use[model]
        return out

    def backend(self, model: str):
        with self._lock:
            if model in self._backends:
                self._backends.move_to_end(model)
            else:
                from pipeline.generation.base import get_backend

                s = self.settings
                backend = get_backend(
                    "openai",
                    model=model,
                    base_url=s.upstream,
                    api_key_env=s.upstream_api_key_env,
                    cache_dir=s.cache_dir,
                    max_concurrency=s.max_concurrency,
                    max_retries=s.upstream_retries,
                    timeout=s.timeout,
                    deadline=s.timeout,
                    logprobs=s.logprobs,
                    check_model=False,
                    settings_prefix="",
                )
                backend.client._failed = _Forgetful()
                backend.client.backoff_max = 2.0  # small waits: a request has --timeout in all
                self._backends[model] = backend
            return self._backends[model]

    def _acquire(self, model: str):
        backend = self.backend(model)
        with self._lock:
            self._in_use[model] += 1
            evicted = self._evict()
        for old in evicted:
            old.client.close()
        return backend

    def _release(self, model: str) -> None:
        with self._lock:
            self._in_use[model] -= 1
            evicted = self._evict()
        for old in evicted:
            old.client.close()

    def sample(
        self,
        model: str,
        messages: list[dict],
        n: int,
        temperature: float | None,
        top_p: float | None,
        max_tokens: int,
        seed: int | None,
        extra: dict[str, Any] | None = None,
    ):
        """The n samples (pipeline.generation.base.Generation) of one chat; ServeError on
        failure. Without the cache, identical concurrent requests are told apart (each is its
        own draw); with it, a repeated unseeded request is answered from it."""
        from pipeline.clients.llm_client import LLMCallError
        from pipeline.generation.base import SamplingConfig
        from pipeline.runtime.errors import PipelineError

        backend = self._acquire(model)
        stream = "serve" if self.settings.cache_dir else f"serve-{uuid.uuid4().hex}"
        sampling = SamplingConfig(
            n=n,
            temperature=temperature,
            top_p=top_p,
            top_k=None,
            max_new_tokens=max_tokens,
            seed=seed,
            stream=stream,
            extra=dict(extra or {}),
        )
        try:
            return backend.sample([backend.render_chat(messages)], sampling)[0]
        except LLMCallError as exc:
            raise upstream_error(exc, self.known_secrets()) from None
        except (PipelineError, ValueError) as exc:  # e.g. no upstream key in the environment
            raise ServeError(
                500, _said(str(exc), self.known_secrets()), code="upstream_configuration"
            ) from None
        finally:
            self._release(model)

    def _probe_client(self):
        """A client for GET /models with a short timeout (health checks answer in seconds)."""
        with self._lock:
            if self._probe is None:
                from pipeline.clients.llm_client import LLMClient

                s = self.settings
                self._probe = LLMClient(
                    model="models",
                    base_url=s.upstream,
                    api_key_env=s.upstream_api_key_env,
                    cache_dir=None,
                    max_workers=2,
                    max_retries=0,
                    timeout=min(PROBE_TIMEOUT_S, s.timeout),
                )
            return self._probe

    def models(self) -> list[str] | None:
        """The upstream's model ids (None: it has no /models route); ServeError when it cannot
        be reached or refuses the key."""
        from pipeline.clients.llm_client import APIStatusError

        client = self._probe_client()
        try:
            return client._run(client.served_models())
        except APIStatusError as exc:
            raise ServeError(
                exc.status_code,
                f"upstream: {_said(str(exc), self.known_secrets())}",
                code=f"upstream_{exc.status_code}",
            ) from None
        except Exception as exc:  # noqa: BLE001 - ConnectError, a timeout, a missing key
            said = _said(str(exc), self.known_secrets()) or f"no answer in {client.timeout:g} s"
            raise ServeError(
                502,
                f"upstream unreachable: {said}",
                type="upstream_error",
                code="upstream_unreachable",
            ) from None

    def close(self) -> None:
        with self._lock:
            backends, self._backends = list(self._backends.values()), {}
        for backend in backends:
            backend.client.close()
        if self._probe is not None:
            self._probe.close()
