"""The generate stage for one cell: dataset -> chat prompts -> samples, decodes, P(True),
written in shards of prompts so a killed or preempted job resumes at the first unfinished shard.

Its cache key follows the data: the dataset's records and the rendered prompts (so two task
configs with the same prompts share one generation, and a changed template or data file makes
another), the model, the sampling and decoding settings and the backend's numerics.

Two paths, one set of shards:
- `backend=transformers` (CPU default): everything in this process with one backend.
- `backend=vllm` (the paper): a vLLM pass in the vLLM environment's interpreter
  (`pipeline.generation.vllm_pass`, its own process: vLLM needs transformers 5 and releases the
  GPU only when its process ends) writes samples, greedy, ancestral and P(True); then the
  decodes vLLM lacks or computes differently run through transformers in this process on the
  same GPUs, into shards of their own: contrastive search (not in vLLM) and beam search
  (`generation.beam_backend`, transformers by default: vLLM's beam score divides by a length
  that includes the prompt, and its step-by-step beam loop is slow). Prompts are chat-rendered
  once, here, for both passes.

`generation.ptrue_beam=true` (off by default and in the paper) adds a second P(True) pass once
every decode is written: P(True) asked about the beam decode's text, by the engine that asked
about the greedy one (this process; under vLLM a second vLLM pass), into shards of its own
(`ptrue_beam`, ptrue schema), merged into the `ptrue` artifact as `logprob_true_beam` and
`p_true_beam`. Where the beam text equals the greedy text the greedy value is taken as is (the
same prompt). Off, neither the generate key nor any artifact changes.
"""

from __future__ import annotations

import json
import logging
import math
import subprocess
import tempfile
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.artifacts.stage import MANIFEST_FIELDS, plain, stage
from pipeline.artifacts.store import ArtifactStore, canonical_json
from pipeline.data.loaders import recording_sources
from pipeline.generation import vllm_pass
from pipeline.generation.base import SamplingConfig, split_strategies
from pipeline.generation.cell import (
    REPO_ROOT,
    generation_backend,
    load_cell_dataset,
    model_revision,
    model_source,
    render_prompts,
    resolve_model_path,
    served,
    served_model_name,
    tensor_parallel_size,
    vllm_max_model_len,
    vllm_python,
)
from pipeline.generation.hf_backend import TransformersBackend
from pipeline.generation.ptrue import (
    BEAM_SETTING,
    BEAM_SHARDS,
    beam_answers,
    beam_setting_problems,
)
from pipeline.generation.runner import decode_records, generate_records, ptrue_of_answers
from pipeline.runtime.devices import cuda_device_count, resolve_device
from pipeline.runtime.errors import ConfigError
from pipeline.runtime.progress import progress
from pipeline.runtime.stopping import check_stop

if TYPE_CHECKING:  # the resolved cell (pipeline.config)
    from pipeline.config import Cell

log = logging.getLogger("pipeline")

SHARDED = vllm_pass.SHARDED  # the shard groups one generation pass writes
TRANSFORMERS_DECODES = (
    "decodes_transformers"  # shard group of the transformers pass (decodes schema)
)
PTRUE_BEAM = BEAM_SHARDS  # shard group of P(True) on the beam decode (ptrue schema)


@dataclass(frozen=True)
class Shard:
    index: int
    prompt_ids: list[str]
    prompts: list[str]
    questions: list[str]


_FINGERPRINTS: dict[str, str] = {}  # what the records and prompts are made from -> their hash


def data_fingerprint(cell: Cell) -> str:
    """sha256 of the cell's records and rendered prompts: what the generations depend on
    (computed once a process for the settings that make them)."""
    import hashlib

    model = plain(cell.model)
    model.pop("active_params_billions", None)  # the plan's estimate, not the data
    model.pop("hub_id", None)  # a name (backend=openai keys the name it asks for)
    made_of = {
        "dataset": plain(cell.dataset),
        "model": model,
        "prompt": cell.task.prompt,
        "reference": cell.task.reference,
        "cache_dir": cell.cache_dir,
    }
    if served(cell):  # its prompts are messages, not the model's chat template
        made_of["backend"] = {"name": cell.backend.name}
    memo = canonical_json(made_of)
    if memo not in _FINGERPRINTS:
        dataset = load_cell_dataset(cell)
        payload = canonical_json(
            {"records": dataset.to_dict("records"), "prompts": render_prompts(cell, dataset)}
        )
        if len(_FINGERPRINTS) >= 8:
            _FINGERPRINTS.pop(next(iter(_FINGERPRINTS)))
        _FINGERPRINTS[memo] = hashlib.sha256(payload.encode()).hexdigest()
    return _FINGERPRINTS[memo]


