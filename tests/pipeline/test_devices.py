"""device: auto puts every auxiliary model on the GPU when one is visible.

No GPU exists on this machine: the GPU case patches torch's CUDA probes (the one thing mocked,
because it cannot exist here) and checks the device each factory hands to its model; the CPU
case runs for real."""

from __future__ import annotations

from functools import partial

import pytest

from pipeline.aux_models import factories as aux_models
from pipeline.config import metric_config, resolve_cell
from pipeline.runtime.devices import (
    comet_gpus,
    configure_torch_threads,
    cpu_threads,
    resolve_device,
)
from pipeline.tasks.contract import METRICS, MetricContext


@pytest.fixture()
def cfg_of(compose_cfg):
    return compose_cfg


@pytest.fixture()
def fake_gpu(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    aux_models._embedder.cache_clear()
    aux_models._nli.cache_clear()
    yield
    aux_models._embedder.cache_clear()
    aux_models._nli.cache_clear()


def test_auto_is_the_cpu_here_and_explicit_devices_pass_through():
    assert resolve_device("auto") == resolve_device(None) == "cpu"
    assert resolve_device("cuda:1") == "cuda:1" and resolve_device("cpu") == "cpu"
    assert comet_gpus("cpu") == 0 and comet_gpus("cuda:0") == 1


def test_every_auxiliary_model_goes_to_the_gpu_when_one_is_visible(fake_gpu, cfg_of, tmp_path):
    assert resolve_device("auto") == "cuda"
    cfg = cfg_of(
        "experiment=paper",
        "dataset=cnn_dm",
        f"cache_dir={tmp_path}",
        "metrics.alignscore.ckpt=/x.ckpt",
        "task.metrics=[hamming,alignscore]",
    )
    nli = aux_models.build_equivalence(resolve_cell(cfg))
    assert nli.device == "cuda" and nli.batch_size == 64  # a GPU takes larger NLI batches
    assert nli.dtype == "float32"  # experiment=paper pins float32 (lm-polygraph's), GPU or not
    assert aux_models.build_embedder("minilm", device=resolve_cell(cfg).device).device == "cuda"
    # the evaluate stage's metric context carries cfg.device ("auto") to the text metrics
    context = MetricContext(cfg.device, cfg.cache_dir)
    alignscore = METRICS["alignscore"].scorer(metric_config(cfg, "alignscore"), context)
    assert alignscore.score.keywords["device"] == "cuda"
    cfg = cfg_of("experiment=paper", "dataset=wmt19_fien", "metrics.comet.model=/c")
    comet = METRICS["comet"].scorer(metric_config(cfg, "comet"), context)
    assert isinstance(comet.score, partial) and comet.score.keywords["gpus"] == 1


def test_the_nli_precision_follows_the_gpu_unless_pinned(fake_gpu, cfg_of, monkeypatch):
    import torch

    from pipeline.runtime.devices import resolve_dtype

    cfg = cfg_of("experiment=paper", "dataset=triviaqa", "task.equivalence.nli_dtype=auto")
    assert (
        aux_models.build_equivalence(resolve_cell(cfg)).dtype == "bfloat16"
    )  # the half-precision option
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert resolve_dtype("auto", "cuda") == "float16"  # a GPU without bfloat16 (V100, T4)
    assert resolve_dtype("auto", "cpu") == "float32"
    assert (
        aux_models.build_equivalence(
            resolve_cell(cfg_of("experiment=paper", "dataset=triviaqa"))
        ).dtype
        == "float32"
    )


def test_an_explicit_device_overrides_auto(fake_gpu, cfg_of):
    cfg = cfg_of("experiment=paper", "dataset=triviaqa", "device=cpu")
    assert aux_models.build_equivalence(resolve_cell(cfg)).device == "cpu"


def test_cpu_threads_follow_slurm_cpus_per_task(monkeypatch):
    import torch

    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    assert cpu_threads() == 1
    before = torch.get_num_threads()
    try:
        assert configure_torch_threads() == 1 and torch.get_num_threads() == 1
        assert configure_torch_threads(3) == 3 and torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)
    monkeypatch.delenv("SLURM_CPUS_PER_TASK")
    import os

    assert cpu_threads() == len(os.sched_getaffinity(0))


def test_a_forked_pool_freezes_this_process_objects_until_it_shuts_down():
    """Forked workers skip the parent's objects in their collections (gc.freeze before the
    fork); the parent's objects are collectable again once the pool is shut down, whichever
    way it is (shutdown(), a with-block)."""
    import gc

    from pipeline.runtime.devices import forked_pool

    pool = forked_pool(2)
    assert gc.get_freeze_count() > 0
    assert list(pool.map(abs, [-1, -2, -3])) == [1, 2, 3]
    pool.shutdown()
    assert gc.get_freeze_count() == 0
    with forked_pool(1) as pool:
        assert gc.get_freeze_count() > 0 and list(pool.map(abs, [-4])) == [4]
    assert gc.get_freeze_count() == 0
