"""VllmBackend: the same artifact contract as the transformers backend, checked against transformers.

The slow tests run from the MAIN env: they build the tiny local Llama (scripts/make_tiny_model.py),
run `VllmBackend` on it in the vLLM venv's python through `pipeline.generation.vllm_worker`
(one engine start for the whole module), and compare every number with an independent
computation by transformers 4.57 on the same float32 weights in this process.

Tolerance for log-probs: both sides compute in float32, but with different kernels (vLLM's CPU
attention/GEMM vs torch eager) and summation orders; float32 rounding of a 2-layer, 128-wide
model's logits stays ~1e-5, so 2e-4 per token is tight yet safe (measured max 2.4e-6 here;
printed as REPORT in the test output). A processed-distribution log-prob (temperature 0.7, top-k 5) differs from the raw
one by far more (asserted below), so the tolerance cannot hide the wrong distribution.

When `.venv-vllm` does not exist the slow tests skip with that reason; the fast tests at the end
check the main-env side (no vllm import, clear errors) and always run.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pipeline.generation.vllm_worker import REPO_ROOT, default_vllm_python, run_vllm_worker

VLLM_PYTHON = default_vllm_python()
LOGPROB_TOL = 2e-4
QUESTIONS = [
    "What is the capital of France?",
    "What is the capital of Spain?",
    "Who painted the Mona Lisa?",
    "Tell me a story about the sea.",
]
PTRUE_PROMPTS = [
    "Question: What is the capital of France?\nPossible answer: Paris\nIs the possible answer True or False?",
    "Question: What is the capital of France?\nPossible answer: Rome\nIs the possible answer True or False?",
]
SAMPLE_N, SAMPLE_TOKENS = 5, 12
BENCH_PROMPTS, BENCH_N, BENCH_TOKENS = 20, 20, 20

needs_vllm_venv = pytest.mark.skipif(
    not VLLM_PYTHON.exists(),
    reason=f"vLLM venv python {VLLM_PYTHON} not found: run scripts/setup_vllm_venv.sh to create it",
)


def _load_make_tiny_model():
    spec = importlib.util.spec_from_file_location(
        "make_tiny_model", REPO_ROOT / "scripts" / "make_tiny_model.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny-llama")
    # A subprocess keeps the training's torch thread setting out of this test process.
    subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "make_tiny_model.py"), str(out)],
        check=True,
        capture_output=True,
    )
    return out


@pytest.fixture(scope="module")
def hf(tiny_model_dir):
    """The same weights in transformers (main env), float32: the independent reference."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    return tok, model


