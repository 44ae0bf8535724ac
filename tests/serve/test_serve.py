"""`taskaware serve` (issue 42) in front of the loopback stand-in (scripts/openai_stand_in.py),
called with the official `openai` client: the Bayes answers equal `pipeline.score`'s on the same
samples, concurrency is bounded, errors are OpenAI's error objects, the proxy's key is asked and
never logged, the access log is JSON without prompts.

One server is the real command line in a subprocess (`python -m pipeline serve`); the dead
upstream's runs in a thread (uvicorn.Server)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import pipeline

openai = pytest.importorskip("openai")
pytest.importorskip("fastapi")

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
from openai_stand_in import FakeOpenAIServer

KEY = "sk-proxy-test-8d1f0c4e2b"  # the proxy's own key
# the samples the stand-in draws for each question (the first n of them)
SAMPLES = {
    "Which cities are in France?": [
        "Paris and Lyon",
        "Paris",
        "Paris, Lyon",
        "Nice",
        "Paris and Nice",
    ],
    "What is the capital of France?": ["Paris", "paris", "Lyon", "Paris.", "Marseille"],
    "How many moons has Mars?": ["2", "two", "2.5", "I don't know", "3"],
    # 2 read, 3 cut by the token limit (finish_reason "length"): the answer abstains
    "Which planets have rings?": [
        "Saturn and Jupiter",
        "Saturn",
        "Saturn, Jup",
        "The planets",
        "Saturn,",
    ],
}
CUT = {"Which planets have rings?": {2, 3, 4}}
QUESTION = {
    "sets": "Which cities are in France?",
    "classes": "What is the capital of France?",
    "reals": "How many moons has Mars?",
}


def sampler(request: dict) -> list[dict]:
    question = request["messages"][-1]["content"]
    texts = SAMPLES.get(question, [question.upper()] * 64)
    n = request.get("n", 1)
    return [
        {
            "text": texts[i % len(texts)],
            "tokens": [("a", -0.5 - i), ("b", -0.25)],
            "finish_reason": "length" if i in CUT.get(question, ()) else "stop",
        }
        for i in range(n)
    ]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(url: str, process: subprocess.Popen | None = None, limit: float = 60) -> None:
    started = time.monotonic()
    while time.monotonic() - started < limit:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"taskaware serve exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url + "/health/live", timeout=5):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"{url} did not answer in {limit} s")


@pytest.fixture(scope="module")
def stand_in():
    with FakeOpenAIServer() as server:
        server.state.sampler = sampler
        server.state.served_models = ["stand-in"]
        yield server


@pytest.fixture(scope="module")
def served(stand_in, tmp_path_factory):
    """`taskaware serve` (the command line, a subprocess) with max-concurrency 4 and a key."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("serve") / "access.jsonl"
    env = {**os.environ, "TASKAWARE_API_KEY": KEY}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pipeline",
            "serve",
            "--upstream",
            stand_in.base_url,
            "--port",
            str(port),
            "--n",
            "5",
            "--max-n",
            "16",
            "--max-concurrency",
            "4",
            "--timeout",
            "30",
            "--access-log",
            str(log_path),
            "--log-level",
            "warning",
        ],
        cwd=REPO,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_listening(url, process)
        yield url, log_path, process
    finally:
        process.terminate()
        try:
            _, stderr = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            _, stderr = process.communicate()
        assert KEY not in (stderr or "")


@pytest.fixture()
def client(served):
    url, _, _ = served
    return openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0, timeout=60)


def expected(task: str, n: int = 5):
    question = QUESTION[task]
    responses = [
        sampler({"messages": [{"content": question}], "n": n})[i]["text"] for i in range(n)
    ]
    logprobs = [-0.75 - i for i in range(n)]
    return pipeline.score(
        [{"question": question, "responses": responses, "logprobs": logprobs}], task=task
    ).iloc[0], responses


