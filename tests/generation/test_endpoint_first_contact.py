"""What a new user meets first with `generate_and_score(base_url=...)`: the errors a stock server
gives (refused connection, a base URL without /v1, a model name it does not serve, a server that
fails) said in one line with the fix, the inputs users pass (DataFrame, Series, wrong types, a
misspelt task), and the knobs peers offer (system prompt, requests per minute, deadline, async).

The server is the loopback stand-in (scripts/openai_stand_in.py): these are faults a real server
cannot be made to produce on demand. The real server (vLLM's own) is tests/slow/test_vllm_server.py.
"""

import asyncio
import socket
import sys
import time
from pathlib import Path

import pytest

import pipeline
from pipeline.clients.llm_client import FatalLLMCallError, LLMCallError
from pipeline.scorer.readers import ScoreInputError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from openai_stand_in import FakeOpenAIServer  # noqa: E402

QUESTION = "Which oceans border the USA?"


def oceans(request):
    return [{"text": "Pacific and Atlantic", "tokens": [("x", -0.1)]}] * request.get("n", 1)


@pytest.fixture()
def server():
    with FakeOpenAIServer() as srv:
        srv.state.sampler = oceans
        yield srv


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_line_error(excinfo) -> str:
    message = str(excinfo.value)
    assert "\n" not in message, message
    # no chained traceback of the client's event loop behind it
    assert excinfo.value.__cause__ is None and excinfo.value.__suppress_context__
    return message


def test_a_refused_connection_fails_in_seconds_with_the_fix(tmp_path):
    started = time.monotonic()
    with pytest.raises(FatalLLMCallError) as excinfo:
        pipeline.generate_and_score(
            [QUESTION],
            task="sets",
            model="m",
            cache_dir=tmp_path,
            base_url=f"http://127.0.0.1:{free_port()}/v1",
        )
    elapsed = time.monotonic() - started
    message = one_line_error(excinfo)
    assert "cannot connect to http://127.0.0.1" in message and "server running" in message
    assert elapsed < 15, elapsed  # two quick retries, not six exponential backoffs (~60 s)


def test_a_base_url_without_v1_is_told_to_add_it(server, tmp_path):
    root = server.base_url.removesuffix("/v1")
    with pytest.raises(FatalLLMCallError) as excinfo:
        pipeline.generate_and_score(
            [QUESTION], task="sets", model="m", base_url=root, cache_dir=tmp_path
        )
    assert f"add /v1 to the base URL (e.g. {root}/v1)" in one_line_error(excinfo)


def test_a_model_the_server_does_not_list_is_refused_before_any_request(server, tmp_path):
    server.state.served_models = ["smollm2", "qwen3-4b"]
    with pytest.raises(FatalLLMCallError) as excinfo:
        pipeline.generate_and_score(
            [QUESTION], task="sets", model="smolm2", base_url=server.base_url, cache_dir=tmp_path
        )
    message = one_line_error(excinfo)
    assert "model 'smolm2' is not served" in message and "'smollm2', 'qwen3-4b'" in message
    assert server.state.requests == 0  # asked /v1/models, sent no sampling request
    df = pipeline.generate_and_score(
        [QUESTION],
        task="sets",
        model="smollm2",
        base_url=server.base_url,
        cache_dir=tmp_path,
        n_samples=4,
    )
    assert df["bayes_text"].iloc[0] and server.state.requests == 1


def test_the_first_error_body_a_server_returned_is_what_the_user_reads(server, tmp_path):
    """vLLM's engine crash: 500 with its reason, then other failures; the reason is kept."""
    server.state.faults = [500, 503, 503]
    with pytest.raises(LLMCallError) as excinfo:
        pipeline.generate_and_score(
            [QUESTION],
            task="sets",
            model="m",
            base_url=server.base_url,
            cache_dir=tmp_path,
            n_samples=2,
            max_retries=2,
        )
    message = one_line_error(excinfo)
    assert "failed after 3 attempt(s): InternalServerError: 503 injected 503" in message
    assert "first error: InternalServerError: 500 injected 500" in message


def test_requests_per_minute_spaces_the_requests(server, tmp_path):
    server.state.sampler = lambda request: oceans({"n": 1})  # ignores n: 5 requests
    started = time.monotonic()
    pipeline.generate_and_score(
        [QUESTION],
        task="sets",
        model="m",
        base_url=server.base_url,
        cache_dir=tmp_path,
        n_samples=5,
        requests_per_minute=600,
    )
    assert server.state.requests == 5
    assert time.monotonic() - started >= 0.4  # 4 gaps of 60 / 600 s


