"""Generation's small ops with fewer torch calls, for Llama-family models (`fuse_small_ops`).

A decode step of SmolLM2-135M runs ~60 torch ops per layer x 30 layers on tensors of one token
per row; outside the matmuls most of them are small elementwise ops whose dispatch and
temporaries cost more than their arithmetic. `fuse_small_ops(model)` replaces, per module
instance (the classes and other models are untouched), the forward of:

- `LlamaRMSNorm`: `torch.nn.functional.rms_norm` on the float32 input (ONE op for to-float, pow,
  mean, add eps, rsqrt, multiply), cast back, times the weight, in the input dtype, as
  transformers does. Bit-identical in float32 and bf16 (tested); the one-call
  `rms_norm(x, shape, weight)` in bf16 is NOT (it multiplies the weight before rounding:
  1 bf16 ulp off), so it is not used. CPU only: on a GPU the `rms_norm` kernel's reduction
  order is not checked against `mean`'s, so the module stays as it is there;
- `LlamaAttention`: q, k and v from one matmul over the concatenated projection weights, and
  the rotary embedding written with four ops instead of six per tensor (`_rotary`: the same
  float operations in the same order, `x1*c - x2*s` for transformers' `x1*c + (-x2)*s`, which
  is exact);
- `LlamaMLP`: gate and up from one matmul over the concatenated weights, `silu` in place, times
  up in place, then down.

Bit-identity: every output equals transformers' own, elementwise exactly, in float32 and bf16
(tests/generation/test_fused_ops.py, on the packaged SmolLM2's layers). The elementwise parts
are the same IEEE operations. The concatenated matmuls compute each output column over the same
inputs, but a BLAS may pick its blocking by the matrix shape, so they are used only where
`fuse_small_ops` finds them exact on this model and device (a check at fusion time, a few ms;
exact for SmolLM2's shapes with torch 2.13's CPU kernels; declined for the test suite's tiny
64-wide Llama's q/k/v, whose one-row matmul takes another kernel) and never on a GPU (cuBLAS picks kernels, split-K
among them, by shape).

Only under `torch.no_grad`/`inference_mode`: with autograd on, every fused module runs its own
class's forward (the in-place ops would break backward). A model spread by accelerate
(`hf_device_map`) is left alone: its hooks live on the modules' forward.

Speed: scripts/bench_generation.py prints sampling with and without fusion.
"""

from __future__ import annotations

import types
from typing import Any

# transformers' Llama classes whose forward is replaced (matched by class name and module, so
# a subclass or another architecture with other maths is never touched)
_LLAMA_MODULE = "transformers.models.llama.modeling_llama"
FUSED_ATTR = "_task_aware_fused"


def _is(module: Any, name: str) -> bool:
    cls = type(module)
    return cls.__name__ == name and cls.__module__ == _LLAMA_MODULE


def _class_forward(module: Any, *args: Any, **kwargs: Any) -> Any:
    return type(module).forward(module, *args, **kwargs)


# ----------------------------------------------------------------------------- RMSNorm
def _rms_norm_forward(self: Any, hidden_states: Any) -> Any:
    """LlamaRMSNorm.forward: weight * (x_f32 * rsqrt(mean(x_f32^2) + eps)).to(dtype)."""
    import torch

    if torch.is_grad_enabled():
        return _class_forward(self, hidden_states)
    dtype = hidden_states.dtype
    normed = torch.nn.functional.rms_norm(
        hidden_states.to(torch.float32), (hidden_states.shape[-1],), None, self.variance_epsilon
    )
    return self.weight * normed.to(dtype)


# ----------------------------------------------------------------------------- rotary
def _rotary(x: Any, cos: Any, sin: Any) -> Any:
    """transformers' `x * cos + rotate_half(x) * sin` with fewer ops and temporaries: the same
    products, rounded the same way, `a + (-b)` written `a - b` (exact)."""
    half = x.shape[-1] // 2
    out = x * cos
    out[..., :half] -= x[..., half:] * sin[..., :half]
    out[..., half:] += x[..., :half] * sin[..., half:]
    return out


def _qkv(self: Any, hidden_states: Any) -> tuple[Any, Any, Any]:
    """The attention's query, key and value projections: one matmul where fused, else three."""
    import torch

    qkv_weight = getattr(self, "_fused_qkv_weight", None)
    if qkv_weight is None:
        return self.q_proj(hidden_states), self.k_proj(hidden_states), self.v_proj(hidden_states)
    qkv = torch.nn.functional.linear(
        hidden_states, qkv_weight, getattr(self, "_fused_qkv_bias", None)
    )
    return qkv.split(self._fused_qkv_sizes, dim=-1)