def generate_slice(cell: Cell) -> dict:
    backend = plain(cell.backend)
    for k in (
        "python",
        "device",
        "num_threads",
        "kv_cache_memory_bytes",
        "gpu_memory_utilization",
    ):  # memory and placement: not the samples' distribution
        backend.pop(k, None)
    # batch_size stays: in bf16 the batch's shape changes the matmuls' rounding and so the
    # samples (SmolLM2, 8 prompts x 20 samples: 91 of 160 equal between batch sizes 4 and 1),
    # so a resume with another batch size must not reuse shards made with this one. vLLM
    # schedules its own batches: only the transformers batch sizes are keyed.
    if cell.backend.name == "vllm":
        backend.pop("batch_size", None)
    for k in (
        "api_key_env",
        "max_concurrency",
        "timeout",
        "deadline",  # how the endpoint is
        "requests_per_minute",
        "max_response_bytes",
    ):  # reached, not what it says
        backend.pop(k, None)
    if not served(cell):  # the endpoint's settings: absent from other backends' keys (their
        for k in ("base_url", "served_model", "logprobs"):  # cached samples stay current)
            backend.pop(k, None)
    else:  # the name the server is asked for, however it was given
        backend["served_model"] = served_model_name(cell)
    model = plain(cell.model)
    for k in (
        "name",
        "hub_id",
        "gpus",
        "tensor_parallel_size",  # naming and placement,
        "active_params_billions",
    ):  # and the plan's time estimate
        model.pop(k, None)
    if model.get("revision") is None:  # null: the key of configs written before the setting
        model.pop("revision", None)
    if cell.backend.name == "vllm":  # sharding the model changes reduction order, so the bits
        backend["tensor_parallel_size"] = tensor_parallel_size(cell.model)
    generation = plain(cell.generation)
    generation.pop("shard_size", None)  # how the work is cut, not what it computes
    if not generation.get(BEAM_SETTING):  # off: the key of configs written before the setting
        generation.pop(BEAM_SETTING, None)
    return {
        "data": data_fingerprint(cell),
        "model": model,
        "backend": backend,
        "max_new_tokens": cell.dataset.max_new_tokens,
        "generation": generation,
    }


def ptrue_beam_on(cell: Cell) -> bool:
    """Whether the cell asks P(True) about the beam decode too (generation.ptrue_beam)."""
    return bool(getattr(cell.generation, BEAM_SETTING, False))


def ptrue_beam_problems(cell: Cell) -> list[str]:
    """What generation.ptrue_beam=true needs and the cell lacks (empty when off)."""
    if not ptrue_beam_on(cell):
        return []
    return beam_setting_problems(bool(cell.generation.ptrue), list(cell.generation.strategies))


def _shards(cell: Cell, dataset, prompts: list[str]) -> list[Shard]:
    size = max(1, int(cell.generation.shard_size))
    ids = [str(x) for x in dataset["prompt_id"]]
    # what P(True) asks about (generation.ptrue_asks): the model's input text, as lm-polygraph
    questions = (
        list(prompts)
        if cell.generation.ptrue_asks == "prompt"
        else [str(x) for x in dataset["question"]]
    )
    return [
        Shard(
            i,
            ids[i * size : (i + 1) * size],
            prompts[i * size : (i + 1) * size],
            questions[i * size : (i + 1) * size],
        )
        for i in range(math.ceil(len(prompts) / size))
    ]


def _sampling(cell: Cell):
    g = cell.generation
    return SamplingConfig(
        n=g.n_samples,
        temperature=cell.model.temperature,
        top_p=cell.model.top_p,
        top_k=cell.model.top_k,
        max_new_tokens=cell.dataset.max_new_tokens,
        seed=g.seed,
    )


def _todo(
    store: ArtifactStore, key: str, shards: list[Shard], groups: Sequence[str] = SHARDED
) -> list[Shard]:
    """The shards not yet complete: every group written, intact and over the shard's prompts
    (a killed job resumes at the first of them; a shard of another partition is redone). An
    incomplete shard's other groups are removed, so it is written again as one."""
    todo = [s for s in shards if not store.shard_complete(groups, key, s.index, s.prompt_ids)]
    for s in todo:  # P(True) on a beam decode about to be made again is asked again
        store.remove_shard(PTRUE_BEAM, key, s.index)
    if todo and len(todo) < len(shards):
        log.info(
            "[generate] resuming: %d of %d shards already written",
            len(shards) - len(todo),
            len(shards),
        )
    return todo