def _render(tok, question: str) -> str:
    return tok.apply_chat_template(
        [{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True
    )


@pytest.fixture(scope="module")
def prompts(hf) -> list[str]:
    return [_render(hf[0], q) for q in QUESTIONS]


@pytest.fixture(scope="module")
def ptrue_prompts(hf) -> list[str]:
    return [_render(hf[0], q) for q in PTRUE_PROMPTS]


@pytest.fixture(scope="module")
def bench_prompts(hf) -> list[str]:
    return [
        _render(hf[0], f"Question number {i}: what do you know about topic {i}?")
        for i in range(BENCH_PROMPTS)
    ]


@pytest.fixture(scope="module")
def vllm_run(tiny_model_dir, prompts, ptrue_prompts, bench_prompts) -> dict[str, Any]:
    """One vLLM engine, every call the tests need, run in the vLLM venv."""
    engine = {
        "model_path": str(tiny_model_dir),
        "dtype": "float32",
        "max_model_len": 256,
        "kv_cache_memory_bytes": 256 * 2**20,
        "seed": 0,
        # Eager mode: skips torch.compile's C++ build (minutes on a busy 2-core machine; the
        # numbers are the same, CUDA-graph/compile speedups matter only on real hardware).
        "enforce_eager": True,
    }
    calls = [
        {
            "method": "render_chat",
            "messages": [[{"role": "user", "content": q}] for q in QUESTIONS],
        },
        {
            "method": "sample",
            "prompts": prompts,
            "sampling": {
                "n": SAMPLE_N,
                "temperature": 1.0,
                "top_p": 1.0,
                "top_k": 0,
                "max_new_tokens": SAMPLE_TOKENS,
            },
        },
        {
            "method": "sample",
            "prompts": prompts,
            "sampling": {
                "n": SAMPLE_N,
                "temperature": 0.7,
                "top_p": 1.0,
                "top_k": 5,
                "max_new_tokens": SAMPLE_TOKENS,
            },
        },
        {"method": "greedy", "prompts": prompts, "max_new_tokens": 16},
        {"method": "beam", "prompts": prompts, "num_beams": 3, "max_new_tokens": 16},
        {"method": "logprob_of_next", "prompts": ptrue_prompts + prompts, "token": "True"},
        {
            "method": "sample",
            "prompts": bench_prompts,
            "sampling": {
                "n": BENCH_N,
                "temperature": 1.0,
                "top_p": 1.0,
                "top_k": 0,
                "max_new_tokens": BENCH_TOKENS,
            },
        },
    ]
    started = time.perf_counter()
    response = run_vllm_worker(engine, calls, python=VLLM_PYTHON, timeout=1500)
    response["wall_seconds"] = time.perf_counter() - started
    return response


def _output(run: dict[str, Any], index: int) -> Any:
    return run["results"][index]["output"]


def _raw_logprobs(hf, prompt: str, token_ids: list[int]):
    """Teacher-forced log_softmax(logits) of `token_ids` after `prompt`, and the logits used."""
    import torch

    tok, model = hf
    prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt_ids + list(token_ids)])
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[0].float()
    rows = logits[len(prompt_ids) - 1 : len(prompt_ids) - 1 + len(token_ids)]
    logp = torch.log_softmax(rows, dim=-1)
    return [float(logp[i, t]) for i, t in enumerate(token_ids)], rows


def _check_generation(row: dict[str, Any], tok, max_new_tokens: int) -> None:
    """Contract of one Generation: types, logprob == sum, EOS only last, text = decode(ids), and
    the finish reason vLLM reports ("stop" at EOS, "length" at the token limit; None for beam,
    whose outputs carry none)."""
    assert set(row) == {"text", "token_ids", "token_logprobs", "logprob", "finish_reason"}
    if row["finish_reason"] is not None:
        ended = row["token_ids"][-1] == tok.eos_token_id
        assert row["finish_reason"] == ("stop" if ended else "length"), row
    ids, lps = row["token_ids"], row["token_logprobs"]
    assert isinstance(row["text"], str)
    assert 1 <= len(ids) <= max_new_tokens
    assert all(isinstance(t, int) for t in ids)
    assert len(lps) == len(ids)
    assert all(isinstance(x, float) and x <= 0.0 and math.isfinite(x) for x in lps)
    assert row["logprob"] == pytest.approx(math.fsum(lps), abs=1e-9)
    assert tok.eos_token_id not in ids[:-1], "nothing may follow EOS"
    if ids[-1] != tok.eos_token_id:
        assert len(ids) == max_new_tokens, "a generation without EOS must have hit max_new_tokens"
    assert row["text"] == tok.decode(ids, skip_special_tokens=True).strip()


@pytest.mark.slow
@needs_vllm_venv
def test_render_chat_matches_transformers_template(vllm_run, prompts):
    assert _output(vllm_run, 0) == prompts


@pytest.mark.slow
@needs_vllm_venv
@pytest.mark.parametrize("call_index", [1, 2], ids=["T1", "T0.7-topk5"])
def test_samples_contract_n_per_prompt(vllm_run, hf, call_index):
    rows = _output(vllm_run, call_index)
    assert len(rows) == len(QUESTIONS)
    eos_seen = False
    for per_prompt in rows:
        assert len(per_prompt) == SAMPLE_N
        for row in per_prompt:
            _check_generation(row, hf[0], SAMPLE_TOKENS)
            eos_seen |= row["token_ids"][-1] == hf[0].eos_token_id
    assert eos_seen, (
        "the tiny chat model ends turns with EOS; its log-prob must be part of the contract check"
    )


@pytest.mark.slow
@needs_vllm_venv
def test_samples_are_diverse_under_temperature_one(vllm_run):
    # The open question ("a story about the sea") is not in the training corpus: 5 samples at T=1 differ.
    texts = {tuple(r["token_ids"]) for r in _output(vllm_run, 1)[3]}
    assert len(texts) >= 2