def _attention_function(self: Any) -> Any:
    """The attention kernel the model's config names (transformers' registry; eager its own)."""
    from transformers.models.llama import modeling_llama

    if self.config._attn_implementation == "eager":
        return modeling_llama.eager_attention_forward
    return modeling_llama.ALL_ATTENTION_FUNCTIONS[self.config._attn_implementation]


def _attention_forward(
    self: Any,
    hidden_states: Any,
    position_embeddings: Any,
    attention_mask: Any,
    past_key_values: Any = None,
    cache_position: Any = None,
    **kwargs: Any,
) -> Any:
    """LlamaAttention.forward with one q/k/v matmul (where fused) and `_rotary`."""
    import torch

    if torch.is_grad_enabled():
        return _class_forward(
            self,
            hidden_states,
            position_embeddings,
            attention_mask,
            past_key_values=past_key_values,
            cache_position=cache_position,
            **kwargs,
        )
    input_shape = hidden_states.shape[:-1]
    hidden_shape = (*input_shape, -1, self.head_dim)
    query, key, value = _qkv(self, hidden_states)
    query_states = query.view(hidden_shape).transpose(1, 2)
    key_states = key.view(hidden_shape).transpose(1, 2)
    value_states = value.view(hidden_shape).transpose(1, 2)

    cos, sin = position_embeddings
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    query_states = _rotary(query_states, cos, sin)
    key_states = _rotary(key_states, cos, sin)

    if past_key_values is not None:
        cache_kwargs = {
            "sin": sin.squeeze(1),
            "cos": cos.squeeze(1),
            "cache_position": cache_position,
        }
        key_states, value_states = past_key_values.update(
            key_states, value_states, self.layer_idx, cache_kwargs
        )

    attn_output, attn_weights = _attention_function(self)(
        self,
        query_states,
        key_states,
        value_states,
        attention_mask,
        dropout=0.0 if not self.training else self.attention_dropout,
        scaling=self.scaling,
        **kwargs,
    )
    attn_output = attn_output.reshape(*input_shape, -1).contiguous()
    return self.o_proj(attn_output), attn_weights


# ----------------------------------------------------------------------------- MLP
def _mlp_forward(self: Any, x: Any) -> Any:
    """LlamaMLP.forward, down(silu(gate(x)) * up(x)), gate and up from one matmul (where
    fused), silu and the product in place."""
    import torch

    if torch.is_grad_enabled():
        return _class_forward(self, x)
    weight = getattr(self, "_fused_gate_up_weight", None)
    if weight is not None:
        both = torch.nn.functional.linear(x, weight, getattr(self, "_fused_gate_up_bias", None))
        gate, up = both.split(self.intermediate_size, dim=-1)
        hidden = torch.nn.functional.silu(gate)
    else:
        hidden = torch.nn.functional.silu(self.gate_proj(x), inplace=True)
        up = self.up_proj(x)
    return self.down_proj(hidden.mul_(up))


# ----------------------------------------------------------------------------- fusing
def _concat(linears: list[Any]) -> tuple[Any, Any]:
    import torch

    weight = torch.cat([lin.weight.detach() for lin in linears], dim=0)
    biases = [lin.bias for lin in linears]
    if all(b is None for b in biases):
        return weight, None
    if any(b is None for b in biases):
        raise ValueError("mixed biases")
    return weight, torch.cat([b.detach() for b in biases], dim=0)


def _matmul_concat_exact(
    linears: list[Any], weight: Any, bias: Any, verdicts: dict[tuple, bool]
) -> bool:
    """Whether one matmul over the concatenated weights gives every projection's output
    exactly, on this device and dtype, for decode-like (1 token per row) and prefill-like
    inputs. The kernels depend on shapes and dtype, not values: one check per kind of layer
    (`verdicts` keeps them)."""
    import torch

    first = linears[0].weight
    if first.device.type != "cpu":
        return False
    sizes = [lin.weight.shape[0] for lin in linears]
    key = (tuple(sizes), first.shape[1], first.dtype, bias is not None, torch.get_num_threads())
    if key not in verdicts:
        generator = torch.Generator().manual_seed(0)
        verdicts[key] = True
        with torch.no_grad():
            for shape in ((1, 1), (3, 1), (80, 1), (2, 9)):
                x = torch.randn(*shape, first.shape[1], generator=generator).to(first.dtype)
                parts = torch.nn.functional.linear(x, weight, bias).split(sizes, dim=-1)
                if not all(torch.equal(part, lin(x)) for part, lin in zip(parts, linears)):
                    verdicts[key] = False
                    break
    return verdicts[key]