@pytest.mark.parametrize("task", ["sets", "classes", "reals"])
def test_the_answer_is_pipeline_scores_bayes_answer(client, task):
    resp = client.chat.completions.create(
        model=f"stand-in:{task}",
        messages=[{"role": "user", "content": QUESTION[task]}],
        extra_body={"samples": 5},
    )
    ref, responses = expected(task)
    ext = resp.model_extra["task_aware"]
    assert resp.object == "chat.completion" and resp.model == f"stand-in:{task}"
    assert resp.choices[0].finish_reason == "stop"
    assert resp.choices[0].message.content == ref["bayes_text"] != ""
    assert ext["task"] == task and ext["n"] == 5 and ext["n_parsed"] == ref["n_parsed"]
    assert ext["bayes_risk"] == pytest.approx(ref["bayes_risk"], abs=1e-12)
    assert ext["confidence"] == pytest.approx(ref["confidence"], abs=1e-12)
    assert ext["latent_entropy"] == pytest.approx(ref["latent_entropy"], abs=1e-12)
    assert ext["whitebox_msp"] == pytest.approx(ref["whitebox_msp"], abs=1e-12)
    assert [s["text"] for s in ext["samples"]] == responses
    assert [s["parsed"] for s in ext["samples"]] == [
        lab is not None for lab in (ref["response_labels"] or [True] * 5)
    ] or task == "reals"
    if isinstance(ref["latent_distribution"], str):  # JSON text in the frame, data in the body
        assert ext["latent_distribution"] == json.loads(ref["latent_distribution"])
    assert 0 <= ext["confidence"] <= 1 and len(resp.choices) == 1
    # the upstream's usage (the stand-in: 1 prompt and 1 completion token per request)
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (1, 1)


def test_hand_computed_answers():
    """The expected values above, by hand for classes: 5 samples, Paris x3 (Paris, paris,
    Paris.), Lyon, Marseille: Bayes answer Paris, 0-1 risk 2/5."""
    ref, _ = expected("classes")
    assert ref["bayes_text"] == "Paris" and ref["bayes_risk"] == pytest.approx(0.4)
    ref, _ = expected("sets")
    assert set(ref["bayes_action"]) == {"paris"}  # in 4 of 5 samples


def test_the_task_in_the_body_and_its_prompt_template(client, stand_in):
    resp = client.chat.completions.create(
        model="stand-in",
        messages=[{"role": "user", "content": QUESTION["classes"]}],
        extra_body={"task": "classes", "samples": 3},
        temperature=0.7,
        top_p=0.9,
        max_tokens=12,
        seed=5,
    )
    assert resp.model_extra["task_aware"]["task"] == "classes"
    sent = stand_in.state.bodies[-1]
    assert sent["model"] == "stand-in" and sent["n"] == 3 and sent["seed"] == 5
    assert (sent["temperature"], sent["top_p"], sent["max_tokens"]) == (0.7, 0.9, 12)
    client.chat.completions.create(
        model="stand-in:sets",
        messages=[{"role": "user", "content": "Name two oceans"}],
        extra_body={"task_prompt": True, "samples": 2},
    )
    wrapped = stand_in.state.bodies[-1]["messages"][-1]["content"]
    assert "Name two oceans" in wrapped and wrapped != "Name two oceans"


def test_32_concurrent_requests_with_4_slots(client, stand_in):
    stand_in.state.delay = 0.15
    stand_in.state.peak_in_flight = 0
    try:
        ref, _ = expected("classes")
        with ThreadPoolExecutor(32) as pool:
            answers = list(
                pool.map(
                    lambda _: client.chat.completions.create(
                        model="stand-in:classes",
                        messages=[{"role": "user", "content": QUESTION["classes"]}],
                    ),
                    range(32),
                )
            )
    finally:
        stand_in.state.delay = 0.0
    assert all(a.choices[0].message.content == ref["bayes_text"] for a in answers)
    assert all(
        a.model_extra["task_aware"]["bayes_risk"] == pytest.approx(ref["bayes_risk"])
        for a in answers
    )
    assert 1 <= stand_in.state.peak_in_flight <= 4, stand_in.state.peak_in_flight


def test_errors_are_openai_error_objects(client, served):
    with pytest.raises(openai.NotFoundError) as excinfo:
        client.chat.completions.create(
            model="stand-in:poems", messages=[{"role": "user", "content": "q"}]
        )
    error = excinfo.value.body
    assert "classes" in error["message"] and "sets" in error["message"]
    assert error["code"] == "task_not_found" and {"type", "param"} <= set(error)
    with pytest.raises(openai.BadRequestError, match="stream"):
        client.chat.completions.create(
            model="stand-in:sets",
            extra_body={"stream": "yes"},
            messages=[{"role": "user", "content": "q"}],
        )
    with pytest.raises(openai.BadRequestError) as excinfo:
        client.chat.completions.create(
            model="stand-in:sets", n=17, messages=[{"role": "user", "content": "q"}]
        )
    assert excinfo.value.body["param"] == "n"


def test_upstream_errors_come_back_with_its_status_and_message(client, stand_in):
    stand_in.state.faults = [400]
    with pytest.raises(openai.BadRequestError) as excinfo:
        client.chat.completions.create(
            model="stand-in:sets", messages=[{"role": "user", "content": "q"}]
        )
    assert "injected 400" in excinfo.value.body["message"]


