"""A real OpenAI-compatible HTTP server on loopback: the stand-in for gpt-4.1-mini in the client
tests and in the rehearsal of the paper configuration (`make rehearsal`), not a mock of the client.

    python scripts/openai_stand_in.py --port-file PATH   # serves until SIGTERM; port written to PATH

POST /v1/chat/completions answers DETERMINISTICALLY from the project's rule-based extractors
(the packaged SmolLM2 would take ~30 s to load and cannot follow the extraction prompts; see the
slow test for the model path): a set-extraction prompt gets one `extract_answers` item per line,
a simplex-extraction prompt gets `{"items": [...]}` JSON from `parse_distribution`, a triple
prompt gets `extract_triples` as "h | r | t" lines, KGGen's DSPy signatures (entities, relations,
clustering) get their output fields in DSPy's own format (`answer_dspy`), anything else is echoed
back upper-cased. The server counts requests, tracks the peak number of requests in
flight, and can inject failures (HTTP status codes or a stall longer than the client timeout).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from pipeline.mapping.parsing import extract_answers, parse_distribution
from pipeline.tasks.graphs.reading import _stem, extract_triples

_DSPY_FIELD = re.compile(
    r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## |\n\nRespond with|\Z)", re.DOTALL
)


def _items(value: str) -> list:
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = ast.literal_eval(value)
    return list(parsed)


def _cluster_key(item: str) -> str:
    """Stand-in for the LLM's judgement of "same meaning": the stem of the last word."""
    words = str(item).lower().split()
    return _stem(words[-1]) if words else ""


def _dspy_values(objective: str, inputs: dict[str, str]) -> dict[str, object] | None:
    """The output fields KGGen's DSPy signatures ask for, from the rule-based extractors."""
    if "UNPARSEABLE" in inputs.get("source_text", ""):
        return None  # a reply no adapter can parse: KGGen must count it as a failure
    if objective.startswith("Extract key entities"):
        triples = extract_triples(inputs["source_text"]) or ()
        return {"entities": sorted({x for h, _, t in triples for x in (h, t)})}
    if objective.startswith("Extract subject-predicate-object triples"):
        triples = extract_triples(inputs["source_text"]) or ()
        return {
            "relations": [
                {"subject": h, "predicate": r, "object": t} for h, r, t in sorted(triples)
            ]
        }
    if objective.startswith("Find one cluster"):
        groups: dict[str, list[str]] = {}
        for item in sorted(_items(inputs["items"])):
            groups.setdefault(_cluster_key(item), []).append(item)
        found = [g for _, g in sorted(groups.items()) if len(g) > 1]
        return {"cluster": found[0] if found else []}
    if objective.startswith("Validate if these items"):
        return {"validated_items": sorted(_items(inputs["cluster"]))}
    if objective.startswith("Select the best item name"):
        return {"representative": min(_items(inputs["cluster"]), key=lambda x: (len(x), x))}
    if objective.startswith("Determine if the given items can be added"):
        clusters = _items(inputs["clusters"])
        reps = []
        for item in _items(inputs["items"]):
            match = [
                c["representative"]
                for c in clusters
                if any(_cluster_key(m) == _cluster_key(item) for m in c["members"])
            ]
            reps.append(match[0] if match else None)
        return {"reasoning": "matched by word stem", "cluster_reps_that_items_belong_to": reps}
    return None


def answer_dspy(messages: list[dict], json_mode: bool) -> str | None:
    """Reply to a DSPy ChatAdapter/JSONAdapter request (KGGen's), or None if it is not one."""
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    if "Your output fields are:" not in system or "your objective is:" not in system:
        return None
    objective = " ".join(system.split("your objective is:", 1)[1].split())
    inputs = {m.group(1): m.group(2).strip() for m in _DSPY_FIELD.finditer(messages[-1]["content"])}
    values = _dspy_values(objective, inputs)
    if values is None:
        return "I am sorry, I cannot help with that."
    if json_mode:
        return json.dumps(values)
    fields = [
        f"[[ ## {k} ## ]]\n{v if isinstance(v, str) else json.dumps(v)}" for k, v in values.items()
    ]
    return "\n\n".join([*fields, "[[ ## completed ## ]]"])


