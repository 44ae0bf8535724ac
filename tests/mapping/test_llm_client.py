"""LLMClient against a REAL OpenAI-compatible HTTP server on loopback (scripts/openai_stand_in.py).

The server answers deterministically from the rule-based extractors (fast); it counts requests
server-side, so "zero calls on a rerun" is measured where the calls would arrive.
"""

import json
import sys
from pathlib import Path

import pytest

from pipeline.clients.llm_client import LLMCallError, LLMClient, MissingAPIKeyError, cache_key
from pipeline.tasks.sets.reading import SetExtractor
from pipeline.tasks.simplex.reading import SimplexMapper

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from openai_stand_in import FakeOpenAIServer, scripted  # noqa: E402

ANSWERS = [
    "The Atlantic and Pacific Oceans.",
    "Atlantic, Pacific and Arctic",
    "I don't know.",
    "Only the Pacific.",
]
QUESTION = "Which oceans border the USA?"


@pytest.fixture()
def server():
    with FakeOpenAIServer() as srv:
        yield srv


def make_client(server, tmp_path, **kw):
    kw.setdefault("backoff_base", 0.01)
    return LLMClient(
        model="rule-server", base_url=server.base_url, cache_dir=tmp_path / "cache", **kw
    )


def test_set_extraction_then_rerun_makes_zero_requests(server, tmp_path):
    client = make_client(server, tmp_path)
    sets = SetExtractor(method="llm", client=client).extract([QUESTION] * 4, ANSWERS)
    assert sets == [
        frozenset({"atlantic", "pacific"}),  # the paper's own example: {Atlantic, Pacific}
        frozenset({"atlantic", "pacific", "arctic"}),
        frozenset(),
        frozenset({"pacific"}),
    ]
    assert server.state.requests == 4 and client.stats.calls == 4 and client.stats.cache_hits == 0
    assert set(server.state.models) == {"rule-server"}
    # one JSON file per key, named by sha256(model, messages, params)
    files = sorted((tmp_path / "cache").rglob("*.json"))
    assert len(files) == 4
    record = json.loads(files[0].read_text())
    assert files[0].stem == cache_key(
        record["model"], record["messages"], record["params"], record["endpoint"]
    )
    assert record["params"]["temperature"] == 0.0
    # a fresh client on the same cache: zero HTTP requests
    again = make_client(server, tmp_path)
    assert SetExtractor(method="llm", client=again).extract([QUESTION] * 4, ANSWERS) == sets
    assert server.state.requests == 4
    assert (again.stats.calls, again.stats.cache_hits) == (0, 4)


def test_simplex_extraction_through_server(server, tmp_path):
    client = make_client(server, tmp_path)
    mapper = SimplexMapper(method="llm", client=client)
    got = mapper.parse([QUESTION] * 2, ["Atlantic (55%), Pacific (45%)", "no idea"])
    assert got == [{"Atlantic": 0.55, "Pacific": 0.45}, {"I don't know": 1.0}]
    assert mapper.n_failures == 0


def test_retries_on_injected_500_and_429(server, tmp_path):
    server.state.faults = [500, 429, 503]
    client = make_client(server, tmp_path, max_retries=3)
    assert client.complete(["hello"]) == ["HELLO"]
    assert server.state.requests == 4
    assert (client.stats.calls, client.stats.retries, client.stats.failures) == (4, 3, 0)


def test_retry_on_timeout(server, tmp_path):
    server.state.faults = ["stall"]
    server.state.stall = 1.5
    client = make_client(server, tmp_path, timeout=0.5, max_retries=2)
    assert client.complete(["slow"]) == ["SLOW"]
    assert client.stats.retries == 1 and server.state.requests == 2


def test_retries_exhausted_and_non_retryable(server, tmp_path):
    server.state.faults = [500, 500, 500]
    client = make_client(server, tmp_path, max_retries=2)
    assert client.complete(["a"]) == [None]  # counted failure, no crash
    assert (client.stats.calls, client.stats.failures) == (3, 1)
    with pytest.raises(LLMCallError, match="after 3 attempt"):
        server.state.faults = [500, 500, 500]
        client.chat([{"role": "user", "content": "b"}])
    server.state.faults = [400]
    before = server.state.requests
    with pytest.raises(LLMCallError, match="BadRequestError"):
        client.chat([{"role": "user", "content": "c"}])
    assert server.state.requests == before + 1  # a 400 is not retried
    # within one run a failed request is not sent again (a queued prefetch and the per-prompt
    # call ask once between them); failures are not cached: the next run asks again
    before = server.state.requests
    assert client.complete(["a"]) == [None] and server.state.requests == before
    assert make_client(server, tmp_path).complete(["a"]) == ["A"]


