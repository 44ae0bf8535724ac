"""The FastAPI app of `taskaware serve` (docs/serve.md): OpenAI-compatible chat completions whose
answer is the task-aware Bayes answer over `n` samples of an upstream endpoint.

    POST /v1/chat/completions  {"model": "qwen3-4b:sets", "messages": [...], "samples": 20}
    GET  /v1/models            upstream models x tasks (the plain names with --default-task)
    GET  /health, /health/ready  readiness: 200 when the upstream answers, else 503
    GET  /health/live          liveness: 200 while the process serves

Each request waits for one of `max_concurrency` slots (beyond `max_queue` waiting: 429), then
samples through the endpoint client and scores in a worker thread (the event loop stays free);
past `timeout` seconds it is answered 504. Errors are OpenAI's error objects.
"""

# no `from __future__ import annotations`: FastAPI reads the routes' annotations (Request)

import asyncio
import concurrent.futures
import hmac
import json
import logging
import math
import os
import sys
import time
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pipeline.serve.settings import ServeSettings
from pipeline.serve.upstream import ServeError, Upstream

# answered without the proxy's key (load balancers): readiness and liveness
OPEN_PATHS = ("/health", "/v1/health", "/health/ready", "/health/live")
ROUTES = ("POST /v1/chat/completions", "GET /v1/models", "GET /health (ready)", "GET /health/live")
ACCESS_LOGGER = "pipeline.serve.access"


def tasks_available() -> list[str]:
    """The built-in tasks (pipeline/tasks/<task>/task.yaml): each is a model-name suffix."""
    from pipeline.tasks import task_folders

    return sorted(task_folders())


@dataclass
class ChatRequest:
    model: str  # as the caller named it
    upstream_model: str
    task: str
    n: int
    messages: list[dict[str, Any]]
    question: str  # the last user message's text: the question the mapper reads
    temperature: float | None
    top_p: float | None
    max_tokens: int
    seed: int | None
    task_prompt: bool
    choices: int = 1  # OpenAI's `n`: the Bayes answer, then the next best answers by risk
    stream: bool = False
    include_usage: bool = False  # stream_options.include_usage: a last chunk with the usage
    extra: dict[str, Any] | None = None  # fields passed on to the upstream as given


def _text(content: Any) -> str:
    """A message's text: a string, or OpenAI's list of content parts (the text parts joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def _number(
    body: dict, name: str, kind: type, low: float | None = None, high: float | None = None
) -> Any:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):  # JSON's NaN / Infinity
        raise ServeError(400, f"'{name}' must be a finite number (got {value})", param=name)
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (kind is int and not float(value).is_integer())
    ):
        raise ServeError(
            400,
            f"'{name}' must be {'an integer' if kind is int else 'a number'} (got {_echo(value)})",
            param=name,
        )
    value = kind(value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ServeError(
            400, f"'{name}' must be between {low} and {high} (got {value})", param=name
        )
    return value


def _echo(value: Any, limit: int = 80) -> str:
    """A caller's value as an error message repeats it: its repr, at most `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def resolve_task(model: str, task: Any, default: str | None, tasks: list[str]) -> tuple[str, str]:
    """(upstream model, task) of a request: a known task as the model name's suffix
    (`qwen3-4b:sets`), else the body's `task`, else the server's --default-task."""
    listed = ", ".join(tasks)
    upstream, _, suffix = model.rpartition(":")
    if task is not None and not isinstance(task, str):
        raise ServeError(400, "'task' must be a string naming a task", param="task")
    if task is not None and task.replace("-", "_") not in tasks:
        raise ServeError(
            404,
            f"task {_echo(task)} is not known; tasks available: {listed}",
            param="task",
            code="task_not_found",
        )
    task = None if task is None else task.replace("-", "_")
    if upstream and suffix.replace("-", "_") in tasks:
        named = suffix.replace("-", "_")
        if task is not None and task != named:
            raise ServeError(
                400,
                f"the model name says task {named!r}, 'task' says {_echo(task)}: name one",
                param="task",
            )
        return upstream, named
    if task is not None:
        return model, task
    if default is not None:
        return model, default
    if upstream:
        raise ServeError(
            404,
            f"task {_echo(suffix)} (model {_echo(model)}) is not known; tasks "
            f"available: {listed} (name the model as <upstream model>:<task>)",
            param="model",
            code="task_not_found",
        )
    raise ServeError(
        400,
        f"model {_echo(model)} names no task: name it as <model>:<task> or give "
        f"'task' in the body; tasks available: {listed}",
        param="model",
        code="task_not_named",
    )


