"""`taskaware serve` as a user gets it: the wheel with the `serve` extra installed into a fresh
Python 3.12 venv by uv (fastapi and uvicorn resolved from the package index, no torch), its
`taskaware` console script started from another directory in front of the loopback stand-in,
and the official `openai` client calling it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.serve.test_serve import QUESTION, free_port, sampler, wait_listening
from tests.test_core_install import _ok, interpreter, uv
from tests.test_packaging import wheel  # noqa: F401  (the module-scoped wheel fixture)

openai = pytest.importorskip("openai")
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
from openai_stand_in import FakeOpenAIServer  # noqa: E402


@pytest.mark.slow
def test_the_serve_extra_of_the_wheel_answers_the_openai_client(wheel, tmp_path):  # noqa: F811
    python = interpreter("3.12")
    if python is None or uv() is None:
        pytest.skip("needs Python 3.12 and uv (the dev extra)")
    venv = tmp_path / "venv"
    _ok([uv(), "venv", "-q", "-p", python, str(venv)])
    _ok(
        [
            uv(),
            "pip",
            "install",
            "-q",
            "--python",
            str(venv / "bin" / "python"),
            f"task-aware-pipeline[serve] @ {wheel.as_uri()}",
        ]
    )
    listed = _ok([uv(), "pip", "list", "--format=json", "--python", str(venv / "bin" / "python")])
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert {"fastapi", "uvicorn"} <= names and "torch" not in names

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(TASK_AWARE_CACHE=str(tmp_path / "cache"))
    with FakeOpenAIServer() as upstream:
        upstream.state.sampler = sampler
        upstream.state.served_models = ["stand-in"]
        port = free_port()
        process = subprocess.Popen(
            [
                str(venv / "bin" / "taskaware"),
                "serve",
                "--upstream",
                upstream.base_url,
                "--port",
                str(port),
                "--n",
                "5",
                "--log-level",
                "warning",
            ],
            cwd=elsewhere,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            wait_listening(url, process, limit=120)
            client = openai.OpenAI(base_url=url + "/v1", api_key="-", max_retries=0, timeout=60)
            answer = client.chat.completions.create(
                model="stand-in:sets", messages=[{"role": "user", "content": QUESTION["sets"]}]
            )
            ext = answer.model_extra["task_aware"]
            # samples: "Paris and Lyon", "Paris", "Paris, Lyon", "Nice", "Paris and Nice":
            # paris 4/5, lyon 2/5, nice 2/5 -> {paris}; risk 1/5 + 2/5 + 2/5
            assert answer.choices[0].message.content == "Paris"
            assert ext["n"] == 5 and ext["bayes_risk"] == pytest.approx(1.0)
            assert 0.0 <= ext["confidence"] <= 1.0
            ids = {m.id for m in client.models.list()}
            # model:task names only (the plain name needs --default-task to answer)
            assert {"stand-in:sets", "stand-in:classes", "stand-in:reals"} <= ids
            assert "stand-in" not in ids
        finally:
            process.terminate()
            _, stderr = process.communicate(timeout=30)
    assert process.returncode in (0, -15), stderr