def _transformers_pass(
    cell: Cell, store: ArtifactStore, key: str, shards: list[Shard]
) -> str | None:
    """Every shard through the in-process backend; returns the hub commit its model loaded
    (None: a local or packaged model, an endpoint, or nothing left to do)."""
    g = cell.generation
    todo = _todo(store, key, shards)
    if not todo and not _ptrue_beam_todo(cell, store, key, shards):
        return None
    backend = generation_backend(cell)
    # one bar over the cell's prompts still to do (log lines when stderr is no terminal)
    with (
        progress(sum(len(s.prompts) for s in todo), f"generate ({cell.model.name})", unit="prompt")
        if todo
        else _NO_BAR as bar
    ):
        for shard in todo:
            frames = generate_records(
                backend,
                shard.prompts,
                shard.prompt_ids,
                _sampling(cell),
                strategies=tuple(g.strategies),
                beam_width=g.beam_width,
                contrastive_alpha=g.contrastive_alpha,
                contrastive_top_k=g.contrastive_top_k,
                ptrue=g.ptrue,
                questions=shard.questions,
                progress=bar,
            )
            for name, frame in zip(SHARDED, frames):
                store.write_shard(name, key, shard.index, frame, prompt_ids=shard.prompt_ids)
            log.info("[generate] shard %d/%d written", shard.index + 1, len(shards))
            check_stop()  # a swallowed stop ends the run at the next shard
    _ptrue_beam_pass(cell, store, key, shards, backend)
    return getattr(backend, "commit_hash", None)


_NO_BAR = nullcontext()


def _ptrue_beam_todo(
    cell: Cell, store: ArtifactStore, key: str, shards: list[Shard]
) -> list[Shard]:
    """The shards whose P(True) on the beam decode is still to ask ([] with ptrue_beam off)."""
    if not ptrue_beam_on(cell):
        return []
    return [s for s in shards if not store.has_shard(PTRUE_BEAM, key, s.index, s.prompt_ids)]


def _ptrue_beam_inputs(
    cell: Cell, store: ArtifactStore, key: str, shard: Shard
) -> tuple[list[str], dict[str, float]]:
    """(the beam decode's text per prompt of the shard, {prompt_id: greedy log p(True)} where
    the beam text is the greedy text), read from the shard's written decodes and P(True)."""
    import pandas as pd

    part = [(shard.index, shard.prompt_ids)]
    decodes = [store.read_shards("decodes", key, part)]
    if (
        cell.backend.name == "vllm"
        and split_strategies(cell.generation.strategies, cell.generation.beam_backend)[1]
    ):
        decodes.append(store.read_shards(TRANSFORMERS_DECODES, key, part, schema="decodes"))
    return beam_answers(
        pd.concat(decodes, ignore_index=True),
        store.read_shards("ptrue", key, part),
        shard.prompt_ids,
    )


def _ptrue_beam_pass(
    cell: Cell, store: ArtifactStore, key: str, shards: list[Shard], backend
) -> None:
    """P(True) about the beam decode of every shard that lacks it, with the in-process backend
    that asked about the greedy one."""
    todo = _ptrue_beam_todo(cell, store, key, shards)
    if not todo:
        return
    with progress(
        sum(len(s.prompts) for s in todo),
        f"P(True) of the beam decode ({cell.model.name})",
        unit="prompt",
    ) as bar:
        for shard in todo:
            answers, known = _ptrue_beam_inputs(cell, store, key, shard)
            frame = ptrue_of_answers(backend, shard.prompt_ids, shard.questions, answers, known)
            store.write_shard(
                PTRUE_BEAM, key, shard.index, frame, schema="ptrue", prompt_ids=shard.prompt_ids
            )
            bar.update(len(shard.prompts))
            check_stop()


