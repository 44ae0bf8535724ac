"""A KV cache that grows in place, for the backend's own decode loops.

transformers' `DynamicCache` appends a step with `torch.cat`, which copies the whole cache of
every layer at every step: on CPU, for 88 rows x 100 cached tokens of SmolLM2, about 400 MB per
step. `GrowingCache` keeps each layer's keys and values in a buffer with room for the tokens to
come (`spare_tokens`) and writes a step into its slot; what the attention sees is a view of the
filled part. Dropping finished rows (`batch_select_indices`) copies the live rows once.

Shared prompt (`GrowingCache.share_prefix`): the M rows of a prompt start from the same prompt,
so after its prefill the prompt's keys and values are kept ONCE per prompt and each row's
buffer holds only its own tokens (the last prompt token and what it generates). Attention
(`GrowingCache.attend`, called by the backend's CPU attention for one-token steps) reads each
prompt's part once for all its rows, as one matmul per prompt, instead of reading M copies:
a decode step's attention on CPU is bound by reading the KV cache (80 rows x 55 tokens of
SmolLM2: 7 MB per layer), and copying the prompt into every row (`batch_repeat_interleave`)
goes too. The softmax runs over the prompt's and the row's scores together, so it is the same
attention; only the order of the float sums differs from SDPA's (the outputs agree to ~1e-6
relative in float32; tests/generation/test_kv_cache.py checks against SDPA on the rows' full
keys and values).

Only full-attention layers: `supports(model)` says whether a model has nothing else (sliding
window or chunked layers keep transformers' own cache and `generate`).
"""

from __future__ import annotations

from typing import Any

from transformers.cache_utils import Cache, DynamicLayer


def supports(model: Any) -> bool:
    """True when every layer of `model` attends to the full context (no sliding window)."""
    config = model.config.get_text_config(decoder=True)
    if getattr(config, "sliding_window", None) or getattr(config, "attention_chunk_size", None):
        return False
    layer_types = getattr(config, "layer_types", None) or []
    return all(t == "full_attention" for t in layer_types)