def test_concurrency_is_bounded(server, tmp_path):
    server.state.delay = 0.2
    client = make_client(server, tmp_path, max_workers=3)
    prompts = [f"p{i}" for i in range(9)]
    assert client.complete(prompts) == [p.upper() for p in prompts]
    assert server.state.peak_in_flight == 3
    assert server.state.requests == 9


def test_identical_concurrent_requests_share_one_call(server, tmp_path):
    server.state.delay = 0.1
    client = make_client(server, tmp_path, max_workers=4)
    assert client.complete(["same"] * 8) == ["SAME"] * 8
    assert server.state.requests == 1 and client.stats.cache_hits == 7


def test_missing_key_for_remote_base_url(monkeypatch, tmp_path):
    monkeypatch.delenv("MY_EXTRACTOR_KEY", raising=False)
    # an address that is never contacted: the key check happens before any request
    client = LLMClient(
        model="gpt-4.1-mini",
        base_url="https://api.invalid.example/v1",
        api_key_env="MY_EXTRACTOR_KEY",
        cache_dir=tmp_path,
    )
    with pytest.raises(MissingAPIKeyError, match="MY_EXTRACTOR_KEY"):
        client.chat([{"role": "user", "content": "hi"}])
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingAPIKeyError, match="OPENAI_API_KEY"):
        LLMClient(cache_dir=tmp_path).complete(["hi"])


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="max_workers"):
        LLMClient(max_workers=0)
    with pytest.raises(ValueError, match="messages"):
        LLMClient(base_url="http://127.0.0.1:9/v1", cache_dir=None).chat("hello")  # type: ignore[arg-type]


@pytest.mark.parametrize("reply", ["null", "empty"])
def test_an_empty_reply_is_a_failed_call_never_cached(server, tmp_path, reply):
    """A 200 with content null or "" used to be cached, so the cell kept 0 parsed latents even
    after the server was fixed; now it is retried, and when retries run out it fails uncached."""
    server.state.faults = [reply]
    client = make_client(server, tmp_path, max_retries=2)
    assert client.complete(["hello"]) == ["HELLO"]  # retried once, then answered
    assert (server.state.requests, client.stats.retries) == (2, 1)
    server.state.faults = [reply] * 3
    broken = make_client(server, tmp_path / "other", max_retries=2)
    assert broken.complete(["again"]) == [None] and broken.stats.failures == 1
    assert not list((tmp_path / "other" / "cache").rglob("*.json"))  # nothing frozen
    assert make_client(server, tmp_path / "other").complete(["again"]) == ["AGAIN"]  # fixed server


def test_the_cache_is_per_endpoint_and_serves_a_record_only_under_its_own_key(server, tmp_path):
    client = make_client(server, tmp_path)
    client.complete(["one", "two"])
    with FakeOpenAIServer() as other:  # same model name, another server: asked again
        again = LLMClient(
            model="rule-server", base_url=other.base_url, cache_dir=tmp_path / "cache"
        )
        assert again.complete(["one"]) == ["ONE"] and other.state.requests == 1
    files = {
        json.loads(f.read_text())["messages"][0]["content"]: f
        for f in (tmp_path / "cache").rglob("*.json")
        if json.loads(f.read_text())["endpoint"] == client.endpoint
    }
    files["one"].write_text(files["two"].read_text())  # a swapped record
    fresh = make_client(server, tmp_path)
    assert fresh.complete(["one"]) == ["ONE"] and fresh.stats.cache_hits == 0  # asked again
    assert fresh.complete(["two"]) == ["TWO"] and fresh.stats.cache_hits == 1


def test_a_base_url_with_credentials_is_refused(tmp_path, compose_cfg):
    from pipeline.config import mapper_config
    from pipeline.runtime.errors import ConfigError

    with pytest.raises(ValueError, match="holds credentials"):
        LLMClient(base_url="https://user:s3cret@example.com/v1", cache_dir=tmp_path)
    with pytest.raises(ConfigError, match="holds credentials.*api_key_env"):
        mapper_config(
            compose_cfg("task=sets", "task.extractor.base_url=https://u:p@h.io/v1"), "sets"
        )