def answer_prompt(prompt: str) -> str:
    """The deterministic reply to one user prompt."""
    tail = prompt[prompt.rfind("\nQ: ") :]  # the last Q/A block is the one to extract from
    m = re.search(r"\nQ: (?P<q>[^\n]*)\nA: (?P<a>.*)\n\nTask: [^\n]*\Z", tail, flags=re.DOTALL)
    qa = [(m.group("q"), m.group("a"))] if m else [("", "")]
    if prompt.startswith(
        "You extract explicit, semantically distinct atomic answers and their stated"
    ):
        question, answer = qa[-1]
        dist = parse_distribution(answer) or {"I don't know": 1.0}
        return json.dumps({"items": [{"answer": a, "p": p} for a, p in dist.items()]})
    if prompt.startswith(
        "You extract explicit, semantically distinct atomic answers from a model answer"
    ):
        question, answer = qa[-1]
        items = sorted(extract_answers(answer, question))
        return "\n".join(items) if items else "I don't know"
    if prompt.startswith("Extract the facts stated in the text as knowledge-graph triples"):
        text = prompt[prompt.rfind("\nText: ") + len("\nText: ") :].removesuffix("\nOutput:\n")
        triples = sorted(extract_triples(text) or ())
        return "\n".join(" | ".join(t) for t in triples) if triples else "none"  # as asked
    return prompt.upper() or "(empty prompt)"  # a reply never has empty content


def _choice(index: int, c: dict, request: dict) -> dict:
    """One chat-completion choice in OpenAI's wire format, with token log-probs when asked."""
    out = {
        "index": index,
        "finish_reason": c.get("finish_reason", "stop"),
        "message": {"role": "assistant", "content": c["text"]},
    }
    if request.get("logprobs"):
        top = c.get("top", {})
        out["logprobs"] = {
            "content": [
                {
                    "token": t,
                    "logprob": lp,
                    "bytes": None,
                    "top_logprobs": [
                        {"token": k, "logprob": v, "bytes": None} for k, v in top.items()
                    ]
                    if i == 0
                    else [],
                }
                for i, (t, lp) in enumerate(c.get("tokens", []))
            ]
        }
    return out


def scripted(*replies):
    """A sampler answering each request with the next of `replies` (its last one from then on):
    a choice's text, or (text, [log-prob, ...]) for a choice with token log-probs."""
    queue = list(replies)

    def sampler(request):
        reply = queue.pop(0) if len(queue) > 1 else queue[0]
        text, lps = reply if isinstance(reply, tuple) else (reply, [])
        return [
            {
                "text": text,
                "tokens": [(f"t{i}", lp) for i, lp in enumerate(lps)],
                "top": {"t0": lps[0]} if lps else {},
            }
        ]

    return sampler


class FakeOpenAIState:
    """Counters and fault injection shared by the handler threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        # consumed one per request: an HTTP status, "stall", or "null" / "empty" (200 with that
        # content: what a broken server or a filtered reply returns)
        self.faults: list[int | str] = []
        self.delay = 0.0  # seconds each successful request takes (to observe concurrency)
        self.stall = 1.0
        self.models: list[str] = []
        # what GET /v1/models lists, as vLLM does (its --served-model-name); None: no such route
        # (404), like servers that do not implement it
        self.served_models: list[str] | None = None
        self.bodies: list[dict] = []  # every request body, for tests that check what was sent
        # the model under test (generation through backend=openai): request body -> its choices,
        # each {"text", "tokens": [(token, logprob), ...], "top": {token: logprob}}; None: the
        # extraction replies above
        self.sampler = None


def make_handler(state: FakeOpenAIState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # keep pytest output clean
            pass

        def setup(self) -> None:
            super().setup()
            # headers and body go out in two writes: without TCP_NODELAY, Nagle + delayed ACK
            # add ~40 ms to every keep-alive request
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 - http.server API
            if self.path.rstrip("/") == "/v1/models" and state.served_models is not None:
                self._send(
                    200,
                    {
                        "object": "list",
                        "data": [
                            {"id": m, "object": "model", "owned_by": "stand-in"}
                            for m in state.served_models
                        ],
                    },
                )
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:  # noqa: N802 - http.server API
            length = int(self.headers.get("Content-Length", 0))
            request = json.loads(self.rfile.read(length) or b"{}")
            with state.lock:
                state.requests += 1
                state.in_flight += 1
                state.peak_in_flight = max(state.peak_in_flight, state.in_flight)
                fault = state.faults.pop(0) if state.faults else None
                state.models.append(request.get("model", ""))
                state.bodies.append(request)
            try:
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                if fault == "stall":
                    time.sleep(state.stall)
                elif isinstance(fault, int):
                    self._send(
                        fault, {"error": {"message": f"injected {fault}", "type": "injected"}}
                    )
                    return
                elif isinstance(fault, tuple) and fault[0] == "message":  # (_, status, text)
                    self._send(fault[1], {"error": {"message": fault[2]}})
                    return
                elif isinstance(fault, tuple):  # (status, Retry-After seconds)
                    self._send(
                        fault[0],
                        {"error": {"message": f"injected {fault[0]}"}},
                        {"Retry-After": str(fault[1])},
                    )
                    return
                time.sleep(state.delay)
                if state.sampler is not None:
                    self._send(
                        200,
                        {
                            "id": f"chatcmpl-{state.requests}",
                            "object": "chat.completion",
                            "created": 0,
                            "model": request.get("model", ""),
                            "choices": [
                                _choice(i, c, request) for i, c in enumerate(state.sampler(request))
                            ],
                            "usage": {
                                "prompt_tokens": 1,
                                "completion_tokens": 1,
                                "total_tokens": 2,
                            },
                        },
                    )
                    return
                json_mode = "response_format" in request or request["messages"][-1][
                    "content"
                ].startswith("Respond with a JSON object")
                reply = answer_dspy(request["messages"], json_mode)
                if reply is None:
                    reply = answer_prompt(request["messages"][-1]["content"])
                if fault in ("null", "empty"):
                    reply = None if fault == "null" else ""
                self._send(
                    200,
                    {
                        "id": f"chatcmpl-{state.requests}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": request.get("model", ""),
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": reply},
                            }
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    },
                )
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test)
            finally:
                with state.lock:
                    state.in_flight -= 1

    return Handler


class _Server(ThreadingHTTPServer):
    # a listen backlog like real servers' (uvicorn: 2048); the default 5 drops the SYNs of a
    # client opening 64 connections at once, each then retried a second later
    request_queue_size = 256

    def handle_error(self, request, client_address) -> None:
        """A client that hung up (a timeout, a body cut at its cap) is no server error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeOpenAIServer:
    """Context manager: a ThreadingHTTPServer on 127.0.0.1 with a free port."""

    def __init__(self) -> None:
        self.state = FakeOpenAIState()
        self.httpd = _Server(("127.0.0.1", 0), make_handler(self.state))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAIServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