def _share_storage(linears: list[Any], weight: Any, bias: Any) -> None:
    """Make each projection's parameters views of the concatenated tensors (no second copy of
    the weights in memory; the values are the same)."""
    import torch

    start = 0
    for lin in linears:
        rows = lin.weight.shape[0]
        lin.weight = torch.nn.Parameter(
            weight[start : start + rows], requires_grad=lin.weight.requires_grad
        )
        if bias is not None:
            lin.bias = torch.nn.Parameter(
                bias[start : start + rows], requires_grad=lin.bias.requires_grad
            )
        start += rows


def _fuse_linears(module: Any, linears: list[Any], name: str, verdicts: dict) -> bool:
    """Register `module._fused_<name>_weight` (and bias) where exact (see above)."""
    if f"_fused_{name}_weight" in module._buffers:
        return True
    try:
        weight, bias = _concat(linears)
    except ValueError:
        return False
    if not _matmul_concat_exact(linears, weight, bias, verdicts):
        return False
    _share_storage(linears, weight, bias)
    module.register_buffer(f"_fused_{name}_weight", weight, persistent=False)
    module.register_buffer(f"_fused_{name}_bias", bias, persistent=False)
    return True


def fuse_small_ops(model: Any, fuse_matmuls: bool = True) -> list[str]:
    """Replace the forward of `model`'s Llama RMSNorm, attention and MLP modules by the fused
    ones above (per instance; `unfuse_small_ops` undoes it). Returns what was fused ("rms_norm",
    "rotary", "qkv_matmul", "silu_gate", "gate_up_matmul"); [] for a model with no Llama
    modules, or one spread by accelerate. Idempotent."""
    if getattr(model, "hf_device_map", None):
        return []
    done: set[str] = set()
    verdicts: dict[tuple, bool] = {}
    config = getattr(model, "config", None)
    matmuls = (
        fuse_matmuls and getattr(model, "device", None) is not None and model.device.type == "cpu"
    )
    for module in model.modules():
        if getattr(module, FUSED_ATTR, False):
            done.update(getattr(module, "_task_aware_fused_kinds", ()))
            continue
        kinds: list[str] = []
        if _is(module, "LlamaRMSNorm"):
            if module.weight.device.type != "cpu":
                # identity measured with torch's CPU kernels only; a GPU's rms_norm kernel may
                # reduce in another order than its mean
                continue
            module.forward = types.MethodType(_rms_norm_forward, module)
            kinds = ["rms_norm"]
        elif _is(module, "LlamaAttention"):
            linears = [module.q_proj, module.k_proj, module.v_proj]
            if matmuls and _fuse_linears(module, linears, "qkv", verdicts):
                module._fused_qkv_sizes = [lin.weight.shape[0] for lin in linears]
            module.forward = types.MethodType(_attention_forward, module)
            kinds = ["rotary"] + (["qkv_matmul"] if "_fused_qkv_weight" in module._buffers else [])
        elif _is(module, "LlamaMLP"):
            act = getattr(getattr(module, "config", config), "hidden_act", None)
            if act not in ("silu", "swish"):
                continue
            if matmuls:
                _fuse_linears(module, [module.gate_proj, module.up_proj], "gate_up", verdicts)
            module.forward = types.MethodType(_mlp_forward, module)
            kinds = ["silu_gate"] + (
                ["gate_up_matmul"] if "_fused_gate_up_weight" in module._buffers else []
            )
        if kinds:
            setattr(module, FUSED_ATTR, True)
            module._task_aware_fused_kinds = tuple(kinds)
            done.update(kinds)
    order = ("rms_norm", "rotary", "qkv_matmul", "silu_gate", "gate_up_matmul")
    return [k for k in order if k in done]


def unfuse_small_ops(model: Any) -> None:
    """Give every module fused by `fuse_small_ops` its class's forward back (the projections'
    weights stay views of the concatenated tensors: the same values, the same memory)."""
    for module in model.modules():
        if getattr(module, FUSED_ATTR, False):
            del module.forward
            for name in (
                "_fused_qkv_weight",
                "_fused_qkv_bias",
                "_fused_gate_up_weight",
                "_fused_gate_up_bias",
            ):
                module._buffers.pop(name, None)
            delattr(module, FUSED_ATTR)
            del module._task_aware_fused_kinds


def is_fused(model: Any) -> bool:
    """Whether any module of `model` runs a fused forward."""
    return any(getattr(m, FUSED_ATTR, False) for m in model.modules())