@pytest.mark.slow
@needs_vllm_venv
@pytest.mark.parametrize("call_index", [1, 2], ids=["T1", "T0.7-topk5"])
def test_sample_logprobs_are_raw_teacher_forced_logprobs(vllm_run, hf, prompts, call_index, capsys):
    import torch

    worst, worst_processed_gap = 0.0, 0.0
    for prompt, per_prompt in zip(prompts, _output(vllm_run, call_index)):
        for row in per_prompt:
            ref, logits = _raw_logprobs(hf, prompt, row["token_ids"])
            diffs = [abs(a - b) for a, b in zip(row["token_logprobs"], ref)]
            worst = max(worst, max(diffs))
            if call_index == 2:
                # What a processed distribution (T=0.7, top-5) would report for the same tokens.
                scaled = logits / 0.7
                kth = torch.topk(scaled, 5, dim=-1).values[:, -1:]
                processed = torch.log_softmax(
                    scaled.masked_fill(scaled < kth, float("-inf")), dim=-1
                )
                gaps = [
                    abs(float(processed[i, t]) - r)
                    for i, (t, r) in enumerate(zip(row["token_ids"], ref))
                ]
                worst_processed_gap = max(worst_processed_gap, max(gaps))
    with capsys.disabled():
        print(
            f"\nREPORT vllm sample logprobs ({call_index}): max |vllm - transformers| = {worst:.2e}"
        )
    assert worst < LOGPROB_TOL
    if call_index == 2:
        assert worst_processed_gap > 100 * LOGPROB_TOL, (
            "test must be able to tell raw from processed log-probs"
        )


@pytest.mark.slow
@needs_vllm_venv
def test_greedy_equals_transformers_greedy(vllm_run, hf, prompts):
    import torch

    tok, model = hf
    for prompt, row in zip(prompts, _output(vllm_run, 3)):
        _check_generation(row, tok, 16)
        ids = torch.tensor([tok(prompt, add_special_tokens=False)["input_ids"]])
        with torch.inference_mode():
            out = model.generate(
                ids, do_sample=False, max_new_tokens=16, pad_token_id=tok.pad_token_id
            )
        hf_ids = out[0, ids.shape[1] :].tolist()
        if tok.eos_token_id in hf_ids:
            hf_ids = hf_ids[: hf_ids.index(tok.eos_token_id) + 1]
        assert row["token_ids"] == hf_ids
        assert row["text"] == tok.decode(hf_ids, skip_special_tokens=True).strip()
        ref, _ = _raw_logprobs(hf, prompt, hf_ids)
        assert row["token_logprobs"] == pytest.approx(ref, abs=LOGPROB_TOL)
    # The corpus questions are answered: the greedy text is the trained answer.
    greedy_texts = [r["text"] for r in _output(vllm_run, 3)]
    assert greedy_texts[0] == "Paris"
    assert greedy_texts[2] == "Leonardo da Vinci"


@pytest.mark.slow
@needs_vllm_venv
def test_beam_contract_and_raw_logprobs(vllm_run, hf, prompts):
    greedy = _output(vllm_run, 3)
    for prompt, row, _greedy_row in zip(prompts, _output(vllm_run, 4), greedy):
        _check_generation(row, hf[0], 16)
        ref, _ = _raw_logprobs(hf, prompt, row["token_ids"])
        assert row["token_logprobs"] == pytest.approx(ref, abs=LOGPROB_TOL)
    # On a memorised question beam search and greedy agree (one dominant path).
    assert _output(vllm_run, 4)[0]["token_ids"] == greedy[0]["token_ids"]


@pytest.mark.slow
@needs_vllm_venv
def test_logprob_of_next_true_matches_transformers(vllm_run, hf, ptrue_prompts, prompts):
    import torch

    tok, model = hf
    (true_id,) = tok.encode("True", add_special_tokens=False)
    values = _output(vllm_run, 5)
    assert len(values) == len(ptrue_prompts) + len(prompts)
    for prompt, value in zip(ptrue_prompts + prompts, values):
        ids = torch.tensor([tok(prompt, add_special_tokens=False)["input_ids"]])
        with torch.inference_mode():
            ref = float(
                torch.log_softmax(model(input_ids=ids).logits[0, -1].float(), dim=-1)[true_id]
            )
        assert value == pytest.approx(ref, abs=LOGPROB_TOL)
    # The model was trained to call "Paris" True and "Rome" False for France.
    assert values[0] > math.log(0.5) > values[1]


