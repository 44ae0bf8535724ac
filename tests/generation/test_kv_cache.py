"""kv_cache.GrowingCache: the shared-prompt layout against attention over each row's full keys.

Independent reference: for every live row, its prompt's keys/values (left padding dropped) and
its own tokens concatenated into one sequence and attended with torch's SDPA (grouped-query
heads expanded by hand), in float64; the cache's `attend` never sees that layout.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from pipeline.generation.kv_cache import GrowingCache

PROMPTS, ROWS, KV_HEADS, GROUP, DIM = 3, 4, 2, 3, 8
PROMPT_TOKENS = 6
PADDING = [0, 2, 5]  # left padding of each prompt (the last has one real prompt token)
OWN_TOKENS = 5


def _filled_cache(dtype, keep=None):
    """A cache after a prefill of the prompts, `OWN_TOKENS` one-token steps (rows dropped to
    `keep` before the last), and the references' inputs."""
    gen = torch.Generator().manual_seed(0)
    rand = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64)
    prompt_k, prompt_v = (rand(PROMPTS, KV_HEADS, PROMPT_TOKENS, DIM) for _ in range(2))
    own_k, own_v = (rand(PROMPTS * ROWS, KV_HEADS, OWN_TOKENS, DIM) for _ in range(2))
    mask = torch.ones(PROMPTS, PROMPT_TOKENS, dtype=torch.long)
    for p, pad in enumerate(PADDING):
        mask[p, :pad] = 0
    cache = GrowingCache(spare_tokens=OWN_TOKENS)
    cache.update(prompt_k.to(dtype), prompt_v.to(dtype), 0)
    cache.share_prefix(ROWS, mask)
    live = torch.arange(PROMPTS * ROWS)
    for t in range(OWN_TOKENS):
        if t == OWN_TOKENS - 1 and keep is not None:
            cache.batch_select_indices(torch.tensor(keep))
            live = live[torch.tensor(keep)]
        keys, values = cache.update(
            own_k[live, :, t : t + 1].to(dtype), own_v[live, :, t : t + 1].to(dtype), 0
        )
    query = rand(len(live), KV_HEADS * GROUP, 1, DIM)
    return cache, query, keys, values, (prompt_k, prompt_v, own_k, own_v, live)


def _reference(query, refs, scaling):
    """SDPA per live row over its prompt's real tokens + its own tokens, float64."""
    prompt_k, prompt_v, own_k, own_v, live = refs
    out = []
    for i, row in enumerate(live.tolist()):
        p, pad = row // ROWS, PADDING[row // ROWS]
        k = torch.cat([prompt_k[p, :, pad:], own_k[row]], dim=1).repeat_interleave(GROUP, dim=0)
        v = torch.cat([prompt_v[p, :, pad:], own_v[row]], dim=1).repeat_interleave(GROUP, dim=0)
        out.append(
            torch.nn.functional.scaled_dot_product_attention(
                query[i : i + 1], k[None], v[None], scale=scaling
            )
        )
    return torch.cat(out).transpose(1, 2)  # (rows, 1, heads, dim)


@pytest.mark.parametrize(
    "keep", [None, [0, 2, 3, 5, 9, 11], [7]], ids=["all rows", "ragged rows", "one row"]
)
def test_attend_equals_sdpa_over_each_rows_full_keys(keep) -> None:
    cache, query, keys, values, refs = _filled_cache(torch.float64, keep)
    scaling = 0.37
    ours = cache.attend(0, query, keys, values, scaling)
    assert ours.shape == (len(refs[-1]), 1, KV_HEADS * GROUP, DIM)
    torch.testing.assert_close(ours, _reference(query, refs, scaling), rtol=1e-12, atol=1e-12)
    assert cache.get_seq_length() == PROMPT_TOKENS + OWN_TOKENS


def test_attend_in_float32_and_bfloat16() -> None:
    for dtype, tol in ((torch.float32, 1e-6), (torch.bfloat16, 2e-2)):
        cache, query, keys, values, refs = _filled_cache(dtype, [1, 4, 5, 6, 10])
        ours = cache.attend(0, query.to(dtype), keys, values, None)
        assert ours.dtype == dtype
        torch.testing.assert_close(
            ours.double(), _reference(query, refs, DIM**-0.5), rtol=tol, atol=tol
        )


def test_a_shared_cache_refuses_what_it_cannot_do() -> None:
    cache, query, keys, values, _ = _filled_cache(torch.float32)
    with pytest.raises(ValueError, match="one-token"):
        cache.attend(0, torch.zeros(query.shape[0], query.shape[1], 2, DIM), keys, values)
    for call in (lambda: cache.crop(2), lambda: cache.batch_repeat_interleave(2)):
        with pytest.raises(NotImplementedError, match="shares its prompts"):
            call()


def test_row_selection_without_sharing_keeps_rows_and_room() -> None:
    """The plain layout's row selection (one index_select of whole rows, spare room kept)."""
    cache = GrowingCache(spare_tokens=3)
    keys = torch.arange(4 * 2 * 5 * 2, dtype=torch.float32).reshape(4, 2, 5, 2)
    cache.update(keys, -keys, 0)
    cache.batch_select_indices(torch.tensor([3, 1]))
    layer = cache.layers[0]
    assert torch.equal(layer.keys, keys[[3, 1]]) and torch.equal(layer.values, -keys[[3, 1]])
    assert layer._keys_buffer.shape[2] == 5 + 3
    step = torch.full((2, 2, 1, 2), 7.0)
    out_k, _ = cache.update(step, step, 0)
    assert torch.equal(out_k, torch.cat([keys[[3, 1]], step], dim=2))