# fields a decision over samples cannot honour: refused with the reason (docs/serve.md)
REFUSED_FIELDS = {
    "tools": "tool calls cannot be decided over: a task-aware answer is the Bayes answer over "
    "sampled texts; send requests with tools to the upstream directly",
    "tool_choice": "tool calls cannot be decided over (see 'tools')",
    "functions": "function calls cannot be decided over (see 'tools')",
    "function_call": "function calls cannot be decided over (see 'tools')",
    "logprobs": "the answer is decided over samples, not generated token by token, so it has no "
    "token log-probs; each sample's sequence log-prob is in "
    "task_aware.samples[].logprob",
    "top_logprobs": "the answer has no token log-probs (see 'logprobs')",
}
# fields passed on to the upstream as given (checked for their OpenAI type)
PASSED_NUMBERS = {"presence_penalty": (-2.0, 2.0), "frequency_penalty": (-2.0, 2.0)}


def _passed_on(body: dict) -> dict[str, Any]:
    """stop, response_format, presence/frequency_penalty and logit_bias as the upstream gets
    them (a 400 naming the field when it has the wrong type)."""
    out: dict[str, Any] = {}
    stop = body.get("stop")
    if stop is not None:
        if isinstance(stop, str):
            stop = [stop]
        if not (
            isinstance(stop, list)
            and 0 < len(stop) <= 4
            and all(isinstance(s, str) and 0 < len(s) <= 256 for s in stop)
        ):
            raise ServeError(
                400, "'stop' must be a string or a list of 1 to 4 strings", param="stop"
            )
        out["stop"] = stop
    fmt = body.get("response_format")
    if fmt is not None:
        if not (
            isinstance(fmt, dict) and fmt.get("type") in ("text", "json_object", "json_schema")
        ):
            raise ServeError(
                400,
                "'response_format' must be an object whose type is text, "
                "json_object or json_schema",
                param="response_format",
            )
        out["response_format"] = fmt
    for name, (low, high) in PASSED_NUMBERS.items():
        value = _number(body, name, float, low, high)
        if value is not None:
            out[name] = value
    bias = body.get("logit_bias")
    if bias is not None:
        if not (
            isinstance(bias, dict)
            and len(bias) <= 300
            and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and -100 <= v <= 100
                for v in bias.values()
            )
        ):
            raise ServeError(
                400, "'logit_bias' must map token ids to numbers in [-100, 100]", param="logit_bias"
            )
        out["logit_bias"] = bias
    return out