def test_the_proxy_key_is_asked_and_never_logged(served):
    url, log_path, _ = served
    keyless = openai.OpenAI(base_url=url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as excinfo:
        keyless.chat.completions.create(
            model="stand-in:sets", messages=[{"role": "user", "content": "q"}]
        )
    assert excinfo.value.status_code == 401 and excinfo.value.body["code"] == "invalid_api_key"
    with urllib.request.urlopen(url + "/health", timeout=10) as response:  # open: no key
        health = json.load(response)
    assert health["status"] == "ok" and health["upstream"]["reachable"] is True
    assert health["upstream"]["models"] == ["stand-in"]
    time.sleep(0.2)
    text = log_path.read_text()
    assert KEY not in text
    lines = [json.loads(line) for line in text.splitlines()]
    assert any(line["status"] == 401 for line in lines)
    chat = [
        line for line in lines if line["path"] == "/v1/chat/completions" and line["status"] == 200
    ]
    assert chat and {"time", "method", "status", "latency_ms", "model", "task", "n"} <= set(chat[0])
    assert not any(q in text for q in QUESTION.values())  # no prompts by default


def test_models_lists_only_names_that_work(client):
    """Each upstream model with each task; the plain name needs --default-task (a request
    naming no task is a 400 without it), so it is not listed here."""
    ids = [m.id for m in client.models.list()]
    assert "stand-in" not in ids and {"stand-in:sets", "stand-in:classes", "stand-in:reals"} <= set(
        ids
    )
    for name in ids:  # every listed name answers
        resp = client.chat.completions.create(
            model=name,
            extra_body={"samples": 2},
            messages=[{"role": "user", "content": "Name a colour"}],
        )
        assert resp.choices[0].message.content is not None or resp.choices[0].message.refusal


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/embeddings", "/v1/responses"])
def test_other_routes_say_what_is_served(client, path):
    with pytest.raises(openai.NotFoundError) as excinfo:
        client.post(path, body={"model": "stand-in:sets", "input": "x"}, cast_to=object)
    assert excinfo.value.body["code"] == "unsupported_route"
    assert "POST /v1/chat/completions" in excinfo.value.body["message"]


def test_a_key_in_the_upstream_url_is_refused_without_echoing_it():
    code = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline.serve",
            "--upstream",
            "http://127.0.0.1:9/v1?api_key=sk-live-123456",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert code.returncode == 2 and "credentials" in code.stderr
    assert "sk-live-123456" not in code.stderr + code.stdout


def test_a_dead_upstream_is_an_openai_error_in_one_call(tmp_path):
    import uvicorn

    from pipeline.serve.app import build_app
    from pipeline.serve.settings import ServeSettings

    port = free_port()
    settings = ServeSettings(
        upstream=f"http://127.0.0.1:{free_port()}/v1",
        port=port,
        access_log=str(tmp_path / "log.jsonl"),
        timeout=20,
    )
    server = uvicorn.Server(
        uvicorn.Config(
            build_app(settings, proxy_key=""), port=port, log_level="warning", access_log=False
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_listening(f"http://127.0.0.1:{port}")
        dead = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
        started = time.monotonic()
        with pytest.raises(openai.APIStatusError) as excinfo:
            dead.chat.completions.create(
                model="m:sets", messages=[{"role": "user", "content": "q"}]
            )
        assert time.monotonic() - started < 10
        assert excinfo.value.status_code == 502
        assert excinfo.value.body["code"] == "upstream_unreachable"
        assert "cannot connect" in excinfo.value.body["message"]
        # readiness fails while the upstream is unreachable; liveness does not
        with pytest.raises(urllib.error.HTTPError) as not_ready:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10)
        assert not_ready.value.code == 503
        assert json.load(not_ready.value)["upstream"]["reachable"] is False
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/live", timeout=10) as live:
            assert json.load(live) == {"status": "ok"}
    finally:
        server.should_exit = True
        thread.join(timeout=20)


def test_an_answer_resting_on_truncated_samples_abstains_in_words(client, stand_in):
    """3 of 5 samples cut by the token limit: they are not answers, the reply abstains with
    OpenAI's refusal field (content null), finish_reason "length", and says how the samples
    counted and what was sent."""
    resp = client.chat.completions.create(
        model="stand-in:sets",
        messages=[{"role": "user", "content": "Which planets have rings?"}],
        n=5,
        max_tokens=8,
    )
    choice, ext = resp.choices[0], resp.model_extra["task_aware"]
    assert choice.message.content is None and choice.finish_reason == "length"
    assert choice.message.refusal.startswith("abstains: no answer is named by at least half")
    assert "3 of 5 samples could not be read, 3 cut by the token limit" in choice.message.refusal
    assert (ext["n_parsed"], ext["n_truncated"], ext["n_no_answer"]) == (2, 3, 3)
    assert [s["finish_reason"] for s in ext["samples"]] == ["stop", "stop"] + ["length"] * 3
    assert ext["sampling"] == {
        "n": 5,
        "temperature": "server default",
        "top_p": "server default",
        "max_tokens": 8,
        "seed": "server default",
    }
    assert "temperature" not in stand_in.state.bodies[-1]  # not set: not sent (the paper's rule)
    # the paper's rule would have read "Saturn" 3 times of 5 and answered it


def test_identical_samples_are_warned_about(client):
    resp = client.chat.completions.create(
        model="stand-in:classes", messages=[{"role": "user", "content": "Name a colour"}], n=5
    )
    assert "same text" in resp.model_extra["task_aware"]["warning"]


def test_langchain_reads_the_abstention(served):
    """LangChain's ChatOpenAI surfaces OpenAI's refusal as additional_kwargs["refusal"]
    (langchain-openai: the dev extra)."""
    import langchain_openai

    url, _, _ = served
    chat = langchain_openai.ChatOpenAI(
        model="stand-in:sets", base_url=url + "/v1", api_key=KEY, n=5, max_retries=0, timeout=60
    )
    message = chat.invoke("Which planets have rings?")
    assert message.content == ""
    assert message.additional_kwargs["refusal"].startswith("abstains")


def test_n_is_choices_the_bayes_answer_then_the_next_best_by_risk(client, stand_in):
    """n=3 of the classes question (5 samples: Paris x3, Lyon, Marseille): Paris (0-1 risk
    2/5), then Lyon and Marseille (risk 4/5 each, Lyon first seen); the samples stay 5."""
    resp = client.chat.completions.create(
        model="stand-in:classes", messages=[{"role": "user", "content": QUESTION["classes"]}], n=3
    )
    assert [c.message.content for c in resp.choices] == ["Paris", "Lyon", "Marseille"]
    assert [c.index for c in resp.choices] == [0, 1, 2]
    alternatives = resp.model_extra["task_aware"]["alternatives"]
    assert [a["risk"] for a in alternatives] == [pytest.approx(0.8), pytest.approx(0.8)]
    assert stand_in.state.bodies[-1]["n"] == 5  # the server's --n samples
    # more choices than distinct answers: as many as there are
    resp = client.chat.completions.create(
        model="stand-in:classes", messages=[{"role": "user", "content": QUESTION["classes"]}], n=9
    )
    assert len(resp.choices) == 3


def test_stream_is_server_sent_events_of_the_decided_answer(client):
    stream = client.chat.completions.create(
        model="stand-in:classes",
        messages=[{"role": "user", "content": QUESTION["classes"]}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Paris"
    last = [c for c in chunks if c.choices][-1]
    assert last.choices[0].finish_reason == "stop"
    assert last.model_extra["task_aware"]["answer"] == "Paris"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == 2


def test_openai_fields_reach_the_upstream_or_are_refused_with_the_reason(client, stand_in):
    client.chat.completions.create(
        model="stand-in:classes",
        messages=[{"role": "user", "content": QUESTION["classes"]}],
        stop=["\n"],
        response_format={"type": "json_object"},
        presence_penalty=0.5,
        frequency_penalty=-0.5,
        seed=3,
    )
    sent = stand_in.state.bodies[-1]
    assert sent["stop"] == ["\n"] and sent["response_format"] == {"type": "json_object"}
    assert (sent["presence_penalty"], sent["frequency_penalty"], sent["seed"]) == (0.5, -0.5, 3)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    for fields, param in (
        ({"tools": tools}, "tools"),
        ({"logprobs": True}, "logprobs"),
        ({"stop": [""] * 5}, "stop"),
        ({"presence_penalty": 3}, "presence_penalty"),
    ):
        with pytest.raises(openai.BadRequestError) as excinfo:
            client.chat.completions.create(
                model="stand-in:classes", messages=[{"role": "user", "content": "x"}], **fields
            )
        assert excinfo.value.body["param"] == param
        if param in ("tools", "logprobs"):
            assert excinfo.value.body["code"] == "unsupported_parameter"


def test_the_risk_reaches_a_langchain_user(served):
    """ChatOpenAI(include_response_headers=True) shows the x-taskaware-* headers in
    response_metadata; its stream ends with the decided answer."""
    import langchain_openai

    url, _, _ = served
    chat = langchain_openai.ChatOpenAI(
        model="stand-in:classes",
        base_url=url + "/v1",
        api_key=KEY,
        max_retries=0,
        timeout=60,
        include_response_headers=True,
    )
    message = chat.invoke(QUESTION["classes"])
    headers = message.response_metadata["headers"]
    assert message.content == "Paris"
    assert float(headers["x-taskaware-bayes-risk"]) == pytest.approx(0.4)
    assert float(headers["x-taskaware-confidence"]) == pytest.approx(0.6)
    assert "".join(chunk.content for chunk in chat.stream(QUESTION["classes"])) == "Paris"
    assert [m.content for m in chat.batch([QUESTION["classes"]] * 3)] == ["Paris"] * 3


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"temperature": float("nan")}, 400, "temperature"),
        ({"top_p": float("inf")}, 400, "top_p"),
        ({"samples": 1e400}, 400, "samples"),
    ],
)
def test_invalid_numbers_are_400s_naming_the_parameter(served, body, status, param):
    url, _, _ = served
    payload = json.dumps(
        {"model": "stand-in:sets", "messages": [{"role": "user", "content": "q"}], **body}
    )  # json.dumps writes NaN / Infinity as Python's json reads them
    request = urllib.request.Request(
        url + "/v1/chat/completions",
        data=payload.encode(),
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as excinfo:
        urllib.request.urlopen(request, timeout=30)
    assert excinfo.value.code == status
    assert json.load(excinfo.value)["error"]["param"] == param


def test_malformed_and_oversized_bodies(served):
    url, log_path, process = served

    def post(data: bytes) -> tuple[int, dict]:
        request = urllib.request.Request(
            url + "/v1/chat/completions", data=data, headers={"Authorization": f"Bearer {KEY}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.load(response)
        except urllib.error.HTTPError as exc:
            return exc.code, json.load(exc)

    assert post(b"[" * 100_000 + b"]" * 100_000)[0] == 400  # nested past any parser
    status, body = post(b'{"model": "' + b"m" * (5 * 2**20) + b'"}')  # past 4 MiB
    assert status == 413 and body["error"]["code"] == "body_too_large"
    status, body = post(
        json.dumps(
            {"model": "x" * 100_000 + ":poems", "messages": [{"role": "user", "content": "q"}]}
        ).encode()
    )
    assert status == 404 and len(body["error"]["message"]) < 600  # the name echoed, bounded
    logged = [json.loads(line) for line in log_path.read_text().splitlines()]
    assert {400, 413, 404} <= {entry["status"] for entry in logged}  # every request logged
    assert process.poll() is None


def test_upstream_text_is_redacted_before_a_caller_sees_it():
    from pipeline.runtime.secrets import redact_text

    said = (
        "401: invalid key sk-live-abcdef123456 sent as Authorization: Bearer abc.def-123456 "
        "to http://u:pw-998877@h/v1?api_key=zz-9988776655 (api_key=qq1122334455)"
    )
    out = redact_text(said, known=("my-own-key-000",))
    for secret in (
        "sk-live-abcdef123456",
        "abc.def-123456",
        "pw-998877",
        "zz-9988776655",
        "qq1122334455",
    ):
        assert secret not in out, out
    assert redact_text("upstream says my-own-key-000", ("my-own-key-000",)) == "upstream says ***"


def test_model_names_do_not_grow_client_threads(client, stand_in, served):
    """Each new upstream model name made a client (a thread) that was never freed (300 names:
    +300 threads): now at most MAX_BACKENDS idle ones are kept."""
    import psutil

    from pipeline.serve.upstream import MAX_BACKENDS

    server = psutil.Process(served[2].pid)
    before = server.num_threads()
    stand_in.state.served_models = None  # the stand-in then answers any model name
    try:
        for i in range(MAX_BACKENDS + 12):
            client.chat.completions.create(
                model=f"model-{i}:classes",
                extra_body={"samples": 1},
                messages=[{"role": "user", "content": "Name a colour"}],
            )
    finally:
        stand_in.state.served_models = ["stand-in"]
    # 16 clients (MAX_BACKENDS) and the /models probe; 28 without the bound
    assert MAX_BACKENDS == 16 and server.num_threads() - before <= 18, (
        before,
        server.num_threads(),
    )
