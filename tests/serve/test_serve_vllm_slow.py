"""The official `openai` client -> `taskaware serve` -> vLLM's own server (tests/vllm_server.py)
on the packaged SmolLM2: a sets and a classes request get a Bayes answer with a risk and a
confidence in [0, 1]; the proxy's overhead over calling vLLM alone is printed."""

from __future__ import annotations

import json
import statistics
import threading
import time
import urllib.request

import pytest

from tests.vllm_server import HUB_ID, free_port, needs_vllm_venv, server_errors
from tests.vllm_server import vllm_server as start_vllm

pytestmark = pytest.mark.slow
openai = pytest.importorskip("openai")
pytest.importorskip("fastapi")

REPORT: dict[str, object] = {}


@pytest.fixture(scope="module")
def vllm(tmp_path_factory):
    with start_vllm(tmp_path_factory.mktemp("vllm-server"), REPORT) as served:
        yield served


@pytest.fixture(scope="module")
def proxy(vllm, tmp_path_factory):
    import uvicorn

    from pipeline.serve.app import build_app
    from pipeline.serve.settings import ServeSettings

    port = free_port()
    settings = ServeSettings(
        upstream=vllm[0],
        port=port,
        n=8,
        max_tokens=256,
        timeout=300,
        access_log=str(tmp_path_factory.mktemp("serve") / "access.jsonl"),
    )
    server = uvicorn.Server(
        uvicorn.Config(
            build_app(settings, proxy_key=""), port=port, log_level="warning", access_log=False
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(url + "/health/live", timeout=5).close()
            break
        except OSError:
            time.sleep(0.2)
    yield url
    server.should_exit = True
    thread.join(timeout=60)
    print("\nREPORT serve over vLLM:", json.dumps(REPORT, indent=1))


@needs_vllm_venv
@pytest.mark.parametrize(
    "task, question",
    [
        ("sets", "Name the primary colors."),
        ("classes", "What is the capital of France?"),
    ],
)
def test_a_bayes_answer_through_serve_from_vllm(proxy, vllm, task, question):
    client = openai.OpenAI(base_url=proxy + "/v1", api_key="unused", max_retries=0, timeout=300)
    resp = client.chat.completions.create(
        model=f"{HUB_ID}:{task}",
        messages=[{"role": "user", "content": question}],
        max_tokens=256,
        seed=1,
        extra_body={"task_prompt": True, "samples": 8},
    )
    ext = resp.model_extra["task_aware"]
    assert resp.choices[0].finish_reason == "stop" and ext["task"] == task
    assert ext["n"] == 8 and ext["n_parsed"] > 0
    assert 0 <= ext["confidence"] <= 1 and ext["bayes_risk"] >= 0  # Hamming: up to |labels| / 2
    assert resp.choices[0].message.content == ext["answer"] != ""
    assert all(s["logprob"] is not None and s["logprob"] <= 0 for s in ext["samples"])
    assert not server_errors(vllm[1])
    REPORT[f"{task}: answer, risk, confidence"] = (
        ext["answer"],
        ext["bayes_risk"],
        ext["confidence"],
    )


@needs_vllm_venv
def test_truncated_samples_abstain_with_a_low_confidence(proxy, vllm):
    """max_tokens=2 cuts every list of colours: vLLM says finish_reason "length" for each, the
    samples are not answers, and the abstention is visible through the official client (content
    null, `refusal`, finish_reason "length") and LangChain (additional_kwargs["refusal"])."""
    client = openai.OpenAI(base_url=proxy + "/v1", api_key="unused", max_retries=0, timeout=300)
    resp = client.chat.completions.create(
        model=f"{HUB_ID}:sets",
        messages=[{"role": "user", "content": "Name the primary colors."}],
        max_tokens=2,
        extra_body={"task_prompt": True, "samples": 8},
    )
    ext, choice = resp.model_extra["task_aware"], resp.choices[0]
    assert ext["n_truncated"] >= 6, ext["samples"]
    assert choice.message.content is None and choice.message.refusal.startswith("abstains")
    assert choice.finish_reason == "length" and ext["confidence"] <= 0.25
    REPORT["truncated (max_tokens=2): refusal, confidence"] = (
        choice.message.refusal,
        ext["confidence"],
    )
    import langchain_openai  # the dev extra

    chat = langchain_openai.ChatOpenAI(
        model=f"{HUB_ID}:sets",
        base_url=proxy + "/v1",
        api_key="unused",
        max_tokens=2,
        max_retries=0,
        timeout=300,
        extra_body={"task_prompt": True, "samples": 8},
    )
    message = chat.invoke("Name the primary colors.")
    assert message.content == "" and message.additional_kwargs["refusal"].startswith("abstains")


@needs_vllm_venv
def test_every_client_reads_the_risk(proxy, vllm):
    """The official client async and streaming, LangChain's invoke (headers), batch and stream,
    each in front of vLLM's own server, each reading the Bayes answer and its risk."""
    import asyncio

    import langchain_openai

    question = [{"role": "user", "content": "What is the capital of France?"}]
    fields = {"max_tokens": 64, "seed": 3, "extra_body": {"task_prompt": True, "samples": 6}}

    async def ask():
        client = openai.AsyncOpenAI(
            base_url=proxy + "/v1", api_key="unused", max_retries=0, timeout=300
        )
        return await asyncio.gather(
            *(
                client.chat.completions.create(
                    model=f"{HUB_ID}:classes", messages=question, **fields
                )
                for _ in range(2)
            )
        )

    for resp in asyncio.run(ask()):
        assert resp.model_extra["task_aware"]["bayes_risk"] is not None
    client = openai.OpenAI(base_url=proxy + "/v1", api_key="unused", max_retries=0, timeout=300)
    chunks = list(
        client.chat.completions.create(
            model=f"{HUB_ID}:classes", messages=question, stream=True, **fields
        )
    )
    last = [c for c in chunks if c.choices][-1]
    risk = last.model_extra["task_aware"]["bayes_risk"]
    assert risk is not None and last.choices[0].finish_reason in ("stop", "length")
    chat = langchain_openai.ChatOpenAI(
        model=f"{HUB_ID}:classes",
        base_url=proxy + "/v1",
        api_key="unused",
        max_retries=0,
        timeout=300,
        max_tokens=64,
        seed=3,
        include_response_headers=True,
        extra_body={"task_prompt": True, "samples": 6},
    )
    message = chat.invoke("What is the capital of France?")
    assert float(message.response_metadata["headers"]["x-taskaware-bayes-risk"]) >= 0
    assert len(chat.batch(["What is the capital of France?"] * 2)) == 2
    assert (
        "".join(c.content for c in chat.stream("What is the capital of France?")) == message.content
    )
    REPORT["clients: streamed answer, risk"] = (
        "".join(c.choices[0].delta.content or "" for c in chunks if c.choices),
        risk,
    )


@needs_vllm_venv
def test_the_proxy_overhead_over_vllm_alone(proxy, vllm):
    """The same request (n=8, 16 tokens, seeded: the same work for vLLM) to vLLM and through
    the proxy, alternately; the difference of the medians is the proxy's overhead."""
    message = [{"role": "user", "content": "What is the capital of France?"}]
    direct = openai.OpenAI(base_url=vllm[0], api_key="unused", max_retries=0, timeout=300)
    served = openai.OpenAI(base_url=proxy + "/v1", api_key="unused", max_retries=0, timeout=300)
    times: dict[str, list[float]] = {"vllm": [], "serve": []}
    for i in range(6):
        for name, call in (
            (
                "vllm",
                lambda s: direct.chat.completions.create(
                    model=HUB_ID, messages=message, n=8, max_tokens=16, seed=s, logprobs=True
                ),
            ),
            (
                "serve",
                lambda s: served.chat.completions.create(
                    model=f"{HUB_ID}:classes",
                    messages=message,
                    max_tokens=16,
                    seed=s,
                    extra_body={"samples": 8},
                ),
            ),
        ):
            started = time.perf_counter()
            call(100 + i)
            if i:  # the first round warms both up
                times[name].append((time.perf_counter() - started) * 1000)
    medians = {k: statistics.median(v) for k, v in times.items()}
    REPORT["overhead vs vLLM, n=8, 16 tokens (median ms)"] = {
        **{k: round(v, 1) for k, v in medians.items()},
        "overhead": round(medians["serve"] - medians["vllm"], 1),
    }
    assert medians["serve"] > 0