def test_a_retry_after_header_sets_the_wait(server, tmp_path, monkeypatch):
    import pipeline.clients.llm_client as llm_client

    waited = []

    async def clock(seconds):  # a clock, not a mock server
        waited.append(seconds)

    monkeypatch.setattr(llm_client, "_wait", clock)
    server.state.faults = [(429, 7), (503, 0.5)]
    client = make_client(server, tmp_path, backoff_base=30.0)
    assert client.chat([{"role": "user", "content": "hello"}]) == "HELLO"
    # as asked, not the 15-30 s exponential backoff
    assert waited == [7.0, 0.5]


def test_the_map_stage_queues_extraction_calls_across_prompts(server, tmp_path):
    """Three responses per prompt, eight in flight: only a queue over all prompts fills it."""
    import pipeline

    server.state.delay = 0.2
    records = [
        {
            "question": f"Which oceans border country {i}?",
            "responses": [f"The Atlantic {i}.", f"Pacific and Atlantic {i}", "Arctic"],
        }
        for i in range(6)
    ]
    df = pipeline.score(
        records,
        task="sets",
        mapper="llm",
        overrides=[
            f"task.extractor.base_url={server.base_url}",
            "task.extractor.model=rule-server",
            "task.extractor.max_concurrency=8",
            f"cache_dir={tmp_path / 'cache'}",
        ],
    )
    assert len(df) == 6 and (df["n_parsed"] == 3).all()
    assert server.state.requests == 6 * 3  # one call per response, none twice
    assert 3 < server.state.peak_in_flight <= 8


def test_the_in_flight_bound_holds_across_threads_calling_one_client(server, tmp_path):
    """Two threads (e.g. the map stage's prefetch and a judge) share the client's bound."""
    import threading

    server.state.delay = 0.2
    client = make_client(server, tmp_path, max_workers=3)
    replies = {}
    threads = [
        threading.Thread(
            target=lambda t=t: replies.__setitem__(
                t, client.complete([f"{t}-{i}" for i in range(6)])
            )
        )
        for t in ("a", "b")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert replies == {t: [f"{t}-{i}".upper() for i in range(6)] for t in ("a", "b")}
    assert server.state.peak_in_flight == 3 and server.state.requests == 12


def test_a_fatal_refusal_stops_the_rest_of_the_batch(server, tmp_path):
    from pipeline.clients.llm_client import FatalLLMCallError

    # the first request to arrive is held (stall), so the 401 answers the second: both are in
    # flight when it comes, whatever the machine's load (an immediate 401 on the first could
    # beat the second request to the server)
    server.state.faults = ["stall", 401]
    client = make_client(server, tmp_path, max_workers=2)
    with pytest.raises(FatalLLMCallError, match="AuthenticationError"):
        client.complete([f"p{i}" for i in range(5)])
    assert server.state.requests == 2  # the two in flight; the other three were never sent


def test_callable_from_a_running_event_loop_and_after_close(server, tmp_path):
    """A notebook runs its own event loop: the synchronous calls still work inside it."""
    import asyncio

    client = make_client(server, tmp_path)

    async def notebook_cell():
        return client.complete(["inside"])

    assert asyncio.run(notebook_cell()) == ["INSIDE"]
    client.close()
    assert client.complete(["again"]) == ["AGAIN"]  # a new loop and session
    jobs = [([{"role": "user", "content": c}], {"n": 1}) for c in ("x", "y")]
    assert [c[0]["text"] for c in client.choices_many(jobs)] == ["X", "Y"]


JOB = ([{"role": "user", "content": "Which ocean?"}], {"n": 1, "logprobs": True})


@pytest.mark.parametrize("blank", ["", " ", "\n\t  \n"])
def test_a_blank_choice_is_retried_never_cached_then_the_answer_is(server, tmp_path, blank):
    """content "" or whitespace from a 200 used to pass as a sample and be cached for good."""
    server.state.sampler = scripted(blank, "Pacific")
    client = make_client(server, tmp_path, max_retries=2)
    assert client.choices_many([JOB])[0][0]["text"] == "Pacific"
    assert (server.state.requests, client.stats.retries) == (2, 1)
    assert make_client(server, tmp_path).choices_many([JOB])[0][0]["text"] == "Pacific"
    assert server.state.requests == 2  # the answer was cached, the blank never was
    server.state.sampler = scripted(blank)
    broken = make_client(server, tmp_path / "other", max_retries=1)
    with pytest.raises(
        LLMCallError,
        match=r"failed after 2 attempt\(s\): EmptyReplyError: 200 "
        r"with a choice whose content is",
    ):
        broken.choices_many([JOB])
    assert not list((tmp_path / "other").rglob("*.json"))
    server.state.sampler = scripted(blank)  # the chat path (extractors) refuses it too
    assert make_client(server, tmp_path / "chat", max_retries=1).complete(["q"]) == [None]
    assert not list((tmp_path / "chat").rglob("*.json"))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), 0.5, 1e-5])
