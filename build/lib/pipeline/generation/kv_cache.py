"""A KV cache that grows in place, for the backend's own decode loops.

transformers' `DynamicCache` appends a step with `torch.cat`, which copies the whole cache of
every layer at every step: on CPU, for 88 rows x 100 cached tokens of SmolLM2, about 400 MB per
step. `GrowingCache` keeps each layer's keys and values in a buffer with room for the tokens to
come (`spare_tokens`) and writes a step into its slot; what the attention sees is a view of the
filled part. Dropping finished rows (`batch_select_indices`) copies the live rows once.

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

    def _reallocate(self, rows: Any | None, capacity: int) -> None:
        """New buffers of `capacity` tokens holding the filled part of `rows` (None: all)."""
        import torch

        old_k, old_v = self._keys_buffer, self._values_buffer
        if rows is not None:  # a model spread over GPUs keeps each layer on its own device
            rows = rows.to(old_k.device)
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

    def update(self, key_states: Any, value_states: Any,
               cache_kwargs: dict[str, Any] | None = None) -> tuple[Any, Any]:
        import torch

        if not self.is_initialized:
            self.lazy_initialization(key_states)
        needed = self._length + key_states.shape[-2]
        if self._keys_buffer is None:
            shape = (*key_states.shape[:2], needed + self.spare_tokens, key_states.shape[3])
            self._keys_buffer = torch.empty(shape, dtype=key_states.dtype, device=key_states.device)
            self._values_buffer = torch.empty(shape, dtype=value_states.dtype,
                                              device=value_states.device)
        elif needed > self._keys_buffer.shape[2]:
            # out of room: grow by half again, so steps past the hint stay amortised O(1)
            self._reallocate(None, max(needed, self._keys_buffer.shape[2] * 3 // 2))
        self._keys_buffer[:, :, self._length : needed] = key_states
        self._values_buffer[:, :, self._length : needed] = value_states
        self._length = needed
        self._expose()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self._length if self.is_initialized else 0

    def crop(self, max_length: int) -> None:
        if max_length < 0:
            max_length = self._length - abs(max_length)
        if self.is_initialized and max_length < self._length:
            self._length = max(0, max_length)
            self._expose()

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.get_seq_length() > 0:
            import torch

            rows = torch.arange(self._keys_buffer.shape[0], device=self._keys_buffer.device)
            self._reallocate(rows.repeat_interleave(repeats), self._keys_buffer.shape[2])

    def batch_select_indices(self, indices: Any) -> None:
        if self.get_seq_length() > 0:
            self._reallocate(indices, self._keys_buffer.shape[2])

    def reorder_cache(self, beam_idx: Any) -> None:
        self.batch_select_indices(beam_idx)

    def keep_one_of_last(self, width: int, picks: Any) -> None:
        """Of the last `width` token slots, keep only slot `picks[row]` of each row (in place of
        the first): contrastive search appends its k candidates side by side and keeps the
        chosen one."""
        import torch

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

    def keep_one_of_last(self, width: int, picks: Any) -> None:
        for layer in self.layers:
            layer.keep_one_of_last(width, picks)
