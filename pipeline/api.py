"""The practitioner's API, re-exported at the package root (heavy imports happen inside):

    import pipeline
    df = pipeline.score(records, task="sets")                 # responses you already sampled
    df = pipeline.generate_and_score(prompts, task="sets", model="my-model",
                                     base_url="http://localhost:8000/v1")
    pipeline.report(df, "report/")                             # riskiest prompts + two figures
"""

from __future__ import annotations

from typing import Any


def score(data: Any, task: str = "sets", **options: Any):
    """Task-aware Bayes answers and uncertainty for sampled responses: one row per prompt.

    `data`: a path (JSONL, parquet, lm-evaluation-harness samples file), a pandas DataFrame, a
    list of dicts (`responses`, optional `question`, `reference`, `logprobs`, `id`) or a list of
    lists of response strings. `task`: a task config (classes, sets, sets_fbeta, graphs, sphere,
    simplex, reals or your own). `options`: those of `pipeline.scoring.score` (mapper, out,
    overrides, work_dir, strict, ...). Returns the per-prompt DataFrame (docs/score.md); the
    summaries are in `.attrs`.
    """
    from pipeline.scoring import score as score_data

    return score_data(data, task, **options)


def report(df: Any, directory: Any, n: int = 10) -> dict:
    """Write why the answers were chosen and how far to trust them into `directory`:
    `riskiest.md` (the `n` riskiest prompts: question, Bayes answer and confidence, the latent
    distribution, how responses were read) and, with references, `risk_coverage.png` and
    `calibration.png` (pipeline.explain). Returns name -> path."""
    from pipeline.explain import write_report

    return write_report(df, directory, n=n)


def generate_and_score(prompts: Any, task: str = "sets", model: str | None = None,
                       base_url: str | None = None, n_samples: int = 20, *,
                       references: Any = None, ids: Any = None, raw_prompts: bool = False,
                       temperature: float | None = None, top_p: float | None = None,
                       max_new_tokens: int = 64, seed: int = 0, api_key: str | None = None,
                       api_key_env: str = "OPENAI_API_KEY", max_concurrency: int = 16,
                       cache_dir: str | None = None, batch_size: int | None = None,
                       **options: Any):
    """Sample `n_samples` responses per prompt and score them (`score`): the Bayes answer, its
    risk and confidence, and the latent distribution of each prompt.

    With `base_url`, the samples come from that OpenAI-compatible chat-completions endpoint
    (`vllm serve`, TGI, SGLang, a hosted API); `model` is the served name, the key comes from
    `api_key=` or $OPENAI_API_KEY (`api_key_env`; loopback servers need none). Requests of all
    prompts share one pool of `max_concurrency`, are retried with backoff and cached on disk
    (`cache_dir`, default ~/.cache/task-aware/generate-openai) under the endpoint, model, prompt,
    sampling settings and seed; token log-probs are requested and their sums kept per sample.
    Without `base_url`, `model` is a model config name (conf/model/, e.g. qwen3-4b) or a local
    transformers folder or hub id; default: the packaged SmolLM2-135M-Instruct.

    The task's prompt template (conf/task/<task>.yaml `prompt`) wraps each prompt unless
    `raw_prompts=True`. `references` (one per prompt) add quality, PRR and AUC. `temperature`,
    `top_p`: the sampling settings (default: the model config's, else 1.0 and none). `options`
    go to `score` (mapper, overrides, out, ...). The generations are in `df.attrs["generations"]`.
    """
    from pathlib import Path

    from pipeline.data.prompts import build_messages
    from pipeline.generation.base import SamplingConfig, get_backend
    from pipeline.scoring import compose_config

    prompts = [prompts] if isinstance(prompts, str) else list(prompts)
    if not prompts or not all(isinstance(p, str) for p in prompts):
        raise ValueError("prompts must be a non-empty list of strings (one question each)")
    for name, given in (("references", references), ("ids", ids)):
        if given is not None and len(given) != len(prompts):
            raise ValueError(f"{len(given)} {name} for {len(prompts)} prompts; give one each")
    cfg = compose_config(task, options.get("mapper", "rule"), options.get("overrides", ()),
                         config_dirs=options.get("config_dirs", ()))
    cache_root = Path(cache_dir or Path(cfg.cache_dir).expanduser())
    if base_url is not None:
        if not model:
            raise ValueError("with base_url, model= must name the served model (as the server "
                             "lists it under /v1/models)")
        backend = get_backend("openai", model=model, base_url=base_url, api_key=api_key,
                              api_key_env=api_key_env, max_concurrency=max_concurrency,
                              cache_dir=str(cache_root / "generate-openai"),
                              batch_size=batch_size or 64)
        defaults = {}
    else:
        backend, defaults = _local_backend(model, cfg, batch_size)
    messages = [[{"role": "user", "content": p}] if raw_prompts
                else build_messages(cfg.task.prompt, {"question": p}) for p in prompts]
    rendered = [backend.render_chat(m) for m in messages]
    sampling = SamplingConfig(n=n_samples, temperature=temperature or defaults.get("temperature"),
                              top_p=top_p or defaults.get("top_p"), top_k=defaults.get("top_k"),
                              max_new_tokens=max_new_tokens, seed=seed)
    chunk = max(1, int(getattr(backend, "batch_size", 8)))
    generations = []
    for start in range(0, len(rendered), chunk):
        generations += backend.sample(rendered[start:start + chunk], sampling)
    records = []
    for i, (prompt, gens) in enumerate(zip(prompts, generations)):
        record = {"id": str(ids[i]) if ids is not None else str(i), "question": prompt,
                  "responses": [g.text for g in gens]}
        if all(g.token_logprobs for g in gens):  # the server gave log-probs for every sample
            record["logprobs"] = [g.logprob for g in gens]
        if references is not None:
            record["reference"] = references[i]
        records.append(record)
    df = score(records, task, **options)
    df.attrs["generations"] = records
    return df


def _local_backend(model: str | None, cfg: Any, batch_size: int | None):
    """A transformers backend for a model config name, a local folder / hub id, or (None) the
    packaged SmolLM2; and the model config's sampling defaults."""
    from pipeline.devices import resolve_device
    from pipeline.generation.base import get_backend
    from pipeline.generation.cell import resolve_model_path
    from pipeline.resources import conf_dir

    defaults: dict[str, Any] = {}
    path, dtype, trust = model, "auto", False
    name = model or "smollm2-135m"
    config_file = conf_dir() / "model" / f"{name}.yaml"
    if config_file.is_file():
        from omegaconf import OmegaConf

        mc = OmegaConf.load(config_file)
        path, dtype = str(mc.path), str(mc.get("dtype", "bfloat16"))
        trust = bool(mc.get("trust_remote_code", False))
        defaults = {k: mc.get(k) for k in ("temperature", "top_p", "top_k") if mc.get(k) is not None}
    try:
        backend = get_backend("transformers", model_path=resolve_model_path(path, cfg.cache_dir),
                              dtype=dtype, device=resolve_device("auto"),
                              batch_size=batch_size or 4, trust_remote_code=trust)
    except OSError as exc:  # no such folder, not a hub id, or the hub out of reach
        raise ValueError(f"model={model!r}: {str(exc).splitlines()[0][:300]} (a conf/model name "
                         "works too, or base_url= for a served model)") from None
    return backend, defaults