class GrowingLayer(DynamicLayer):
    """One layer's keys and values, (rows, heads, tokens, dim), in a buffer with spare room."""

    def __init__(self, spare_tokens: int = 0) -> None:
        super().__init__()
        self.spare_tokens = int(spare_tokens)
        self._keys_buffer: Any = None
        self._values_buffer: Any = None
        self._length = 0
        # the prompts' keys and values, (prompts, heads, prompt tokens, dim), after share_prefix
        self.prefix_keys: Any = None
        self.prefix_values: Any = None

    def _reallocate(self, rows: Any | None, capacity: int) -> None:
        """New buffers of `capacity` tokens holding the filled part of `rows` (None: all)."""
        import torch

        old_k, old_v = self._keys_buffer, self._values_buffer
        if rows is not None:  # a model spread over GPUs keeps each layer on its own device
            rows = rows.to(old_k.device)
        if rows is not None and capacity == old_k.shape[2]:
            # one copy (index_select of whole rows, spare room included) instead of gathering
            # the filled part and writing it into a new buffer
            self._keys_buffer = old_k.index_select(0, rows)
            self._values_buffer = old_v.index_select(0, rows)
            self._expose()
            return
        n = old_k.shape[0] if rows is None else len(rows)
        shape = (n, old_k.shape[1], capacity, old_k.shape[3])
        new_k = torch.empty(shape, dtype=old_k.dtype, device=old_k.device)
        new_v = torch.empty(shape, dtype=old_v.dtype, device=old_v.device)
        filled = slice(0, self._length)
        new_k[:, :, filled] = old_k[:, :, filled] if rows is None else old_k[rows, :, filled]
        new_v[:, :, filled] = old_v[:, :, filled] if rows is None else old_v[rows, :, filled]
        self._keys_buffer, self._values_buffer = new_k, new_v
        self._expose()

    def _expose(self) -> None:
        self.keys = self._keys_buffer[:, :, : self._length]
        self.values = self._values_buffer[:, :, : self._length]

    def update(
        self, key_states: Any, value_states: Any, cache_kwargs: dict[str, Any] | None = None
    ) -> tuple[Any, Any]:
        import torch

        if not self.is_initialized:
            self.lazy_initialization(key_states)
        needed = self._length + key_states.shape[-2]
        if self._keys_buffer is None:
            shape = (*key_states.shape[:2], needed + self.spare_tokens, key_states.shape[3])
            self._keys_buffer = torch.empty(shape, dtype=key_states.dtype, device=key_states.device)
            self._values_buffer = torch.empty(
                shape, dtype=value_states.dtype, device=value_states.device
            )
        elif needed > self._keys_buffer.shape[2]:
            # out of room: grow by half again, so steps past the hint stay amortised O(1)
            self._reallocate(None, max(needed, self._keys_buffer.shape[2] * 3 // 2))
        self._keys_buffer[:, :, self._length : needed] = key_states
        self._values_buffer[:, :, self._length : needed] = value_states
        self._length = needed
        self._expose()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        if not self.is_initialized:
            return 0
        prefix = 0 if self.prefix_keys is None else self.prefix_keys.shape[2]
        return prefix + self._length

    def share_prefix(self, rows: int) -> None:
        """What is cached so far becomes the prompts' shared part; each prompt gets `rows`
        rows whose own buffers start empty, with room for `spare_tokens` + 1."""
        import torch

        if self.prefix_keys is not None:
            raise RuntimeError("share_prefix: this layer already shares a prefix")
        self.prefix_keys = self._keys_buffer[:, :, : self._length]
        self.prefix_values = self._values_buffer[:, :, : self._length]
        prompts, heads, _, dim = self._keys_buffer.shape
        shape = (prompts * rows, heads, self.spare_tokens + 1, dim)
        self._keys_buffer = torch.empty(
            shape, dtype=self.prefix_keys.dtype, device=self.prefix_keys.device
        )
        self._values_buffer = torch.empty_like(self._keys_buffer)
        self._length = 0
        self._expose()

    def crop(self, max_length: int) -> None:
        if self.prefix_keys is not None:
            raise NotImplementedError("crop: the cache shares its prompts")
        if max_length < 0:
            max_length = self._length - abs(max_length)
        if self.is_initialized and max_length < self._length:
            self._length = max(0, max_length)
            self._expose()

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.prefix_keys is not None:
            raise NotImplementedError("batch_repeat_interleave: the cache shares its prompts")
        if self.get_seq_length() > 0:
            import torch

            rows = torch.arange(self._keys_buffer.shape[0], device=self._keys_buffer.device)
            self._reallocate(rows.repeat_interleave(repeats), self._keys_buffer.shape[2])

    def batch_select_indices(self, indices: Any) -> None:
        if self._length > 0:
            self._reallocate(indices, self._keys_buffer.shape[2])

    def reorder_cache(self, beam_idx: Any) -> None:
        self.batch_select_indices(beam_idx)

    def keep_one_of_last(self, width: int, picks: Any) -> None:
        """Of the last `width` token slots, keep only slot `picks[row]` of each row (in place of
        the first): contrastive search appends its k candidates side by side and keeps the
        chosen one."""
        import torch

        if self.prefix_keys is not None:
            raise NotImplementedError("keep_one_of_last: the cache shares its prompts")
        start = self._length - width
        rows = torch.arange(self._keys_buffer.shape[0], device=self._keys_buffer.device)
        picks = picks.to(self._keys_buffer.device)
        for buffer in (self._keys_buffer, self._values_buffer):
            buffer[:, :, start] = buffer[rows, :, start + picks]
        self._length = start + 1
        self._expose()


class GrowingCache(Cache):
    """`Cache` of `GrowingLayer`s; `spare_tokens` is the room reserved for the decode steps."""

    def __init__(self, spare_tokens: int = 0) -> None:
        super().__init__(layer_class_to_replicate=lambda: GrowingLayer(spare_tokens))
        self.prompts = 0  # > 0 once the cache shares its prompts (share_prefix)
        self.rows_per_prompt = 0
        self._slots: Any = None  # slot (prompt * rows_per_prompt + j) of each live row
        self._all_live = True
        self._prefix_bias: Any = None  # 0 at a prompt's tokens, -inf at its left padding
        self.attended = 0  # calls of `attend`: the decode loop checks every layer made one

    def share_prefix(self, rows: int, prefix_mask: Any) -> None:
        """Keep the prompts cached so far once each, for `rows` rows per prompt (prompt i's rows
        are rows i * rows ... (i + 1) * rows - 1); `prefix_mask` (prompts, cached tokens) marks
        the prompt tokens (0: left padding). Then one-token steps attend through `attend`."""
        import torch

        for layer in self.layers:
            layer.share_prefix(rows)
        self.prompts, self.rows_per_prompt = int(prefix_mask.shape[0]), int(rows)
        self._slots = torch.arange(self.prompts * rows, device=prefix_mask.device)
        self._all_live = True
        bias = torch.zeros(prefix_mask.shape, dtype=torch.float32, device=prefix_mask.device)
        self._prefix_bias = bias.masked_fill(prefix_mask == 0, float("-inf"))[:, None, None, :]

    @property
    def shares_prefix(self) -> bool:
        return self.prompts > 0

    def batch_select_indices(self, indices: Any) -> None:
        super().batch_select_indices(indices)
        if self.shares_prefix:
            self._slots = self._slots[indices.to(self._slots.device)]
            self._all_live = len(self._slots) == self.prompts * self.rows_per_prompt

    def attend(
        self, layer_idx: int, query: Any, key: Any, value: Any, scaling: float | None = None
    ) -> Any:
        """Attention of one-token `query` (rows, heads, 1, dim) over each row's prompt (shared)
        and its own `key`/`value` (rows, kv heads, own tokens, dim); (rows, 1, heads, dim), as
        transformers' attention functions return. Grouped-query heads: head h reads kv head
        h // (heads / kv heads). Scores and softmax in float32 (float64 stays float64)."""
        import torch

        self.attended += 1
        layer = self.layers[layer_idx]
        n, heads, q_len, dim = query.shape
        if q_len != 1:
            raise ValueError(f"attend: one-token steps only (query has {q_len} tokens)")
        kv_heads = key.shape[1]
        group = heads // kv_heads
        prompts, per_prompt = self.prompts, self.rows_per_prompt
        slots = None if self._all_live else self._slots
        out_dtype = query.dtype
        work = torch.float64 if out_dtype == torch.float64 else torch.float32
        scale = dim**-0.5 if scaling is None else scaling
        q = query.reshape(n, kv_heads, group, dim).to(work)
        own_keys, own_values = key.to(work), value.to(work)
        prefix_keys, prefix_values = layer.prefix_keys.to(work), layer.prefix_values.to(work)
        prefix_len = prefix_keys.shape[2]

        def by_prompt(x: Any, width: int) -> Any:
            """(rows, kv, group, width) -> (prompts, kv, per_prompt * group, width), dead rows' slots 0."""
            if slots is not None:
                full = x.new_zeros(prompts * per_prompt, kv_heads, group, width)
                full[slots] = x
                x = full
            return (
                x.reshape(prompts, per_prompt, kv_heads, group, width)
                .transpose(1, 2)
                .reshape(prompts, kv_heads, per_prompt * group, width)
            )

        def by_row(x: Any, width: int) -> Any:
            """The inverse of `by_prompt`, live rows only."""
            x = (
                x.reshape(prompts, kv_heads, per_prompt, group, width)
                .transpose(1, 2)
                .reshape(prompts * per_prompt, kv_heads, group, width)
            )
            return x if slots is None else x[slots]

        prompt_scores = torch.matmul(by_prompt(q, dim), prefix_keys.transpose(-1, -2))
        prompt_scores = prompt_scores.mul_(scale).add_(self._prefix_bias.to(work))
        own_scores = torch.matmul(q, own_keys.transpose(-1, -2)).mul_(scale)
        probs = torch.softmax(
            torch.cat([by_row(prompt_scores, prefix_len), own_scores], dim=-1), dim=-1
        )
        out = torch.matmul(probs[..., prefix_len:], own_values)
        prompt_part = torch.matmul(by_prompt(probs[..., :prefix_len], prefix_len), prefix_values)
        out += by_row(prompt_part, dim)
        return out.reshape(n, 1, heads, dim).to(out_dtype)

    def keep_one_of_last(self, width: int, picks: Any) -> None:
        for layer in self.layers:
            layer.keep_one_of_last(width, picks)
