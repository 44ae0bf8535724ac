"""The vLLM pass of the generate stage, run in the vLLM environment as its own process.

    <vllm python> -m pipeline.generation.vllm_pass JOB.json

The main environment (transformers 4.x, unbabel-comet) cannot import vLLM (transformers 5.x),
and a GPU held by a vLLM engine is only reliably free once that process exits; so the stage
writes a job file and starts this module with the vLLM env's interpreter. The job holds the
chat-rendered prompts (rendered once, in the main env, so every pass sees the same strings),
the sampling settings, the engine settings and where the shards go. This process builds ONE
engine and writes the `samples`, `decodes` and `ptrue` shards of every shard not already on
disk (`ptrue` last: it marks a shard complete), exactly as the in-process transformers path
does, so a killed job resumes at the first unfinished shard. It imports only the standard
library, pandas/pyarrow (through the store) and vLLM.

Job JSON: {"store": dir, "key": cache key, "engine": {VllmBackend kwargs}, "sampling":
{SamplingConfig fields}, "strategies": [...], "beam_width": int, "ptrue": bool,
"shards": [{"index": i, "prompt_ids": [...], "prompts": [...], "questions": [...]}]}

With "mode": "ptrue_beam" (generation.ptrue_beam=true, after every decode is written) the job
asks P(True) about given answers instead, and writes the `ptrue_beam` shards (ptrue schema):
{"mode": "ptrue_beam", "store", "key", "engine", "shards": [{"index", "prompt_ids", "questions",
"answers": [beam text per prompt], "known": {prompt_id: log p(True) taken as is}}]}.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("pipeline")

SHARDED = ("samples", "decodes", "ptrue")
PTRUE_BEAM_MODE = "ptrue_beam"  # the job of generation.ptrue_beam=true


def run_job(job: dict[str, Any]) -> int:
    """Write every missing shard of the job; returns the number of shards written."""
    from pipeline.artifacts.store import ArtifactStore
    from pipeline.generation.base import SamplingConfig
    from pipeline.generation.runner import generate_records

    store, key = ArtifactStore(Path(job["store"])), job["key"]
    if job.get("mode") == PTRUE_BEAM_MODE:
        return _run_ptrue_beam(job, store, key)
    todo = [
        s
        for s in job["shards"]
        if not store.shard_complete(SHARDED, key, int(s["index"]), s["prompt_ids"])
    ]
    if not todo:
        log.info("[generate] vLLM pass: all %d shards already written", len(job["shards"]))
        return 0
    from pipeline.generation.vllm_backend import VllmBackend

    started = time.perf_counter()
    backend = VllmBackend(**job["engine"])
    log.info(
        "[generate] vLLM pass: engine up in %.1f s, %d of %d shards to write",
        time.perf_counter() - started,
        len(todo),
        len(job["shards"]),
    )
    sampling = SamplingConfig(**job["sampling"])
    for shard in todo:
        frames = generate_records(
            backend,
            shard["prompts"],
            shard["prompt_ids"],
            sampling,
            strategies=tuple(job["strategies"]),
            beam_width=int(job["beam_width"]),
            ptrue=bool(job["ptrue"]),
            questions=shard["questions"],
            progress=False,
        )
        for name, frame in zip(SHARDED, frames):
            store.write_shard(name, key, int(shard["index"]), frame, prompt_ids=shard["prompt_ids"])
        log.info("[generate] vLLM pass: shard %d written", int(shard["index"]) + 1)
    return len(todo)


def _run_ptrue_beam(job: dict[str, Any], store: Any, key: str) -> int:
    """P(True) about each shard's answers (the beam decodes) -> `ptrue_beam` shards."""
    from pipeline.generation.ptrue import BEAM_SHARDS as PTRUE_BEAM
    from pipeline.generation.runner import ptrue_of_answers

    todo = [
        s
        for s in job["shards"]
        if not store.has_shard(PTRUE_BEAM, key, int(s["index"]), s["prompt_ids"])
    ]
    if not todo:
        return 0
    from pipeline.generation.vllm_backend import VllmBackend

    started = time.perf_counter()
    backend = VllmBackend(**job["engine"])
    log.info(
        "[generate] vLLM pass (P(True) of the beam decode): engine up in %.1f s, %d shards",
        time.perf_counter() - started,
        len(todo),
    )
    for shard in todo:
        frame = ptrue_of_answers(
            backend,
            shard["prompt_ids"],
            shard["questions"],
            shard["answers"],
            shard.get("known") or {},
        )
        store.write_shard(
            PTRUE_BEAM,
            key,
            int(shard["index"]),
            frame,
            schema="ptrue",
            prompt_ids=shard["prompt_ids"],
        )
    return len(todo)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m pipeline.generation.vllm_pass JOB.json", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=logging.INFO, format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"
    )
    run_job(json.loads(Path(args[0]).read_text(encoding="utf-8")))
    return 0


if __name__ == "__main__":  # vLLM's spawned engine process re-imports __main__: keep this guard
    sys.exit(main())
