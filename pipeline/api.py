"""The practitioner's API, re-exported at the package root (heavy imports happen inside):

import pipeline
df = pipeline.score(records, task="sets")                 # responses you already sampled
df = pipeline.generate_and_score(prompts, task="sets", model="my-model",
                                 base_url="http://localhost:8000/v1")
pipeline.report(df, "report/")                             # riskiest prompts + two figures
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any


def _names_the_extra(func):
    """A ModuleNotFoundError of an optional library becomes the error naming the install extra
    that brings it (pipeline.runtime.extras), without the import's traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any):
        from pipeline.runtime.extras import naming_the_extra

        with naming_the_extra():
            return func(*args, **kwargs)

    return wrapper


@_names_the_extra
def _checked(task: Any, options: dict[str, Any], call: str) -> str:
    """The task, required (as --task is on the command line), and `options` checked against
    what `pipeline.scorer.run.score` takes: both before any work or request."""
    import inspect

    from pipeline.scorer.readers import ScoreInputError
    from pipeline.scorer.run import check_task, task_names
    from pipeline.scorer.run import score as score_data

    config_dirs = options.get("config_dirs", ())
    if task is None:
        raise ScoreInputError(
            f"{call}: task= is required, e.g. task='classes' (tasks: "
            f"{', '.join(task_names(config_dirs))})"
        )
    known = [n for n in inspect.signature(score_data).parameters if n not in ("input", "task")]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise TypeError(
            f"{call}: unknown option(s) {', '.join(unknown)}; the options are {', '.join(known)}"
        )
    return check_task(task, config_dirs, python=True)


def score(data: Any, task: str | None = None, **options: Any):
    """Task-aware Bayes answers and uncertainty for sampled responses: one row per prompt.

    `data`: a path (JSONL, parquet, lm-evaluation-harness samples file), a pandas DataFrame, a
    list of dicts (`responses`, optional `question`, `reference`, `logprobs`, `id`) or a list of
    lists of response strings. `task` (required): a task config (classes, sets, sets_fbeta,
    graphs, sphere, simplex, reals or your own). `options`: those of `pipeline.scorer.run.score`
    (mapper, out, overrides, work_dir, strict, answers, ...); `answers=` rates answers you
    already have (their risk and confidence under the samples). Returns the per-prompt
    DataFrame (docs/score.md); `pipeline.summaries(df)` gives the PRR / AUC summary.
    """
    from pipeline.scorer.run import score as score_data

    return score_data(data, _checked(task, options, "score"), **options)


def summaries(df: Any, **evaluation: Any):
    """(UQ summary, mean quality per method and metric) of a scored frame as DataFrames: PRR
    and concordance AUC of the Bayes risk and the latent entropy against the Bayes answer's
    quality, with bootstrap intervals; (None, None) without references. From the frame's
    columns: a slice, `pd.concat` of scored frames or a frame read back from parquet gets its
    own. `evaluation`: n_bootstrap, ci_alpha, seed, max_rejection, ties."""
    from pipeline.scorer.run import summaries as summaries_of

    return summaries_of(df, **evaluation)


@_names_the_extra
def report(df: Any, directory: Any, n: int = 10) -> dict:
    """Write why the answers were chosen and how far to trust them into `directory`:
    `riskiest.md` (the `n` riskiest prompts: question, Bayes answer and confidence, the latent
    distribution, how responses were read) and, with references, `risk_coverage.png` and
    `calibration.png` (pipeline.scorer.report). Returns name -> path."""
    from pipeline.scorer.report import write_report

    return write_report(df, directory, n=n)


@dataclass(frozen=True, eq=False)
class GenerateRequest:
    """One `generate_and_score` call's arguments (the keywords documented there): the one object
    its steps read. Made as given; the task and prompts are then checked and read once, before
    any request, and replaced by what they resolve to. `options` go on to `score`."""

    prompts: Any
    task: str | None
    model: str | None
    base_url: str | None
    n_samples: int
    references: Any
    ids: Any
    raw_prompts: bool
    system_prompt: str | None
    temperature: float | None
    top_p: float | None
    max_new_tokens: int
    seed: int | None
    api_key: str | None
    api_key_env: str
    max_concurrency: int
    requests_per_minute: float | None
    timeout: float
    max_retries: int
    deadline: float | None
    cache_dir: str | None
    batch_size: int | None
    options: dict[str, Any] = field(default_factory=dict)