def test_a_log_prob_that_is_no_log_prob_is_retried_and_never_cached(server, tmp_path, bad):
    """NaN, +-inf or positive token log-probs (beyond 1e-6 of rounding) used to be cached, and
    every rerun then failed on them downstream."""
    server.state.sampler = scripted(("Pacific", [-0.5, bad]), ("Pacific", [-0.5, -0.25]))
    client = make_client(server, tmp_path, max_retries=2)
    assert client.choices_many([JOB])[0][0]["logprobs"] == [-0.5, -0.25]
    assert (server.state.requests, client.stats.retries) == (2, 1)
    server.state.sampler = scripted(("Pacific", [bad]))
    broken = make_client(server, tmp_path / "other", max_retries=1)
    with pytest.raises(LLMCallError, match=r"EmptyReplyError: 200 with a token log-prob of "):
        broken.choices_many([JOB])
    assert not list((tmp_path / "other").rglob("*.json"))


def test_log_probs_within_rounding_of_zero_are_zero_and_minus_inf_is_a_top_log_prob(
    server, tmp_path
):
    """A top token's log-softmax can round to +1e-7: read as 0.0 (probabilities stay <= 1). A
    top log-prob of -inf (probability 0) is a log-prob; a sampled token's is not."""

    def sampler(request):
        return [
            {
                "text": "Pacific",
                "tokens": [("Pac", 1e-7), ("ific", -0.25)],
                "top": {"Pac": 1e-7, "Atl": float("-inf")},
            }
        ]

    server.state.sampler = sampler
    client = make_client(server, tmp_path)
    choice = client.choices_many([JOB])[0][0]
    assert choice["logprobs"] == [0.0, -0.25]
    assert choice["top_logprobs"][0] == {"Pac": 0.0, "Atl": float("-inf")}
    again = make_client(server, tmp_path)
    assert again.choices_many([JOB])[0][0] == choice and again.stats.cache_hits == 1


@pytest.mark.parametrize(
    "response",
    [
        [{"text": "", "tokens": [], "logprobs": [], "top_logprobs": []}],
        [{"text": "  ", "tokens": [], "logprobs": [], "top_logprobs": []}],
        [{"text": "Pacific", "tokens": ["x"], "logprobs": [float("nan")], "top_logprobs": [{}]}],
        [{"text": "Pacific", "tokens": ["x"], "logprobs": [0.5], "top_logprobs": [{}]}],
        [{"text": "Pacific", "tokens": ["x"], "logprobs": [-0.5], "top_logprobs": [{"x": 2.0}]}],
        [{"text": "Pacific", "tokens": ["x"], "logprobs": None, "top_logprobs": [{}]}],
    ],
)
def test_a_cached_reply_that_is_no_usable_reply_is_a_miss(server, tmp_path, response):
    """A record written before these checks (here: with a valid digest, so only the reply is
    wrong) is asked again and overwritten with the server's answer."""
    server.state.sampler = scripted(("Pacific", [-0.5]))
    client = make_client(server, tmp_path)
    messages, params = JOB
    key = cache_key(client.model, messages, {**client.params, **params}, client.endpoint)
    client._cache.put(
        key,
        {
            "endpoint": client.endpoint,
            "model": client.model,
            "messages": messages,
            "params": {**client.params, **params},
            "response": response,
        },
    )
    assert client.choices_many([JOB])[0][0]["text"] == "Pacific"
    assert server.state.requests == 1 and client.stats.cache_hits == 0
    assert client._cache.get(key)["response"][0]["logprobs"] == [-0.5]


def test_a_cached_blank_chat_reply_is_a_miss(server, tmp_path):
    client = make_client(server, tmp_path)
    messages = [{"role": "user", "content": "hello"}]
    key = cache_key(client.model, messages, client.params, client.endpoint)
    client._cache.put(
        key,
        {
            "endpoint": client.endpoint,
            "model": client.model,
            "messages": messages,
            "params": client.params,
            "response": " \n",
        },
    )
    assert client.chat(messages) == "HELLO" and server.state.requests == 1
