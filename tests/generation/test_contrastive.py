"""Contrastive search: the cached, batched loop against a no-cache reference of the paper's rule."""

from __future__ import annotations

import numpy as np
import pytest

MAX_NEW = 10


def reference_contrastive(
    model, prompt_ids: list[int], eos_id: int, alpha: float, k: int, max_new: int
):
    """Su et al. 2022, recomputing the full forward pass for the context and for every candidate."""
    import torch

    seq = list(prompt_ids)
    out_ids, out_lps = [], []
    with torch.no_grad():
        for _ in range(max_new):
            full = model(input_ids=torch.tensor([seq]), output_hidden_states=True)
            context = full.hidden_states[-1][
                0
            ].double()  # (T, d): every context token, prompt included
            logp = torch.log_softmax(full.logits[0, -1].double(), dim=-1)
            top_p, top_ids = logp.exp().topk(k)
            scores = []
            for prob, cand in zip(top_p.tolist(), top_ids.tolist()):
                h_v = model(
                    input_ids=torch.tensor([seq + [cand]]), output_hidden_states=True
                ).hidden_states[-1][0, -1]
                cos = torch.nn.functional.cosine_similarity(
                    h_v.double().unsqueeze(0), context, dim=-1
                )
                scores.append((1 - alpha) * prob - alpha * float(cos.max()))
            best = int(np.argmax(scores))
            token = int(top_ids[best])
            out_ids.append(token)
            out_lps.append(float(logp[token]))
            seq.append(token)
            if token == eos_id:
                break
    return out_ids, out_lps


@pytest.fixture(params=["side_by_side", "side_by_side_eager", "as_rows"])
def candidate_path(request, tiny_backend, monkeypatch):
    """The three ways the loop feeds a row's k candidates: side by side under a boolean mask
    (SDPA, the default here), side by side under an additive mask (eager attention), and as k
    rows on a repeated cache (models with sliding-window layers: `kv_cache.supports` False)."""
    from pipeline.generation import kv_cache

    model = tiny_backend.model
    before = model.config._attn_implementation
    if request.param == "side_by_side_eager":
        model.set_attn_implementation("eager")
    if request.param == "as_rows":
        monkeypatch.setattr(kv_cache, "supports", lambda model: False)
    yield request.param
    model.set_attn_implementation(before)


@pytest.mark.parametrize("alpha, k", [(0.6, 4), (0.9, 3)])
def test_cached_batched_contrastive_equals_reference(
    tiny_backend, tiny_prompts, alpha: float, k: int, candidate_path: str
) -> None:
    got = tiny_backend.contrastive(tiny_prompts, max_new_tokens=MAX_NEW, alpha=alpha, top_k=k)
    eos = tiny_backend.tokenizer.eos_token_id
    lengths = []
    for prompt, g in zip(tiny_prompts, got):
        prompt_ids = tiny_backend.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        ref_ids, ref_lps = reference_contrastive(
            tiny_backend.model, prompt_ids, eos, alpha, k, MAX_NEW
        )
        assert g.token_ids == ref_ids
        np.testing.assert_allclose(g.token_logprobs, ref_lps, atol=2e-5)
        assert g.logprob == sum(g.token_logprobs)
        lengths.append(len(ref_ids))
    assert max(lengths) >= 5  # long enough for the degeneration penalty to matter
    assert (
        len(set(map(len, (p for p in tiny_prompts)))) > 1
    )  # prompts differ in length: left padding exercised


def test_alpha_zero_is_greedy(tiny_backend, tiny_prompts) -> None:
    contrastive = tiny_backend.contrastive(tiny_prompts, max_new_tokens=MAX_NEW, alpha=0.0, top_k=4)
    greedy = tiny_backend.greedy(tiny_prompts, MAX_NEW)
    assert [c.token_ids for c in contrastive] == [g.token_ids for g in greedy]


def test_contrastive_differs_from_greedy_somewhere(tiny_backend, tiny_prompts) -> None:
    contrastive = tiny_backend.contrastive(tiny_prompts, max_new_tokens=MAX_NEW, alpha=0.9, top_k=4)
    greedy = tiny_backend.greedy(tiny_prompts, MAX_NEW)
    assert [c.token_ids for c in contrastive] != [g.token_ids for g in greedy]


@pytest.mark.parametrize(
    "kwargs, message", [({"alpha": 1.5}, "alpha must be in"), ({"top_k": 0}, "top_k must be >= 1")]
)
def test_contrastive_rejects_bad_settings(tiny_backend, tiny_prompts, kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        tiny_backend.contrastive(tiny_prompts, max_new_tokens=4, **kwargs)