def parse_request(body: Any, settings: ServeSettings, tasks: list[str]) -> ChatRequest:
    """The request's fields checked (an OpenAI-style 400 naming the field otherwise)."""
    if not isinstance(body, dict):
        raise ServeError(400, "the body must be a JSON object")
    _refuse_unsupported(body)
    stream, options = _stream(body)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ServeError(
            400, "'model' is required: <upstream model>:<task>, e.g. qwen3-4b:sets", param="model"
        )
    messages, last_user = _messages(body)
    upstream, task = resolve_task(model, body.get("task"), settings.default_task, tasks)
    choices = _number(body, "n", int, 1, settings.max_n) or 1
    samples = _number(body, "samples", int, 1, settings.max_n)
    max_tokens = _number(body, "max_completion_tokens", int, 1) or _number(
        body, "max_tokens", int, 1
    )
    task_prompt = body.get("task_prompt", False)
    if not isinstance(task_prompt, bool):
        raise ServeError(400, "'task_prompt' must be true or false", param="task_prompt")
    temperature = _number(body, "temperature", float, 0, 2)
    top_p = _number(body, "top_p", float, 0, 1)
    if top_p == 0:  # nucleus sampling over no token
        raise ServeError(400, "'top_p' must be in (0, 1] (got 0)", param="top_p")
    return ChatRequest(
        model=model,
        upstream_model=upstream,
        task=task,
        n=samples or settings.n,
        messages=[dict(m) for m in messages],
        question=_text(last_user["content"]),
        temperature=settings.temperature if temperature is None else temperature,
        top_p=settings.top_p if top_p is None else top_p,
        max_tokens=max_tokens or settings.max_tokens,
        seed=_number(body, "seed", int),
        task_prompt=task_prompt,
        choices=choices,
        stream=stream,
        include_usage=bool(options.get("include_usage")),
        extra=_passed_on(body),
    )


def _refuse_unsupported(body: dict) -> None:
    """A 400 for the first field set that the server does not support (REFUSED_FIELDS)."""
    for name, why in REFUSED_FIELDS.items():
        if body.get(name) not in (None, False, [], "none"):
            raise ServeError(
                400, f"'{name}' is not supported: {why}", param=name, code="unsupported_parameter"
            )


def _stream(body: dict) -> tuple[bool, dict]:
    """(stream, stream_options) checked."""
    stream = body.get("stream", False)
    options = body.get("stream_options") or {}
    if not isinstance(stream, bool) or not isinstance(options, dict):
        raise ServeError(
            400, "'stream' must be true or false (and 'stream_options' an object)", param="stream"
        )
    return stream, options


def _messages(body: dict) -> tuple[list, dict]:
    """(the messages checked, the last user message): the question is the latter's text."""
    messages = body.get("messages")
    if (
        not isinstance(messages, list)
        or not messages
        or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and "content" in m
            for m in messages
        )
    ):
        raise ServeError(
            400, "'messages' must be a non-empty list of {role, content} objects", param="messages"
        )
    users = [m for m in messages if m["role"] == "user"]
    if not users:
        raise ServeError(400, "'messages' holds no user message", param="messages")
    return messages, users[-1]


def upstream_usage(gens: list) -> dict[str, int]:
    """The upstream's usage summed over the requests the samples came from (each request's on
    its first sample); completion tokens counted from the log-probs where it gave none."""
    reported = [g.usage for g in gens if g.usage]
    if reported:
        prompt = sum(u.get("prompt_tokens", 0) for u in reported)
        completion = sum(u.get("completion_tokens", 0) for u in reported)
    else:
        prompt, completion = 0, sum(len(g.token_logprobs) for g in gens)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def stream_chunks(out: dict[str, Any], include_usage: bool):
    """The decided answer as OpenAI's server-sent events (as vLLM's chunks look): a role chunk,
    the content (or the refusal) of each choice, a last chunk with each finish_reason and the
    task_aware fields, the usage when asked, then [DONE]."""
    head = {
        "id": out["id"],
        "object": "chat.completion.chunk",
        "created": out["created"],
        "model": out["model"],
        "system_fingerprint": None,
    }

    def event(choices: list[dict], **more: Any) -> str:
        return (
            "data: " + json.dumps({**head, "choices": choices, **more}, ensure_ascii=False) + "\n\n"
        )

    yield event(
        [
            {
                "index": c["index"],
                "delta": {"role": "assistant", "content": ""},
                "logprobs": None,
                "finish_reason": None,
            }
            for c in out["choices"]
        ]
    )
    for c in out["choices"]:
        message = c["message"]
        delta = (
            {"refusal": message["refusal"]}
            if message.get("refusal")
            else {"content": message["content"]}
        )
        yield event(
            [{"index": c["index"], "delta": delta, "logprobs": None, "finish_reason": None}]
        )
    yield event(
        [
            {
                "index": c["index"],
                "delta": {},
                "logprobs": None,
                "finish_reason": c["finish_reason"],
            }
            for c in out["choices"]
        ],
        task_aware=out["task_aware"],
    )
    if include_usage:
        yield event([], usage=out["usage"])
    yield "data: [DONE]\n\n"


