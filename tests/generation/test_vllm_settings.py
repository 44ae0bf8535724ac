"""Settings the generate stage hands to vLLM, computed in the main env (fast, no vLLM)."""

from __future__ import annotations

import pytest

from pipeline.config import resolve_cell
from pipeline.generation.base import split_strategies
from pipeline.generation.cell import tensor_parallel_size, vllm_max_model_len


def _split(cfg):
    return split_strategies(cfg.generation.strategies, cfg.generation.beam_backend)


@pytest.fixture()
def cfg_of(compose_cfg):
    return lambda *o: compose_cfg("backend=vllm", *o)


@pytest.fixture()
def model_4k(tmp_path) -> str:
    from transformers import LlamaConfig

    LlamaConfig(
        max_position_embeddings=4096,
        hidden_size=64,
        num_attention_heads=1,
        num_hidden_layers=1,
        intermediate_size=64,
        vocab_size=32,
    ).save_pretrained(tmp_path)
    return str(tmp_path)


def test_max_model_len_is_capped_at_the_models_context(cfg_of, model_4k):
    # vLLM refuses max_model_len beyond the model's positions (seen in the rehearsal)
    assert vllm_max_model_len(resolve_cell(cfg_of("backend.max_model_len=8192")), model_4k) == 4096
    assert vllm_max_model_len(resolve_cell(cfg_of("backend.max_model_len=2048")), model_4k) == 2048
    assert vllm_max_model_len(resolve_cell(cfg_of("backend.max_model_len=null")), model_4k) == 4096


def test_tensor_parallel_follows_the_models_gpus_unless_set(cfg_of):
    assert tensor_parallel_size(cfg_of("model=qwen2.5-72b-instruct").model) == 4
    assert tensor_parallel_size(cfg_of("model=qwen3-30b-a3b").model) == 2
    assert tensor_parallel_size(cfg_of("model=qwen3-4b").model) == 1
    assert tensor_parallel_size(cfg_of("model=smollm2-135m").model) == 1  # 0 GPUs: one rank
    assert (
        tensor_parallel_size(
            cfg_of("model=qwen2.5-72b-instruct", "model.tensor_parallel_size=8").model
        )
        == 8
    )


def test_decodes_vllm_lacks_or_scores_differently_run_through_transformers(cfg_of):
    assert _split(cfg_of()) == (["greedy", "ar"], ["beam", "contrastive"])
    assert _split(cfg_of("generation.beam_backend=vllm")) == (
        ["greedy", "beam", "ar"],
        ["contrastive"],
    )
    assert _split(cfg_of("generation.strategies=[greedy]")) == (["greedy"], [])