def test_a_deadline_bounds_the_whole_call(server, tmp_path):
    # the server would answer after 10 s; the call gives up at its deadline. The bound leaves
    # room for the config compose and imports on a loaded machine (2.96 s measured under 3 jobs)
    server.state.delay = 10.0
    started = time.monotonic()
    with pytest.raises(LLMCallError) as excinfo:
        pipeline.generate_and_score(
            [QUESTION],
            task="sets",
            model="m",
            base_url=server.base_url,
            cache_dir=tmp_path,
            deadline=0.5,
        )
    assert "deadline of 0.5 s" in one_line_error(excinfo)
    assert time.monotonic() - started < 7.0


def test_a_dataframe_is_read_by_its_columns_and_a_series_keeps_its_index(server, tmp_path):
    import pandas as pd

    frame = pd.DataFrame(
        {
            "id": ["q-usa", "q-eu"],
            "question": [QUESTION, "Which oceans?"],
            "references": [["Pacific", "Atlantic"], ["Atlantic"]],
        }
    )
    df = pipeline.generate_and_score(
        frame, task="sets", model="m", base_url=server.base_url, cache_dir=tmp_path, n_samples=4
    )
    assert list(df["prompt_id"]) == ["q-usa", "q-eu"]
    assert list(df["question"]) == [QUESTION, "Which oceans?"]
    assert list(df["quality_bayes_f1"]) == pytest.approx([1.0, 2 / 3])
    series = pd.Series([QUESTION], index=["row-7"])
    df = pipeline.generate_and_score(
        series, task="sets", model="m", base_url=server.base_url, cache_dir=tmp_path, n_samples=4
    )
    assert list(df["prompt_id"]) == ["row-7"]


@pytest.mark.parametrize(
    "prompts, said",
    [
        ({"q": QUESTION}, "got a dict"),
        ([QUESTION, 3], "item 1 is a int"),
        ([], "prompts is empty"),
        ("pandas", "without a 'question' or 'prompt' column (its columns: text)"),
    ],
)
def test_prompts_that_are_not_questions_are_refused_in_one_line(prompts, said, tmp_path):
    if prompts == "pandas":
        import pandas as pd

        prompts = pd.DataFrame({"text": [QUESTION]})
    with pytest.raises(ValueError, match=said.replace("(", r"\(").replace(")", r"\)")):
        pipeline.generate_and_score(
            prompts, task="sets", model="m", base_url="http://127.0.0.1:9/v1", cache_dir=tmp_path
        )


def test_a_misspelt_task_gets_the_closest_in_python_wording():
    with pytest.raises(
        ScoreInputError,
        match=r"task='set' is not known; did you mean "
        r"task='sets'\?",
    ):
        pipeline.generate_and_score(
            [QUESTION], task="set", model="m", base_url="http://127.0.0.1:9/v1"
        )
    with pytest.raises(ScoreInputError, match=r"task='clases' .* task='classes'"):
        pipeline.score([["a", "b"]], task="clases")


def test_the_system_prompt_goes_first(server, tmp_path):
    pipeline.generate_and_score(
        [QUESTION],
        task="sets",
        model="m",
        base_url=server.base_url,
        cache_dir=tmp_path,
        n_samples=2,
        system_prompt="Be brief.",
    )
    messages = server.state.bodies[0]["messages"]
    assert messages[0] == {"role": "system", "content": "Be brief."}
    assert messages[1]["role"] == "user" and QUESTION in messages[1]["content"]


def test_agenerate_and_score_leaves_the_callers_loop_free(server, tmp_path):
    server.state.delay = 0.3

    async def main():
        ticks = 0

        async def tick():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.02)
                ticks += 1

        ticker = asyncio.ensure_future(tick())
        df = await pipeline.agenerate_and_score(
            [QUESTION],
            task="sets",
            model="m",
            base_url=server.base_url,
            cache_dir=tmp_path,
            n_samples=3,
        )
        ticker.cancel()
        return df, ticks

    df, ticks = asyncio.run(main())
    assert df["bayes_action"].iloc[0] == {"atlantic", "pacific"}
    assert ticks >= 5  # the loop ran while the request was in flight


def test_temperature_zero_is_sent_to_a_server_but_refused_in_process(tmp_path):
    with pytest.raises(ValueError, match="temperature=0 is greedy decoding"):
        pipeline.generate_and_score([QUESTION], task="sets", temperature=0.0, cache_dir=tmp_path)