# size: the documented API: the README and docs/design.md call it with these keywords, and its
# docstring is their reference; the body only builds the one GenerateRequest and hands it on
@_names_the_extra
def generate_and_score(
    prompts: Any,
    task: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    n_samples: int = 20,
    *,
    references: Any = None,
    ids: Any = None,
    raw_prompts: bool = False,
    system_prompt: str | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    max_new_tokens: int = 256,
    seed: int | None = None,
    api_key: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    max_concurrency: int = 16,
    requests_per_minute: float | None = None,
    timeout: float = 600.0,
    max_retries: int = 5,
    deadline: float | None = None,
    cache_dir: str | None = None,
    batch_size: int | None = None,
    **options: Any,
):
    """Sample `n_samples` responses per prompt and score them (`score`): the Bayes answer, its
    risk and confidence, and the latent distribution of each prompt.

    `prompts`: a string, a list of strings, a pandas Series (its index becomes the ids) or a
    DataFrame with a `question` (or `prompt`) column, whose `references` / `reference` and `id`
    columns are read when present.

    With `base_url`, the samples come from that OpenAI-compatible chat-completions endpoint
    (`vllm serve`, TGI, SGLang, a hosted API; the URL ends in /v1); `model` is the served name
    (checked against the server's /v1/models before the first request), the key comes from
    `api_key=` or $OPENAI_API_KEY (`api_key_env`; loopback servers need none). Requests of all
    prompts share one pool of `max_concurrency`, at most `requests_per_minute` when set, each
    with a `timeout` (seconds) and the whole call with a `deadline`; they are retried
    (`max_retries`) with backoff and cached on disk (`cache_dir`, default ~/.cache/task-aware/generate-openai) under
    the endpoint, model, messages and sampling settings; token log-probs are requested and their
    sums kept per sample. Settings left None (temperature, top_p, seed) are not sent: the server
    and the served model's generation config decide them, and a rerun is reproducible through
    the request cache (pass `seed=` for a server-side seed; 0.0 is sent as 0.0).
    Without `base_url`, `model` is a model config name (conf/model/, e.g. qwen3-4b), whose
    sampling settings then apply, or a local transformers folder or hub id; default: the packaged
    SmolLM2-135M-Instruct (seed None = 0 in process).

    The task's prompt template (pipeline/tasks/<task>/task.yaml `prompt`) wraps each prompt unless
    `raw_prompts=True`; `system_prompt` is sent first as the system message. `references` (one
    per prompt) add quality, PRR and AUC. `options` go to `score` (mapper, overrides, out, ...).
    The generations are in `df.attrs["generations"]`. `await agenerate_and_score(...)` is the
    same call for async code.
    """
    request = GenerateRequest(
        prompts=prompts,
        task=task,
        model=model,
        base_url=base_url,
        n_samples=n_samples,
        references=references,
        ids=ids,
        raw_prompts=raw_prompts,
        system_prompt=system_prompt,
        temperature=temperature,
        top_p=top_p,
        max_new_tokens=max_new_tokens,
        seed=seed,
        api_key=api_key,
        api_key_env=api_key_env,
        max_concurrency=max_concurrency,
        requests_per_minute=requests_per_minute,
        timeout=timeout,
        max_retries=max_retries,
        deadline=deadline,
        cache_dir=cache_dir,
        batch_size=batch_size,
        options=options,
    )
    return _generate_and_score(request)


def _generate_and_score(request: GenerateRequest):
    """`generate_and_score`: the task, options and prompts checked before any request, the
    backend made, each prompt sampled, the samples scored."""
    import dataclasses
    import json

    from pipeline.scorer.run import compose_cell

    task = _checked(request.task, request.options, "generate_and_score")  # before any request
    prompts, references, ids = read_prompts(request.prompts, request.references, request.ids)
    request = dataclasses.replace(
        request, task=task, prompts=prompts, references=references, ids=ids
    )
    cell = compose_cell(
        task,
        request.options.get("mapper", "rule"),
        request.options.get("overrides", ()),
        config_dirs=request.options.get("config_dirs", ()),
    )
    backend, defaults = _backend(request, cell)
    rendered = _rendered_prompts(request, cell, backend)
    sampling = _sampling(request, defaults)
    records = _sample_records(request, _generations(backend, rendered, sampling))
    df = score(records, task, **request.options)
    df.attrs["generations"] = records
    # the settings sent ("server default": left to the server or the model's generation config)
    df["sampling"] = json.dumps(sampling_record(sampling, served=request.base_url is not None))
    return df


