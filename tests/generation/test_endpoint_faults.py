"""Endpoint faults no retry fixes quickly, each ending in one line that says what to change: a
server that sends its headers and then hangs (bounded by backend.timeout per request and
backend.deadline for a batch), a body over backend.max_response_bytes (refused, not held or
cached), a server that keeps failing (its own error body is in the message), and the same
failure from the generate stage on the command line (a PipelineError: exit 2, one line).

The server is the loopback stand-in (scripts/openai_stand_in.py) with a handler that can hang
mid-body, stream an endless chunked body, or answer a fixed error body: faults a real server
cannot be made to produce on demand.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.clients.llm_client import DEFAULT_MAX_RESPONSE_BYTES, LLMCallError, LLMClient
from pipeline.config import resolve_cell
from pipeline.generation.base import SamplingConfig, get_backend
from pipeline.runtime.errors import PipelineError

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
from openai_stand_in import FaultyServer

MESSAGES = [{"role": "user", "content": "Which oceans border the USA?"}]


@pytest.fixture()
def server():
    with FaultyServer() as srv:
        srv.state.sampler = lambda request: [{"text": "Pacific", "tokens": [("Pacific", -0.1)]}]
        yield srv


def one_line_error(excinfo) -> str:
    message = str(excinfo.value)
    assert "\n" not in message, message
    assert excinfo.value.__cause__ is None and excinfo.value.__suppress_context__
    return message


def cached_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.json")) if root.exists() else []


def test_a_body_that_hangs_is_bounded_by_the_timeout_per_attempt(server, tmp_path):
    """Headers, a few bytes, then silence: each attempt ends at the timeout (the body read
    included); two attempts, not two hangs."""
    server.fault = ("hang",)
    client = LLMClient(
        model="m",
        base_url=server.base_url,
        cache_dir=tmp_path,
        timeout=0.5,
        max_retries=1,
        backoff_base=0.01,
    )
    started = time.monotonic()
    with pytest.raises(LLMCallError) as excinfo:
        client.chat(MESSAGES)
    elapsed = time.monotonic() - started
    message = one_line_error(excinfo)
    assert (
        "failed after 2 attempt(s): TimeoutError: no whole answer within the timeout of "
        "0.5 s" in message
    )
    assert 0.9 < elapsed < 3.0, elapsed
    assert server.state.requests == 2 and not cached_files(tmp_path)


def backend_from_config(tmp_path, *overrides):
    """The generate stage's backend for backend=openai with `overrides` (conf/backend/openai.yaml
    through the config schema, as the command line builds it)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from pipeline.config import register_configs
    from pipeline.generation.cell import generation_backend
    from pipeline.runtime.resources import conf_dir

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=[
                f"output_root={tmp_path / 'outputs'}",
                f"cache_dir={tmp_path / 'cache'}",
                "wandb.enabled=false",
                "backend=openai",
                "backend.served_model=m",
                *overrides,
            ],
        )
    return generation_backend(resolve_cell(cfg))


def test_a_deadline_bounds_every_retry_of_a_hung_server(server, tmp_path):
    """backend.timeout and backend.deadline from the config: six attempts of 0.5 s (plus
    backoff) would take 5 s and more; the deadline of 1.2 s ends them, and the message names
    both settings the way the config does."""
    server.fault = ("hang",)
    backend = backend_from_config(
        tmp_path,
        f"backend.base_url={server.base_url}",
        "backend.timeout=0.5",
        "backend.deadline=1.2",
    )
    assert (backend.client.timeout, backend.client.deadline, backend.client.max_retries) == (
        0.5,
        1.2,
        5,
    )
    started = time.monotonic()
    with pytest.raises(LLMCallError) as excinfo:
        backend.sample(["q"], SamplingConfig(n=2, max_new_tokens=8))
    elapsed = time.monotonic() - started
    message = one_line_error(excinfo)
    assert isinstance(excinfo.value, PipelineError)  # the command line prints it and exits 2
    assert "passed their deadline of 1.2 s (backend.deadline) with 0 of 1 answered" in message
    assert (
        "the last failed attempt: TimeoutError: no whole answer within the timeout of "
        "0.5 s (backend.timeout)"
    ) in message
    assert 1.1 < elapsed < 3.0, elapsed
    assert 1 <= server.state.requests <= 2  # 0.5 s each, a backoff of 0.5-1 s between
    assert not cached_files(tmp_path / "cache")


def test_a_body_over_the_declared_cap_is_refused_at_once_naming_the_setting(server, tmp_path):
    """A 17 MiB choice (Content-Length says so): refused before its body is read, not retried,
    not cached; the message names the cap and backend.max_response_bytes."""
    assert DEFAULT_MAX_RESPONSE_BYTES == 16 * 2**20
    server.state.sampler = lambda request: [{"text": "x" * (17 * 2**20), "tokens": []}]
    backend = get_backend(
        "openai", model="m", base_url=server.base_url, cache_dir=str(tmp_path), check_model=False
    )
    with pytest.raises(LLMCallError) as excinfo:
        backend.sample(["q"], SamplingConfig(n=1, max_new_tokens=8))
    message = one_line_error(excinfo)
    assert (
        "failed after 1 attempt(s): ResponseTooLargeError: the response body passed the "
        "cap of 16777216 bytes" in message
    )
    assert "raise backend.max_response_bytes" in message
    assert server.state.requests == 1 and not cached_files(tmp_path)
    # the same answer under a raised cap is taken and cached
    raised = get_backend(
        "openai",
        model="m",
        base_url=server.base_url,
        cache_dir=str(tmp_path),
        check_model=False,
        max_response_bytes=18 * 2**20,
    )
    got = raised.sample(["q"], SamplingConfig(n=1, max_new_tokens=8))
    assert len(got[0][0].text) == 17 * 2**20 and len(cached_files(tmp_path)) == 1