def _vllm_ptrue_beam_pass(cell: Cell, store: ArtifactStore, key: str, shards: list[Shard]) -> None:
    """P(True) about the beam decode in a second vLLM pass (the engine that asked about the
    greedy decode), once the beam decodes of every shard are written."""
    todo = _ptrue_beam_todo(cell, store, key, shards)
    if not todo:
        return
    jobs = []
    for shard in todo:
        answers, known = _ptrue_beam_inputs(cell, store, key, shard)
        jobs.append({**vars(shard), "answers": answers, "known": known})
    log.info("[generate] P(True) of the beam decode: a second vLLM pass (%d shards)", len(todo))
    _run_vllm_job(
        cell,
        {
            "mode": vllm_pass.PTRUE_BEAM_MODE,
            "store": str(Path(store.root).resolve()),
            "key": key,
            "engine": _vllm_engine(cell),
            "shards": jobs,
        },
    )


def _vllm_pass(
    cell: Cell, store: ArtifactStore, key: str, shards: list[Shard], strategies: list[str]
) -> None:
    """Everything but contrastive search, in the vLLM env's interpreter (its own process)."""
    todo = _todo(store, key, shards)
    if not todo:
        return
    g = cell.generation
    job = {
        "store": str(Path(store.root).resolve()),
        "key": key,
        "engine": _vllm_engine(cell),
        "sampling": vars(_sampling(cell)),
        "strategies": strategies,
        "beam_width": g.beam_width,
        "ptrue": bool(g.ptrue),
        "shards": [vars(s) for s in todo],
    }
    log.info(
        "[generate] vLLM pass (%d shards, tensor parallel %d) in %s",
        len(todo),
        job["engine"]["tensor_parallel_size"],
        vllm_python(cell),
    )
    _run_vllm_job(cell, job)


def _vllm_engine(cell: Cell) -> dict[str, Any]:
    """The VllmBackend arguments of the cell (the job file's "engine")."""
    b, g = cell.backend, cell.generation
    model_path = resolve_model_path(cell.model.path, cell.cache_dir)
    return {
        "model_path": model_path,
        "dtype": cell.model.dtype,
        "max_model_len": vllm_max_model_len(cell, model_path),
        "gpu_memory_utilization": b.gpu_memory_utilization,
        "enable_prefix_caching": b.enable_prefix_caching,
        "seed": g.seed,
        "tensor_parallel_size": tensor_parallel_size(cell.model),
        "enforce_eager": bool(b.enforce_eager),
        "kv_cache_memory_bytes": b.kv_cache_memory_bytes,
        "trust_remote_code": bool(cell.model.trust_remote_code),
        "chat_template_kwargs": dict(cell.model.chat_template_kwargs),
        "name": f"vllm:{cell.model.name}",
        **({} if model_revision(cell) is None else {"revision": model_revision(cell)}),
    }


def _run_vllm_job(cell: Cell, job: dict[str, Any]) -> None:
    """`job` through pipeline.generation.vllm_pass in the vLLM env's interpreter."""
    python = vllm_python(cell)
    with tempfile.TemporaryDirectory(prefix="vllm-pass-") as tmp:
        path = Path(tmp) / "job.json"
        path.write_text(json.dumps(job), encoding="utf-8")
        cmd = [python, "-m", "pipeline.generation.vllm_pass", str(path)]
        # Output goes straight to this job's log; the pass writes shards, nothing else.
        done = subprocess.run(cmd, cwd=REPO_ROOT, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"the vLLM pass failed (exit {done.returncode}; its log is above). "
            "Shards written so far are kept: rerun the stage to resume."
        )


def _transformers_decodes_pass(
    cell: Cell, store: ArtifactStore, key: str, shards: list[Shard], strategies: list[str]
) -> None:
    """Contrastive (Su et al. 2022) and beam search through transformers, after the vLLM pass
    has released the GPUs; a model on several GPUs is spread over them (device_map=auto)."""

    todo = _todo(store, key, shards, (TRANSFORMERS_DECODES,)) if strategies else []
    if not todo:
        return
    device = resolve_device(cell.device)
    spread = device == "cuda" and cuda_device_count() > 1 and int(cell.model.gpus) > 1
    g = cell.generation
    backend = TransformersBackend(
        resolve_model_path(cell.model.path, cell.cache_dir),
        dtype=cell.model.dtype,
        device=device,
        device_map="auto" if spread else None,
        batch_size=g.transformers_batch_size,
        num_threads=cell.backend.num_threads,
        trust_remote_code=bool(cell.model.trust_remote_code),
        name=f"transformers:{cell.model.name}",
        revision=model_revision(cell),
    )
    log.info(
        "[generate] %s through transformers on %s (%d shards)",
        " and ".join(strategies),
        "all GPUs" if spread else device,
        len(todo),
    )
    with progress(
        sum(len(s.prompts) for s in todo),
        f"{' and '.join(strategies)} ({cell.model.name})",
        unit="prompt",
    ) as bar:
        for shard in todo:
            frame = decode_records(
                backend,
                shard.prompts,
                shard.prompt_ids,
                strategies,
                max_new_tokens=cell.dataset.max_new_tokens,
                beam_width=g.beam_width,
                alpha=g.contrastive_alpha,
                top_k=g.contrastive_top_k,
            )
            store.write_shard(
                TRANSFORMERS_DECODES,
                key,
                shard.index,
                frame,
                schema="decodes",
                prompt_ids=shard.prompt_ids,
            )
            bar.update(len(shard.prompts))
            check_stop()
    del backend