def risk_headers(ext: dict[str, Any]) -> dict[str, str]:
    """The task-aware numbers as response headers, for clients that show headers and not the
    body's extra fields (LangChain's ChatOpenAI(include_response_headers=True))."""

    def number(value: Any) -> str:
        return "null" if value is None else repr(float(value))

    return {
        "x-taskaware-bayes-risk": number(ext.get("bayes_risk")),
        "x-taskaware-confidence": number(ext.get("confidence")),
        "x-taskaware-task": str(ext.get("task")),
        "x-taskaware-abstained": "true" if ext.get("abstention") else "false",
        "x-taskaware-n-parsed": f"{ext.get('n_parsed')}/{ext.get('n')}",
    }


def sampling_record(req: ChatRequest) -> dict[str, Any]:
    """The sampling settings sent upstream, "server default" for those left to the server (the
    paper's rule: a setting nobody set is not sent)."""
    default = "server default"
    return {
        "n": req.n,
        "temperature": default if req.temperature is None else req.temperature,
        "top_p": default if req.top_p is None else req.top_p,
        "max_tokens": req.max_tokens,
        "seed": default if req.seed is None else req.seed,
        **(req.extra or {}),
    }


def answer_message(ext: dict[str, Any]) -> dict[str, Any]:
    """The assistant message: the Bayes answer, or, where it abstains, no content and the
    abstention in OpenAI's `refusal` field (the official client's `message.refusal`, LangChain's
    `additional_kwargs["refusal"]`), never an unexplained empty reply."""
    if ext.get("abstention"):
        return {"role": "assistant", "content": None, "refusal": ext["abstention"]}
    return {"role": "assistant", "content": ext["answer"] or "", "refusal": None}


def finish_reason(ext: dict[str, Any]) -> str:
    """ "length" when the reply abstains and samples were cut by the token limit (raise
    max_tokens), else "stop"."""
    return "length" if ext.get("abstention") and ext.get("n_truncated") else "stop"


def _upstream_messages(req: ChatRequest, scorer) -> list[dict[str, Any]]:
    """The messages sent upstream: the request's, or with `task_prompt` the task's own prompt
    template around the last user message."""
    messages = req.messages
    if req.task_prompt:
        from pipeline.data.prompts import build_messages

        last = max(i for i, m in enumerate(messages) if m["role"] == "user")
        messages = (
            messages[:last]
            + build_messages(scorer.cell.task.prompt, {"question": req.question}, written=True)
            + messages[last + 1 :]
        )
    return messages