def _backend(request: GenerateRequest, cell: Any):
    """(the backend that samples: the endpoint at `base_url`, else a model in process; the
    model config's sampling settings, which apply where the call gives none)."""
    from pathlib import Path

    from pipeline.generation.base import get_backend

    cache_root = Path(request.cache_dir or Path(cell.cache_dir).expanduser())
    if request.base_url is None:
        if request.temperature == 0:
            raise ValueError(
                "temperature=0 is greedy decoding: in-process sampling needs "
                "temperature > 0 (or base_url= for a server that takes 0)"
            )
        return _local_backend(request.model, cell.cache_dir, request.batch_size)
    if not request.model:
        raise ValueError(
            "with base_url, model= must name the served model (as the server "
            "lists it under /v1/models)"
        )
    backend = get_backend(
        "openai",
        model=request.model,
        base_url=request.base_url,
        api_key=request.api_key,
        api_key_env=request.api_key_env,
        max_concurrency=request.max_concurrency,
        cache_dir=str(cache_root / "generate-openai"),
        batch_size=request.batch_size or 64,
        timeout=request.timeout,
        deadline=request.deadline,
        requests_per_minute=request.requests_per_minute,
        max_retries=request.max_retries,
        settings_prefix="",
    )
    return backend, {}


def _rendered_prompts(request: GenerateRequest, cell: Any, backend: Any) -> list:
    """Each prompt as the backend takes it: in the task's prompt template (unless
    raw_prompts), after the system prompt if one is given."""
    from pipeline.data.prompts import build_messages

    system = (
        []
        if request.system_prompt is None
        else [{"role": "system", "content": str(request.system_prompt)}]
    )
    messages = [
        system
        + (
            [{"role": "user", "content": p}]
            if request.raw_prompts
            else build_messages(cell.task.prompt, {"question": p}, written=True)
        )
        for p in request.prompts
    ]
    return [backend.render_chat(m) for m in messages]


def _sampling(request: GenerateRequest, defaults: dict[str, Any]):
    """The sampling settings: those the call gives, else the model config's (`defaults`), else
    none (the backend's own); in process, no seed is seed 0."""
    from pipeline.generation.base import SamplingConfig

    seed = request.seed
    if request.base_url is None and seed is None:
        seed = 0
    return SamplingConfig(
        n=request.n_samples,
        temperature=(
            request.temperature if request.temperature is not None else defaults.get("temperature")
        ),
        top_p=request.top_p if request.top_p is not None else defaults.get("top_p"),
        top_k=defaults.get("top_k"),
        max_new_tokens=request.max_new_tokens,
        seed=seed,
    )


def _generations(backend: Any, rendered: list, sampling: Any) -> list:
    """Each prompt's generations, sampled in the backend's batches."""
    from pipeline.clients.llm_client import LLMCallError

    chunk = max(1, int(getattr(backend, "batch_size", 8)))
    generations = []
    try:
        for start in range(0, len(rendered), chunk):
            generations += backend.sample(rendered[start : start + chunk], sampling)
    except LLMCallError as exc:  # one line for the user, not the event loop's frames
        raise type(exc)(str(exc)) from None
    return generations


def _sample_records(request: GenerateRequest, generations: list) -> list[dict[str, Any]]:
    """The rows `score` reads: each prompt's id, question, responses and finish reasons, its
    samples' log-probs where the backend gave them for every sample, its reference if any."""
    records = []
    ids, references = request.ids, request.references
    for i, (prompt, gens) in enumerate(zip(request.prompts, generations)):
        record = {
            "id": str(ids[i]) if ids is not None else str(i),
            "question": prompt,
            "responses": [g.text for g in gens],
            "finish_reasons": [g.finish_reason for g in gens],
        }
        if all(g.token_logprobs for g in gens):  # the server gave log-probs for every sample
            record["logprobs"] = [g.logprob for g in gens]
        if references is not None:
            record["reference"] = references[i]
        records.append(record)
    return records


def sampling_record(sampling: Any, served: bool) -> dict[str, Any]:
    """What a sample was drawn with: each setting sent, "server default" for those not sent
    (an endpoint), "model default" in process (transformers' generation config)."""
    default = "server default" if served else "model default"
    return {
        "n": sampling.n,
        **{
            name: default if getattr(sampling, name) is None else getattr(sampling, name)
            for name in ("temperature", "top_p", "top_k", "seed")
        },
        "max_tokens": sampling.max_new_tokens,
    }


