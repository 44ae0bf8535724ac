"""`lm_eval` itself (the lm-eval extra) with the shipped task and the task_aware filter: the
packaged SmolLM2-135M through lm-eval's `hf` model, and through vLLM's own OpenAI-compatible
server with lm-eval's `local-completions` model. lm-eval's results JSON holds the Bayes answer's
quality and the PRR / AUC of its risk, equal to `taskaware-score` on the samples it logged."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

pytest.importorskip("lm_eval", reason="the lm-eval extra (pip install '.[lm-eval]')")

import pipeline
from pipeline.harness import TASKS

TASK = "taskaware_triviaqa_bundled"
METRICS = (
    "exact_match",
    "bayes_exact_match_error",
    "bayes_risk",
    "prr_bayes_risk",
    "prr_low_bayes_risk",
    "prr_high_bayes_risk",
    "auc_bayes_risk",
)


def _lm_eval(tmp_path: Path, model: str, model_args: str, *extra: str) -> tuple[dict, Path]:
    out = tmp_path / "lm_eval_out"
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "lm_eval",
            "--model",
            model,
            "--model_args",
            model_args,
            "--tasks",
            TASK,
            "--include_path",
            str(TASKS),
            "--limit",
            "4",
            "--log_samples",
            "--output_path",
            str(out),
            "--seed",
            "0",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # lm-eval's own table on stdout names our metrics under the task_aware filter
    assert "task_aware" in done.stdout and "prr_bayes_risk" in done.stdout, done.stdout[-3000:]
    (results_file,) = out.rglob("results_*.json")
    (samples_file,) = out.rglob(f"samples_{TASK}_*.jsonl")
    return json.loads(results_file.read_text())["results"][TASK], samples_file


def _same_as_taskaware_score(results: dict, samples: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scored = pipeline.score(samples, task="classes", fmt="lm-eval", lm_eval_filter="task_aware")
    uq, _ = pipeline.summaries(scored)
    row = uq[(uq["estimator"] == "bayes_risk") & (uq["metric"] == "exact_match_error")].iloc[0]
    got = {m: results[f"{m},task_aware"] for m in METRICS}
    assert got["bayes_risk"] == pytest.approx(scored["bayes_risk"].mean(), abs=1e-9)
    for ours, theirs in (
        ("prr_bayes_risk", "prr"),
        ("prr_low_bayes_risk", "prr_low"),
        ("prr_high_bayes_risk", "prr_high"),
        ("auc_bayes_risk", "auc"),
    ):
        value = got[ours]
        assert (math.isnan(value) and math.isnan(row[theirs])) or value == pytest.approx(
            row[theirs], abs=1e-9
        ), (ours, value, row[theirs])
    assert "exact_match,majority_vote" in results  # lm-eval's own filter in the same run


@pytest.mark.slow
def test_lm_eval_hf_on_the_packaged_smollm2_reports_the_bayes_answer_and_its_risk(tmp_path):
    from pipeline.generation.smollm2 import ensure_dense_model

    folder = ensure_dense_model()
    results, samples = _lm_eval(
        tmp_path, "hf", f"pretrained={folder},dtype=float32", "--apply_chat_template"
    )
    _same_as_taskaware_score(results, samples)


@pytest.mark.slow
def test_lm_eval_local_completions_through_vllms_own_server(tmp_path):
    from tests.vllm_server import HUB_ID, vllm_server  # the slow suite's server (.venv-vllm)

    with vllm_server(tmp_path) as (base_url, _log):
        results, samples = _lm_eval(
            tmp_path,
            "local-chat-completions",
            f"model={HUB_ID},base_url={base_url}/chat/completions,num_concurrent=2,"
            "max_retries=2,tokenized_requests=False",
            "--apply_chat_template",
        )
    _same_as_taskaware_score(results, samples)