def _choices(ext: dict[str, Any], others: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI's choices: the Bayes answer, then the next best answers by risk."""
    choices = [
        {
            "index": 0,
            "finish_reason": finish_reason(ext),
            "logprobs": None,
            "message": answer_message(ext),
        }
    ]
    choices += [
        {
            "index": i,
            "finish_reason": "stop",
            "logprobs": None,
            "message": {"role": "assistant", "content": other["text"], "refusal": None},
        }
        for i, other in enumerate(others, start=1)
    ]
    return choices


class Service:
    """What the routes share: the settings, the upstream, the task scorers, the slots."""

    def __init__(self, settings: ServeSettings, proxy_key: str | None) -> None:
        from pipeline.serve.scoring import Scorers

        self.settings = settings
        self.proxy_key = proxy_key
        self.upstream = Upstream(settings)
        self.scorers = Scorers(settings.mapper)
        self.tasks = tasks_available()
        if settings.default_task is not None and settings.default_task not in self.tasks:
            raise ValueError(
                f"--default-task {settings.default_task!r} is not known; tasks "
                f"available: {', '.join(self.tasks)}"
            )
        # a thread per slot: sampling waits on the endpoint client, scoring is CPU
        self.pool = concurrent.futures.ThreadPoolExecutor(
            settings.max_concurrency, thread_name_prefix="serve"
        )
        self.slots: asyncio.Semaphore | None = None  # made on the server's loop
        self.waiting = 0
        self.in_flight = 0

    # -- one request -----------------------------------------------------------------------
    def work(self, req: ChatRequest) -> dict[str, Any]:
        """Sample, map, decide: the chat.completion object (in a worker thread)."""
        from pipeline.serve.scoring import extension, ranked_answers

        scorer = self.scorers.get(req.task)
        gens = self.upstream.sample(
            req.upstream_model,
            _upstream_messages(req, scorer),
            req.n,
            req.temperature,
            req.top_p,
            req.max_tokens,
            req.seed,
            req.extra,
        )
        texts = [g.text for g in gens]
        logprobs = [g.logprob for g in gens] if all(g.token_logprobs for g in gens) else None
        reasons = [g.finish_reason for g in gens]
        try:
            row, latents = scorer.score(req.question, texts, logprobs, reasons)
            ext = extension(
                scorer, row, latents, texts, logprobs, reasons, sampling=sampling_record(req)
            )
            others = ranked_answers(scorer, row, latents, texts, req.choices - 1)
        except Exception as exc:  # noqa: BLE001 - the mapper's own failure, said in one line
            raise ServeError(
                500,
                f"scoring the {len(texts)} samples as task {req.task!r} "
                f"failed: {type(exc).__name__}: {exc}",
                code="scoring_failed",
            ) from None
        ext["upstream_model"] = req.upstream_model
        ext["alternatives"] = others
        choices = _choices(ext, others)
        return {
            "id": f"chatcmpl-ta-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": req.model,
            "choices": choices,
            "usage": upstream_usage(gens),
            "system_fingerprint": None,
            "task_aware": ext,
        }

    async def answer(self, req: ChatRequest) -> dict[str, Any]:
        """`work` in a slot, within the request timeout (queue wait included)."""
        loop = asyncio.get_running_loop()
        timeout = self.settings.timeout
        started = loop.time()
        if self.slots.locked() and self.waiting >= self.settings.max_queue:
            raise ServeError(
                429,
                f"{self.waiting} requests are waiting for one of "
                f"{self.settings.max_concurrency} slots (--max-queue): retry later",
                type="rate_limit_error",
                code="queue_full",
            )
        self.waiting += 1
        try:
            await asyncio.wait_for(self.slots.acquire(), timeout)
        except TimeoutError:
            raise self._timed_out() from None
        finally:
            self.waiting -= 1
        self.in_flight += 1
        future = loop.run_in_executor(self.pool, self.work, req)

        def release(_: Any) -> None:  # when the work has ended, not when the caller gave up:
            self.in_flight -= 1  # the slots bound what really runs
            self.slots.release()

        future.add_done_callback(release)
        try:
            return await asyncio.wait_for(
                asyncio.shield(future), max(0.0, timeout - (loop.time() - started))
            )
        except TimeoutError:
            raise self._timed_out() from None

    def _timed_out(self) -> ServeError:
        return ServeError(
            504,
            f"no answer within the request timeout of {self.settings.timeout:g} s (--timeout)",
            type="timeout_error",
            code="timeout",
        )

    # -- models and health -----------------------------------------------------------------
    def models(self) -> list[dict[str, Any]]:
        """Only names that work: each upstream model with each task, and the plain names when
        --default-task names the task of a request that names none."""
        listed = self.upstream.models() or []
        made = int(time.time())
        out = (
            [
                {
                    "id": m,
                    "object": "model",
                    "created": made,
                    "owned_by": "upstream",
                    "task": self.settings.default_task,
                }
                for m in listed
            ]
            if self.settings.default_task
            else []
        )
        out += [
            {
                "id": f"{m}:{t}",
                "object": "model",
                "created": made,
                "owned_by": "taskaware",
                "task": t,
            }
            for m in listed
            for t in self.tasks
        ]
        return out

    def health(self) -> dict[str, Any]:
        try:
            listed = self.upstream.models()
            upstream = {"reachable": True, "models": listed}
        except ServeError as exc:
            upstream = {"reachable": exc.code != "upstream_unreachable", "error": exc.message}
        ready = bool(upstream["reachable"]) and "error" not in upstream
        return {
            "status": "ok" if ready else "unavailable",
            "upstream": {"url": self.settings.upstream, **upstream},
            "tasks": self.tasks,
            "in_flight": self.in_flight,
            "waiting": self.waiting,
        }

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        self.upstream.close()


def access_logger(settings: ServeSettings) -> logging.Logger:
    """One JSON object a line: to --access-log, else stderr."""
    log = logging.getLogger(ACCESS_LOGGER + (f".{settings.port}" if settings.access_log else ""))
    log.setLevel(logging.INFO)
    log.propagate = False
    for handler in list(log.handlers):
        log.removeHandler(handler)
        handler.close()
    handler = (
        logging.FileHandler(settings.access_log, encoding="utf-8")
        if settings.access_log
        else logging.StreamHandler(sys.stderr)
    )
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    return log


def build_app(settings: ServeSettings, proxy_key: str | None = None):
    """The FastAPI app; `proxy_key`: the key requests must bear (default: $TASKAWARE_API_KEY,
    `settings.api_key_env`; unset or empty: no key asked)."""
    from pipeline.runtime.extras import require

    require("fastapi", "uvicorn", needed_for="taskaware serve")
    from fastapi import FastAPI

    if proxy_key is None:
        proxy_key = os.environ.get(settings.api_key_env) or None
    service = Service(settings, proxy_key)
    log = access_logger(settings)
    app = FastAPI(
        title="taskaware serve", lifespan=_lifespan(service), docs_url=None, redoc_url=None
    )
    app.state.service = service
    _add_error_handlers(app)
    _add_key_and_log(app, service, log)
    _add_routes(app, service)
    return app


def _lifespan(service: Service):
    """The app's start (the slots, made on the server's loop; the default task's scorer) and its
    end (the service closed once the in-flight requests have finished)."""
    settings = service.settings

    @asynccontextmanager
    async def lifespan(app):
        service.slots = asyncio.Semaphore(settings.max_concurrency)
        if settings.default_task is not None:  # its config composed before the first request
            await asyncio.get_running_loop().run_in_executor(
                service.pool, service.scorers.get, settings.default_task
            )
        yield
        # uvicorn's graceful shutdown has let the in-flight requests finish
        await asyncio.get_running_loop().run_in_executor(None, service.close)

    return lifespan


def _error(exc: ServeError):
    """A ServeError as OpenAI's error object, with its status."""
    from fastapi.responses import JSONResponse

    return JSONResponse(exc.body(), status_code=exc.status)


def _add_error_handlers(app) -> None:
    """Every error answered as OpenAI's error object: ours, an unknown route (naming the routes
    served), an invalid request, and any other exception."""
    from fastapi import Request
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException

    @app.exception_handler(ServeError)
    async def on_serve_error(request: Request, exc: ServeError):
        return _error(exc)

    @app.exception_handler(HTTPException)
    async def on_http_error(request: Request, exc: HTTPException):
        if exc.status_code in (404, 405):  # /v1/completions, /v1/embeddings, /v1/responses...
            return _error(
                ServeError(
                    exc.status_code,
                    f"{request.method} {request.url.path[:200]} "
                    f"is not served here: this server serves {', '.join(ROUTES)} "
                    "(task-aware chat completions; docs/serve.md)",
                    code="unsupported_route",
                )
            )
        return _error(ServeError(exc.status_code, str(exc.detail)))

    @app.exception_handler(RequestValidationError)
    async def on_invalid(request: Request, exc: RequestValidationError):
        return _error(ServeError(400, str(exc.errors())[:500]))

    @app.exception_handler(Exception)
    async def on_unexpected(request: Request, exc: Exception):
        return _error(ServeError(500, f"{type(exc).__name__}: {exc}"))


def _add_key_and_log(app, service: Service, log: logging.Logger) -> None:
    """The middleware that asks for the proxy's key (outside OPEN_PATHS) and writes each
    request's access-log line."""
    from fastapi import Request

    settings = service.settings

    @app.middleware("http")
    async def key_and_log(request: Request, call_next):
        started = time.perf_counter()
        request.state.log = {}
        if (
            service.proxy_key
            and request.url.path not in OPEN_PATHS
            and not _bears(request.headers.get("authorization", ""), service.proxy_key)
        ):
            response = _error(
                ServeError(
                    401,
                    "a valid API key is required: send "
                    "'Authorization: Bearer <key>' (the key in "
                    f"${settings.api_key_env} of the server)",
                    code="invalid_api_key",
                )
            )
        else:
            try:
                response = await call_next(request)
            except Exception as exc:  # noqa: BLE001 - a real bug: its traceback, once, and logged
                logging.getLogger("pipeline.serve").exception("unexpected error")
                response = _error(
                    ServeError(
                        500,
                        f"internal error ({type(exc).__name__}); the server log has the traceback",
                    )
                )
        log.info(
            json.dumps(
                {
                    "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
                    "method": request.method,
                    "path": request.url.path,
                    "status": response.status_code,
                    "latency_ms": round((time.perf_counter() - started) * 1000, 1),
                    **request.state.log,
                },
                ensure_ascii=False,
            )
        )
        return response


def _add_routes(app, service: Service) -> None:
    """ROUTES: the chat completions, the models, readiness and liveness."""
    from fastapi import Request
    from fastapi.responses import JSONResponse, StreamingResponse

    settings = service.settings

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        body = await read_body(request, settings.max_body_bytes)
        if isinstance(body, dict):
            request.state.log.update(model=body.get("model"), n=body.get("n"))
        req = parse_request(body, settings, service.tasks)
        request.state.log.update(model=req.model, task=req.task, n=req.n)
        if settings.log_prompts:
            request.state.log["prompt"] = req.question
        out = await service.answer(req)
        request.state.log["n_parsed"] = out["task_aware"]["n_parsed"]
        headers = risk_headers(out["task_aware"])
        if req.stream:
            return StreamingResponse(
                stream_chunks(out, req.include_usage),
                media_type="text/event-stream",
                headers=headers,
            )
        return JSONResponse(out, headers=headers)

    @app.get("/v1/models")
    async def models():
        data = await asyncio.to_thread(service.models)
        return {"object": "list", "data": data}

    @app.get("/health")
    @app.get("/v1/health")
    @app.get("/health/ready")
    async def health():
        """Readiness: 503 while the upstream cannot be reached or refuses the key."""
        state = await asyncio.to_thread(service.health)
        return JSONResponse(state, status_code=200 if state["status"] == "ok" else 503)

    @app.get("/health/live")
    async def live():
        return {"status": "ok"}


async def read_body(request, limit: int) -> Any:
    """The JSON body: 413 past `limit` bytes (told by Content-Length or counted while read),
    400 for what is not JSON or nests deeper than Python can parse."""
    raw, size = bytearray(), 0
    async for chunk in request.stream():  # read to the end (a client cut off mid-send sees a
        size += len(chunk)  # reset, not the 413), kept only up to the limit
        if size <= limit:
            raw += chunk
    if size > limit:
        raw.clear()
        raise ServeError(
            413,
            f"the body has {size} bytes, more than --max-body-bytes {limit}",
            code="body_too_large",
        )
    try:
        return json.loads(raw)
    except RecursionError:
        raise ServeError(400, "the body nests too deeply to be a chat request") from None
    except ValueError:
        raise ServeError(400, "the body is not JSON") from None


def _bears(header: str, key: str) -> bool:
    scheme, _, given = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), key.encode())