async def agenerate_and_score(prompts: Any, task: str | None = None, **kwargs: Any):
    """`generate_and_score` for async code (`await pipeline.agenerate_and_score(...)`): the
    requests run on the endpoint client's own event loop and the mapping on a worker thread, so
    the caller's loop stays free; same arguments, same frame."""
    import asyncio

    return await asyncio.to_thread(generate_and_score, prompts, task, **kwargs)


def read_prompts(prompts: Any, references: Any = None, ids: Any = None):
    """(prompts as a list of strings, references, ids) from what `generate_and_score` accepts:
    a string, a list of strings, a pandas Series (index = ids) or a DataFrame (a `question` or
    `prompt` column; `references`/`reference` and `id` columns when present). Anything else is
    refused in one line."""
    kind = type(prompts).__name__
    module = type(prompts).__module__.split(".")[0]
    if isinstance(prompts, str):
        prompts = [prompts]
    elif module == "pandas" and kind == "DataFrame":
        frame = prompts
        column = next((c for c in ("question", "prompt") if c in frame.columns), None)
        if column is None:
            raise ValueError(
                f"prompts is a DataFrame without a 'question' or 'prompt' column "
                f"(its columns: {', '.join(map(str, frame.columns))}); rename the "
                "column holding the questions"
            )
        if references is None:
            ref_column = next((c for c in ("references", "reference") if c in frame.columns), None)
            references = None if ref_column is None else list(frame[ref_column])
        if ids is None and "id" in frame.columns:
            ids = list(frame["id"])
        prompts = list(frame[column])
    elif module == "pandas" and kind == "Series":
        if ids is None:
            ids = list(prompts.index)
        prompts = list(prompts)
    elif isinstance(prompts, dict) or not hasattr(prompts, "__iter__"):
        raise ValueError(
            f"prompts must be a string, a list of strings, a pandas Series or a "
            f"DataFrame with a 'question' column; got a {kind}"
        )
    else:
        prompts = list(prompts)
    if not prompts:
        raise ValueError("prompts is empty: give at least one question")
    bad = next((i for i, p in enumerate(prompts) if not isinstance(p, str)), None)
    if bad is not None:
        raise ValueError(
            f"prompts must be strings (one question each); item {bad} is a "
            f"{type(prompts[bad]).__name__}: {prompts[bad]!r:.80}"
        )
    for name, given in (("references", references), ("ids", ids)):
        if given is not None and len(given) != len(prompts):
            raise ValueError(f"{len(given)} {name} for {len(prompts)} prompts; give one each")
    if ids is not None and len(set(map(str, ids))) != len(ids):
        raise ValueError("ids must be unique (as strings): each names one prompt's row")
    return prompts, references, ids


def _local_backend(model: str | None, cache_dir: str, batch_size: int | None):
    """A transformers backend for a model config name, a local folder / hub id, or (None) the
    packaged SmolLM2; and the model config's sampling defaults."""
    from pipeline.generation.base import get_backend
    from pipeline.generation.cell import resolve_model_path
    from pipeline.runtime.devices import resolve_device
    from pipeline.runtime.extras import require
    from pipeline.runtime.resources import conf_dir

    require("torch", "transformers", needed_for="an in-process model (no base_url=)")
    defaults: dict[str, Any] = {}
    path, dtype, trust = model, "auto", False
    name = model or "smollm2-135m"
    config_file = conf_dir() / "model" / f"{name}.yaml"
    if config_file.is_file():
        from omegaconf import OmegaConf

        mc = OmegaConf.load(config_file)
        path, dtype = str(mc.path), str(mc.get("dtype", "bfloat16"))
        trust = bool(mc.get("trust_remote_code", False))
        defaults = {
            k: mc.get(k) for k in ("temperature", "top_p", "top_k") if mc.get(k) is not None
        }
    try:
        backend = get_backend(
            "transformers",
            model_path=resolve_model_path(path, cache_dir),
            dtype=dtype,
            device=resolve_device("auto"),
            batch_size=batch_size or 4,
            trust_remote_code=trust,
        )
    except OSError as exc:  # no such folder, not a hub id, or the hub out of reach
        raise ValueError(
            f"model={model!r}: {str(exc).splitlines()[0][:300]} (a conf/model name "
            "works too, or base_url= for a served model)"
        ) from None
    return backend, defaults