def test_a_streamed_body_without_a_length_is_cut_at_the_cap(server, tmp_path):
    """No Content-Length (chunked): the body is counted as it comes and the read stops just
    past the cap, long before the 4 MiB the server would send."""
    server.fault = ("stream", 4 * 2**20)
    client = LLMClient(
        model="m",
        base_url=server.base_url,
        cache_dir=tmp_path,
        max_response_bytes=100_000,
        backoff_base=0.01,
    )
    with pytest.raises(LLMCallError) as excinfo:
        client.chat(MESSAGES)
    message = one_line_error(excinfo)
    assert "the response body passed the cap of 100000 bytes (over " in message
    assert "raise max_response_bytes" in message
    assert server.state.requests == 1 and not cached_files(tmp_path)


def test_a_server_that_keeps_failing_is_reported_with_its_own_error_body(server, tmp_path):
    server.fault = ("status", 500, "engine dead:\n  CUDA error: an illegal memory access")
    client = LLMClient(
        model="m", base_url=server.base_url, cache_dir=tmp_path, max_retries=2, backoff_base=0.01
    )
    with pytest.raises(LLMCallError) as excinfo:
        client.chat(MESSAGES)
    message = one_line_error(excinfo)
    assert message == (
        f"chat completion to {server.base_url} (model m) failed after 3 "
        "attempt(s): InternalServerError: 500 engine dead: CUDA error: an "
        "illegal memory access"
    )
    assert server.state.requests == 3 and not cached_files(tmp_path)
    server.fault = ("status", 500, "engine dead " + "x" * 1000)  # a long body: cut, one line
    with pytest.raises(LLMCallError) as excinfo:
        client.chat([{"role": "user", "content": "another"}])
    assert one_line_error(excinfo).endswith("500 engine dead " + "x" * 288 + " ...")  # cut once


def test_the_generate_stage_over_a_failing_endpoint_exits_2_with_one_line(server, tmp_path):
    """The command line: the endpoint's final failure is a PipelineError, printed alone (no
    traceback) with exit status 2."""
    # Retry-After: 0, so the five retries cost no backoff (the stage's default settings)
    server.fault = ("status", 500, "engine dead", {"Retry-After": "0"})
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline",
            "stage=generate",
            "backend=openai",
            f"backend.base_url={server.base_url}",
            "backend.served_model=m",
            "dataset=triviaqa_bundled",
            "dataset.limit=1",
            "generation.n_samples=2",
            "generation.strategies=[greedy]",
            "evaluation.targets=[bayes]",
            "wandb.enabled=false",
            f"output_root={tmp_path / 'out'}",
            f"cache_dir={tmp_path / 'cache'}",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = done.stdout + done.stderr  # the pipeline's log goes to stdout
    assert done.returncode == 2, output[-3000:]
    errors = [line for line in output.splitlines() if "engine dead" in line]
    assert len(errors) == 1 and "Traceback" not in output, output[-3000:]
    assert errors[0].endswith(
        f"[pipeline][ERROR] - chat completion to {server.base_url} "
        "(model m) failed after 6 attempt(s): InternalServerError: 500 "
        "engine dead"
    )
    assert server.state.requests == 6


def test_the_extractors_timeout_deadline_and_cap_are_settings_named_in_its_errors(server, tmp_path):
    """task.extractor.{timeout,deadline,max_response_bytes} reach the extractor's client (they
    were fixed at 60 s, none and none), its messages name them, and bad values are refused."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from pipeline.clients.llm_client import build_llm_client
    from pipeline.config import register_configs, validate
    from pipeline.runtime.errors import ConfigError

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=[
                "dataset=maqa_bundled",
                "task.extractor.kind=llm",
                "task.extractor.timeout=0.5",
                "task.extractor.deadline=1.2",
                "task.extractor.max_response_bytes=1000",
                f"task.extractor.base_url={server.base_url}",
            ],
        )
        bad = compose("config", overrides=["dataset=maqa_bundled", "task.extractor.timeout=0"])
    GlobalHydra.instance().clear()
    client = build_llm_client(cfg.task.extractor, str(tmp_path))
    assert (client.timeout, client.deadline, client.max_response_bytes) == (0.5, 1.2, 1000)
    server.fault = ("stream", 2**20)
    with pytest.raises(LLMCallError, match="raise task.extractor.max_response_bytes"):
        client.chat(MESSAGES)
    with pytest.raises(ConfigError, match="task.extractor.timeout=0.*seconds > 0"):
        validate(bad)