class FaultyServer(FakeOpenAIServer):
    """The stand-in, with `fault` deciding every POST while it is set:
    ("hang",): 200 headers and the body's first bytes, then nothing until the test ends;
    ("stream", n_bytes): 200 with a chunked body (no Content-Length) of n_bytes;
    ("status", code, text[, headers]): that status with `text` as the body."""

    def __init__(self) -> None:
        super().__init__()
        self.fault: tuple | None = None
        self.release = threading.Event()  # ends the hung handlers at teardown
        server, base = self, make_handler(self.state)

        class Handler(base):
            def do_POST(self) -> None:  # http.server's name
                if server.fault is None:
                    return super().do_POST()
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with server.state.lock:
                    server.state.requests += 1
                kind, *args = server.fault
                try:
                    if kind == "hang":
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", "100000")
                        self.end_headers()
                        self.wfile.write(b'{"choices": [')
                        self.wfile.flush()
                        server.release.wait(30)
                        self.close_connection = True
                    elif kind == "stream":
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Transfer-Encoding", "chunked")
                        self.end_headers()
                        chunk = b"x" * 65536
                        for _ in range(args[0] // len(chunk)):
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.write(b"0\r\n\r\n")
                    else:
                        status, text, *headers = args
                        body = text.encode()
                        self.send_response(status)
                        for name, value in (headers[0] if headers else {}).items():
                            self.send_header(name, value)
                        self.send_header("Content-Type", "text/plain")
                        self.send_header("Content-Length", str(len(body)))
                        self.end_headers()
                        self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up, as it should

        self.httpd.RequestHandlerClass = Handler

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        super().__exit__(*exc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="OpenAI-compatible stand-in server on loopback")
    parser.add_argument(
        "--port-file",
        type=Path,
        required=True,
        help="where the chosen port is written once the server listens",
    )
    parser.add_argument(
        "--delay",
        type=float,
        default=0.0,
        help="seconds each successful request takes (a server's latency)",
    )
    args = parser.parse_args(argv)
    server = FakeOpenAIServer()
    server.state.delay = args.delay
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with server:
        tmp = args.port_file.with_suffix(".tmp")
        tmp.write_text(str(server.httpd.server_address[1]))
        tmp.replace(args.port_file)
        print(f"OpenAI stand-in listening on {server.base_url}", flush=True)
        stop.wait()
    print(f"OpenAI stand-in stopped after {server.state.requests} requests", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