# v2: the packaged SmolLM2 under vLLM (transformers 5) had lost whitespace in tokenization.
@stage(
    "generate",
    inputs=(),
    outputs=("dataset", "samples", "decodes", "ptrue"),
    config=generate_slice,
    version=2,
    parts=("task.reference",),
)
def generate_cell(cell: Cell, store: ArtifactStore, key: str) -> dict[str, Any]:
    import pandas as pd

    problems = ptrue_beam_problems(cell)
    if problems:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems))
    with recording_sources() as sources:
        dataset = load_cell_dataset(cell)
    prompts = render_prompts(cell, dataset)
    shards = _shards(cell, dataset, prompts)
    strategies = list(dict.fromkeys(cell.generation.strategies))
    vllm_strategies, hf_strategies = split_strategies(
        cell.generation.strategies, cell.generation.beam_backend
    )
    loaded = None
    if cell.backend.name == "vllm":
        _vllm_pass(cell, store, key, shards, vllm_strategies)
        _transformers_decodes_pass(cell, store, key, shards, hf_strategies)
        _vllm_ptrue_beam_pass(cell, store, key, shards)
    else:
        loaded = _transformers_pass(cell, store, key, shards)
    parts = [(s.index, s.prompt_ids) for s in shards]
    out = {name: store.read_shards(name, key, parts) for name in SHARDED}
    if cell.backend.name == "vllm" and hf_strategies:
        decodes = pd.concat(
            [out["decodes"], store.read_shards(TRANSFORMERS_DECODES, key, parts, schema="decodes")],
            ignore_index=True,
        )
        order = {pid: i for i, pid in enumerate(dataset["prompt_id"])}
        rank = {s: i for i, s in enumerate(strategies)}
        out["decodes"] = (
            decodes.assign(_p=decodes["prompt_id"].map(order), _s=decodes["strategy"].map(rank))
            .sort_values(["_p", "_s"], kind="stable")
            .drop(columns=["_p", "_s"])
            .reset_index(drop=True)
        )
    if ptrue_beam_on(cell):
        out["ptrue"] = with_beam_ptrue(
            out["ptrue"], store.read_shards(PTRUE_BEAM, key, parts, schema="ptrue")
        )
    out["dataset"] = dataset
    out[MANIFEST_FIELDS] = {"revisions": revisions(cell, sources, loaded)}
    return out


def with_beam_ptrue(ptrue, beam):
    """The ptrue artifact with the beam decode's P(True) (`beam`, ptrue schema) as its columns
    logprob_true_beam and p_true_beam, by prompt."""
    lp = dict(zip(beam["prompt_id"].astype(str), beam["logprob_true"]))
    p = dict(zip(beam["prompt_id"].astype(str), beam["p_true"]))
    ids = ptrue["prompt_id"].astype(str)
    missing = [pid for pid in ids if pid not in lp]
    if missing:
        raise RuntimeError(f"generate: no P(True) of the beam decode for {missing[:3]}")
    return ptrue.assign(
        logprob_true_beam=ids.map(lp).astype("float64"), p_true_beam=ids.map(p).astype("float64")
    )


def revisions(cell: Cell, sources: list[dict], loaded: str | None = None) -> dict:
    """What the generate stage's manifests record of where its model and data came from:
    {"model": {"repo", "requested", "resolved"} or {"source": "bundled", ...}, "dataset": the
    loader's noted source (several: a list)}. Metadata only: not in the cache key."""
    dataset: Any = (
        (sources[0] if len(sources) == 1 else sources)
        if sources
        else {"source": "unrecorded", "dataset": cell.dataset.name}
    )
    return {"model": model_source(cell, loaded), "dataset": dataset}