@pytest.mark.slow
@needs_vllm_venv
def test_report_timings(vllm_run, hf, capsys):
    """Not a correctness check: prints engine start and the 20 x 20 x 20 throughput for the report."""
    bench = vllm_run["results"][6]
    rows = bench["output"]
    assert len(rows) == BENCH_PROMPTS and all(len(r) == BENCH_N for r in rows)
    for per_prompt in rows:
        for row in per_prompt:
            _check_generation(row, hf[0], BENCH_TOKENS)
    tokens = sum(len(r["token_ids"]) for per_prompt in rows for r in per_prompt)
    with capsys.disabled():
        print(
            f"\nREPORT vllm {vllm_run['versions']}: engine start {vllm_run['engine_start_seconds']:.1f} s, "
            f"worker wall {vllm_run['wall_seconds']:.1f} s; {BENCH_PROMPTS}x{BENCH_N} samples, <= {BENCH_TOKENS} tokens: "
            f"{tokens} tokens in {bench['seconds']:.2f} s = {tokens / bench['seconds']:.0f} tok/s"
        )


@pytest.mark.slow
@needs_vllm_venv
def test_packaged_smollm2_tokenizes_the_same_in_the_vllm_env(smollm2_conversion):
    # transformers 5 (vLLM's env) rebuilt the v1 folder's "LlamaTokenizer" as sentencepiece and
    # dropped whitespace ("a\n\nb" -> "ab"); the converted folder must read the same in both envs.
    from transformers import AutoTokenizer

    text = 'Answer:\n\n{"answer": "Paris", "p": 0.9}  done'
    folder = str(smollm2_conversion["target"])
    ours = AutoTokenizer.from_pretrained(folder)
    code = (
        "import json, sys; from transformers import AutoTokenizer; t = AutoTokenizer.from_pretrained(sys.argv[1]); "
        "ids = t.encode(sys.argv[2], add_special_tokens=False); "
        "print(json.dumps([ids, t.decode(ids), t.apply_chat_template([{'role': 'user', 'content': 'Hi'}], "
        "tokenize=False, add_generation_prompt=True)]))"
    )
    out = subprocess.run(
        [str(VLLM_PYTHON), "-c", code, folder, text], capture_output=True, text=True, check=True
    )
    ids, decoded, chat = json.loads(out.stdout.strip().splitlines()[-1])
    assert ids == ours.encode(text, add_special_tokens=False) and decoded == text
    assert chat == ours.apply_chat_template(
        [{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True
    )


# ------------------------------------------------------------------ fast, main env only


def test_main_env_imports_without_vllm():
    code = (
        "import sys, pipeline.generation, pipeline.generation.vllm_backend, pipeline.generation.vllm_worker; "
        "print('vllm' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT
    )
    assert out.stdout.strip() == "False"


def test_missing_vllm_gives_clear_error(tmp_path):
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is importable here; this checks the message in an env without it")
    from pipeline.generation import get_backend

    with pytest.raises(ImportError, match="setup_vllm_venv.sh"):
        get_backend("vllm", model_path=str(tmp_path))


def test_missing_model_folder_is_named(tmp_path):
    from pipeline.generation.vllm_backend import VllmBackend

    with pytest.raises(FileNotFoundError, match="no-such-model"):
        VllmBackend(tmp_path / "no-such-model")


def test_bad_engine_settings_are_rejected(tmp_path):
    from pipeline.generation.vllm_backend import VllmBackend

    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        VllmBackend(tmp_path, gpu_memory_utilization=1.5)
    with pytest.raises(ValueError, match="max_model_len"):
        VllmBackend(tmp_path, max_model_len=0)


def test_worker_without_vllm_python_says_how_to_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="setup_vllm_venv.sh"):
        run_vllm_worker({"model_path": str(tmp_path)}, [], python=tmp_path / "missing-python")
