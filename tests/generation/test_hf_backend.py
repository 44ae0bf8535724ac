"""TransformersBackend on a tiny random Llama (float32): log-probs, masking, seeding, decoding.

Independent references: log-probs are recomputed here with plain forward passes over each
unpadded sequence (no cache, no batching), never with the backend's own scorer.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.generation.base import SamplingConfig
from pipeline.generation.hf_backend import PerRowSampler, TransformersBackend, row_seed

MAX_NEW = 12


def reference_logprobs(
    backend: TransformersBackend, prompt: str, token_ids: list[int]
) -> list[float]:
    """log p(token_t | prompt, tokens_<t) from one forward pass over the unpadded sequence."""
    import torch

    prompt_ids = backend.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt_ids + token_ids])
    with torch.no_grad():
        logits = backend.model(input_ids=ids).logits[0].double()
    logp = torch.log_softmax(logits, dim=-1)
    start = len(prompt_ids)
    return [float(logp[start + t - 1, tok]) for t, tok in enumerate(token_ids)]


def reference_argmax(backend: TransformersBackend, prompt: str, token_ids: list[int]) -> list[int]:
    import torch

    prompt_ids = backend.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt_ids + token_ids])
    with torch.no_grad():
        logits = backend.model(input_ids=ids).logits[0]
    start = len(prompt_ids)
    return [int(logits[start + t - 1].argmax()) for t in range(len(token_ids))]


@pytest.fixture(scope="module")
def samples(tiny_backend, tiny_prompts):
    return tiny_backend.sample(tiny_prompts, SamplingConfig(n=6, max_new_tokens=MAX_NEW, seed=3))


def test_sample_shape_and_logprob_identity(samples, tiny_prompts) -> None:
    assert [len(s) for s in samples] == [6] * len(tiny_prompts)
    for gens in samples:
        for g in gens:
            assert len(g.token_logprobs) == len(g.token_ids) >= 1
            assert g.logprob == sum(g.token_logprobs)
            assert all(lp <= 0.0 for lp in g.token_logprobs)


def test_sample_token_logprobs_equal_teacher_forced_raw_logprobs(
    tiny_backend, samples, tiny_prompts
) -> None:
    # The samples were drawn at T=0.9/top-k 40/top-p 0.95, but log-probs must be the RAW ones.
    for prompt, gens in zip(tiny_prompts, samples):
        for g in gens:
            np.testing.assert_allclose(
                g.token_logprobs, reference_logprobs(tiny_backend, prompt, g.token_ids), atol=2e-5
            )


def test_masking_after_eos(tiny_backend, samples) -> None:
    eos = tiny_backend.tokenizer.eos_token_id
    stopped = truncated = 0
    for gens in samples:
        for g in gens:
            assert eos not in g.token_ids[:-1]  # nothing after the first EOS
            if g.token_ids[-1] == eos:
                stopped += 1
            else:
                assert len(g.token_ids) == MAX_NEW  # no EOS: ran to the limit
                truncated += 1
            assert "<|im_end|>" not in g.text and g.text == g.text.strip()
    assert stopped > 0 and truncated > 0  # the fixture model exercises both branches


def test_text_is_decoded_without_special_tokens(tiny_backend, samples) -> None:
    for gens in samples:
        for g in gens:
            assert (
                g.text
                == tiny_backend.tokenizer.decode(g.token_ids, skip_special_tokens=True).strip()
            )


def test_sampling_is_reproducible_and_independent_of_batching(
    tiny_backend, tiny_prompts, monkeypatch
) -> None:
    cfg = SamplingConfig(n=4, max_new_tokens=8, seed=11)
    ids = lambda results: [[g.token_ids for g in gens] for gens in results]
    base = ids(tiny_backend.sample(tiny_prompts, cfg))
    assert ids(tiny_backend.sample(tiny_prompts, cfg)) == base
    monkeypatch.setattr(tiny_backend, "batch_size", 1)
    assert ids(tiny_backend.sample(tiny_prompts, cfg)) == base
    monkeypatch.setattr(tiny_backend, "batch_size", 3)
    assert ids(tiny_backend.sample(tiny_prompts[::-1], cfg)) == base[::-1]
    assert ids(tiny_backend.sample(tiny_prompts[2:], cfg)) == base[2:]
    other = ids(tiny_backend.sample(tiny_prompts, SamplingConfig(n=4, max_new_tokens=8, seed=12)))
    assert other != base


def test_row_seed_is_stable_and_distinct() -> None:
    assert row_seed(0, "p", 0) == row_seed(0, "p", 0)
    assert len({row_seed(s, p, j) for s in (0, 1) for p in ("a", "b") for j in range(3)}) == 12
    assert 0 <= row_seed(5, "x", 7) < 2**63


def test_sampling_defaults_come_from_the_generation_config(tiny_backend) -> None:
    assert tiny_backend.resolve_sampling(SamplingConfig()) == (0.9, 40, 0.95)
    assert tiny_backend.resolve_sampling(SamplingConfig(temperature=0.3, top_k=0, top_p=0.5)) == (
        0.3,
        0,
        0.5,
    )


def test_top_k_one_sampling_is_greedy(tiny_backend, tiny_prompts) -> None:
    greedy = tiny_backend.greedy(tiny_prompts, MAX_NEW)
    sampled = tiny_backend.sample(
        tiny_prompts, SamplingConfig(n=3, top_k=1, max_new_tokens=MAX_NEW)
    )
    for g, gens in zip(greedy, sampled):
        assert all(s.token_ids == g.token_ids for s in gens)


def _expected_distribution(
    logits: np.ndarray, temperature: float, top_k: int, top_p: float
) -> np.ndarray:
    """Brute force: softmax(l/T), keep the k largest, then the smallest set with mass >= top_p."""
    z = logits / temperature
    keep = np.zeros_like(z, dtype=bool)
    keep[np.argsort(-z)[:top_k]] = True
    p = np.where(keep, np.exp(z - z[keep].max()), 0.0)
    p /= p.sum()
    order = np.argsort(-p)
    mass_before = np.cumsum(p[order]) - p[order]
    nucleus = order[mass_before < top_p]
    q = np.zeros_like(p)
    q[nucleus] = p[nucleus]
    return q / q.sum()


def test_per_row_sampler_draws_from_the_warped_distribution() -> None:
    import torch

    rng = np.random.default_rng(0)
    logits = rng.normal(size=12) * 2.0
    expected = _expected_distribution(logits, temperature=0.7, top_k=6, top_p=0.8)
    rows = 20000
    generators = [torch.Generator().manual_seed(row_seed(1, "x", j)) for j in range(rows)]
    sampler = PerRowSampler(generators, temperature=0.7, top_k=6, top_p=0.8)
    scores = torch.tensor(logits, dtype=torch.float32).repeat(rows, 1)
    one_hot = sampler(torch.zeros((rows, 1), dtype=torch.long), scores)
    assert torch.isfinite(one_hot).sum(dim=1).eq(1).all()  # exactly one allowed token per row
    drawn = one_hot.argmax(dim=1).numpy()
    counts = np.bincount(drawn, minlength=12) / rows
    assert set(np.flatnonzero(counts)) == set(np.flatnonzero(expected))  # never outside top-k/top-p
    sigma = np.sqrt(expected * (1 - expected) / rows)
    assert np.all(np.abs(counts - expected) <= 5 * sigma + 1e-12)


def test_greedy_batched_equals_one_at_a_time_and_is_argmax(tiny_backend, tiny_prompts) -> None:
    batched = tiny_backend.greedy(tiny_prompts, MAX_NEW)
    for prompt, g in zip(tiny_prompts, batched):
        single = tiny_backend.greedy([prompt], MAX_NEW)[0]
        assert single.token_ids == g.token_ids
        np.testing.assert_allclose(single.token_logprobs, g.token_logprobs, atol=1e-5)
        assert g.token_ids == reference_argmax(tiny_backend, prompt, g.token_ids)
        np.testing.assert_allclose(
            g.token_logprobs, reference_logprobs(tiny_backend, prompt, g.token_ids), atol=2e-5
        )


def test_beam_logprobs_are_raw_and_match_transformers_beam_score(
    tiny_backend, tiny_prompts
) -> None:
    import torch

    beams = tiny_backend.beam(tiny_prompts, num_beams=3, max_new_tokens=MAX_NEW)
    for prompt, g in zip(tiny_prompts, beams):
        assert g.logprob == sum(g.token_logprobs)
        np.testing.assert_allclose(
            g.token_logprobs, reference_logprobs(tiny_backend, prompt, g.token_ids), atol=2e-5
        )
        # Independent path: transformers' own beam score is sum(log p) / length (length_penalty 1).
        enc = tiny_backend.tokenizer([prompt], return_tensors="pt", add_special_tokens=False)
        with torch.no_grad():
            out = tiny_backend.model.generate(
                input_ids=enc["input_ids"],
                attention_mask=enc["attention_mask"],
                num_beams=3,
                do_sample=False,
                length_penalty=1.0,
                max_new_tokens=MAX_NEW,
                output_scores=True,
                return_dict_in_generate=True,
                use_model_defaults=False,
                pad_token_id=tiny_backend.tokenizer.pad_token_id,
                eos_token_id=tiny_backend.tokenizer.eos_token_id,
            )
        assert (
            out.sequences[0, enc["input_ids"].shape[1] :].tolist()[: len(g.token_ids)]
            == g.token_ids
        )
        assert math.isclose(
            float(out.sequences_scores[0]) * len(g.token_ids), g.logprob, abs_tol=1e-4
        )


def test_logprob_of_next_is_the_softmax_of_the_next_token(tiny_backend, tiny_prompts) -> None:
    import torch

    token = "True"
    token_id = tiny_backend.single_token_id(token)
    got = tiny_backend.logprob_of_next(tiny_prompts, token)
    for prompt, lp in zip(tiny_prompts, got):
        ids = torch.tensor([tiny_backend.tokenizer(prompt, add_special_tokens=False)["input_ids"]])
        with torch.no_grad():
            probs = torch.softmax(tiny_backend.model(input_ids=ids).logits[0, -1].double(), dim=-1)
        assert 0.0 <= math.exp(lp) <= 1.0
        assert math.isclose(math.exp(lp), float(probs[token_id]), rel_tol=1e-4)


def test_logprob_of_next_rejects_multi_token_strings(tiny_backend, tiny_prompts) -> None:
    with pytest.raises(ValueError, match="needs a single token"):
        tiny_backend.logprob_of_next(tiny_prompts, "True or False? The answer")


def test_bad_inputs_raise_clear_errors(tiny_backend, tiny_model_dir, tmp_path) -> None:
    with pytest.raises(ValueError, match="empty list of prompts"):
        tiny_backend.greedy([], 4)
    with pytest.raises(ValueError, match="non-empty strings"):
        tiny_backend.greedy(["ok", ""], 4)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        TransformersBackend(tmp_path / "missing")
    with pytest.raises(ValueError, match="unknown dtype"):
        TransformersBackend(tiny_model_dir, dtype="bf17")
    with pytest.raises(ValueError, match="num_beams must be >= 1"):
        tiny_backend.beam(["x"], num_beams=0)


def test_render_chat_uses_the_template(tiny_backend) -> None:
    rendered = tiny_backend.render_chat([{"role": "user", "content": "Hi"}])
    assert rendered == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


def test_per_row_sampler_top_of_cdf_never_picks_a_removed_token(monkeypatch) -> None:
    import torch

    # u * total can round up to the top of the CDF; u = 1.0 forces that edge. The pick must be
    # the last token the warpers kept (index 1 under top-k 2), not the last vocabulary entry.
    monkeypatch.setattr(torch, "rand", lambda *a, **k: torch.ones(1, dtype=torch.float64))
    logits = torch.tensor([[3.0, 2.0, 1.0, -5.0, -6.0]])
    sampler = PerRowSampler([torch.Generator().manual_seed(0)], temperature=1.0, top_k=2, top_p=1.0)
    one_hot = sampler(torch.zeros((1, 1), dtype=torch.long), logits)
    assert int(one_hot.argmax()) == 1


def test_get_backend_builds_the_transformers_backend(tiny_model_dir) -> None:
    from pipeline.generation.base import GenerationBackend, get_backend

    backend = get_backend(
        "transformers", model_path=tiny_model_dir, dtype="float32", batch_size=1, num_threads=1
    )
    assert isinstance(backend, TransformersBackend) and isinstance(backend, GenerationBackend)
    assert backend.name == f"transformers:{tiny_model_dir.name}"


def test_greedy_and_extra_rows_ride_in_the_sampling_call(tiny_backend, tiny_prompts) -> None:
    """One generate call per batch gives the samples, the greedy decode and one extra sample
    (the runner's `ar`): the same tokens as the separate calls, whose greedy is `generate`'s
    own and whose one-sample call has no shared prefix."""
    import dataclasses

    cfg = SamplingConfig(n=3, max_new_tokens=8, seed=5)
    samples, greedy, extra = tiny_backend.sample_and_decode(
        tiny_prompts, cfg, greedy=True, extra_seed=99
    )
    assert [[g.token_ids for g in row] for row in samples] == [
        [g.token_ids for g in row] for row in tiny_backend.sample(tiny_prompts, cfg)
    ]
    assert [g.token_ids for g in greedy] == [
        g.token_ids for g in tiny_backend.greedy(tiny_prompts, 8)
    ]
    alone = tiny_backend.sample(tiny_prompts, dataclasses.replace(cfg, n=1, seed=99))
    assert [g.token_ids for g in extra] == [row[0].token_ids for row in alone]
    assert tiny_backend.sample_and_decode(tiny_prompts, cfg)[1:] == (None, None)


def test_cpu_attention_gives_transformers_sdpa_results_without_repeating_kv_heads(
    tiny_backend, tiny_prompts
) -> None:
    """The tiny Llama has 2 KV heads for 4 query heads, and the prompts differ in length (a
    padding mask): the grouped-query SDPA gives the logits of transformers' own SDPA."""
    import torch

    from pipeline.generation.hf_backend import CPU_ATTENTION, use_cpu_attention

    model = tiny_backend.model
    assert model.config._attn_implementation == CPU_ATTENTION
    enc = tiny_backend._encode(tiny_prompts)
    assert not bool(enc["attention_mask"].all())  # padded: the case transformers repeats heads
    with torch.inference_mode():
        ours = model(**enc).logits
        model.set_attn_implementation("sdpa")
        try:
            stock = model(**enc).logits
        finally:
            assert use_cpu_attention(model)
    mask = enc["attention_mask"].bool()
    torch.testing.assert_close(ours[mask], stock[mask], rtol=1e-5, atol=1e-5)


def test_own_decode_loop_equals_generate(tiny_backend, tiny_prompts, monkeypatch) -> None:
    """The backend's own loop (rows leave at their EOS, the cache grows in place) gives what
    transformers' `generate` gives over the same per-row sampler: same tokens, same raw
    log-probs up to float32 rounding; rows of one batch end at different steps here."""
    cfg = SamplingConfig(n=5, max_new_tokens=MAX_NEW, seed=21)
    assert tiny_backend._own_loop  # a plain Llama config: the own loop runs
    own = tiny_backend.sample_and_decode(tiny_prompts, cfg, greedy=True, extra_seed=4)
    monkeypatch.setattr(tiny_backend, "_own_loop", False)
    stock = tiny_backend.sample_and_decode(tiny_prompts, cfg, greedy=True, extra_seed=4)
    flat = lambda out: [g for row in out[0] for g in row] + out[1] + out[2]
    lengths = {len(g.token_ids) for g in flat(own)}
    assert len(lengths) > 1 and max(lengths) == MAX_NEW and min(lengths) < MAX_NEW
    for a, b in zip(flat(own), flat(stock), strict=True):
        assert a.token_ids == b.token_ids and a.text == b.text
        np.testing.assert_allclose(a.token_logprobs, b.token_logprobs, atol=2e-5)


def test_own_loop_shares_each_prompts_cache_with_the_same_samples(
    tiny_backend, tiny_prompts, monkeypatch
) -> None:
    """The own loop keeps each prompt's keys once for its rows (`GrowingCache.share_prefix`,
    attention through `attend`) and samples what the per-row copies sample: the same tokens,
    log-probs equal up to float32 rounding; rows end at different steps (rows leave)."""
    from pipeline.generation.kv_cache import GrowingCache

    calls = []
    real_attend = GrowingCache.attend

    def counted(self, *args, **kwargs):  # a spy: the real attention runs
        calls.append(args[0])
        return real_attend(self, *args, **kwargs)

    monkeypatch.setattr(GrowingCache, "attend", counted)
    cfg = SamplingConfig(n=5, max_new_tokens=MAX_NEW, seed=8)
    assert tiny_backend.share_prompt_cache
    shared = tiny_backend.sample_and_decode(tiny_prompts, cfg, greedy=True)
    n_layers = tiny_backend.model.config.num_hidden_layers
    assert len(calls) >= n_layers * MAX_NEW // 2 and set(calls) == set(range(n_layers))
    monkeypatch.setattr(tiny_backend, "share_prompt_cache", False)
    calls.clear()
    copied = tiny_backend.sample_and_decode(tiny_prompts, cfg, greedy=True)
    assert not calls
    flat = lambda out: [g for row in out[0] for g in row] + out[1]
    assert len({len(g.token_ids) for g in flat(shared)}) > 1
    for a, b in zip(flat(shared), flat(copied), strict=True):
        assert a.token_ids == b.token_ids
        np.testing.assert_allclose(a.token_logprobs, b.token_logprobs, atol=2e-5)


def test_a_model_that_drops_the_shared_cache_on_the_way_decodes_with_copies(
    tiny_model_dir, tiny_prompts, caplog
) -> None:
    """A model whose attention never gets the shared cache (its layers drop keyword arguments)
    would attend over the rows' own tokens only: the loop notices after one step, before any
    draw, and decodes with per-row copies: the samples of a backend that never shared."""
    cfg = SamplingConfig(n=3, max_new_tokens=MAX_NEW, seed=5)
    copied_backend = TransformersBackend(
        tiny_model_dir, dtype="float32", batch_size=2, num_threads=1
    )
    copied_backend.share_prompt_cache = False
    expected = copied_backend.sample(tiny_prompts, cfg)
    backend = TransformersBackend(tiny_model_dir, dtype="float32", batch_size=2, num_threads=1)
    for layer in backend.model.model.layers:
        forward = layer.self_attn.forward

        def dropping(*args, _forward=forward, **kwargs):
            kwargs.pop("shared_prompt_cache", None)
            return _forward(*args, **kwargs)

        layer.self_attn.forward = dropping
    with caplog.at_level("WARNING"):
        got = backend.sample(tiny_prompts, cfg)
    assert "does not pass the shared prompt cache" in caplog.text
    assert not backend.share_prompt_cache
    assert [[g.token_ids for g in row] for row in got] == [
        [g.token_ids for g in row] for row in expected
    ]


def test_a_generation_config_with_its_own_processors_keeps_generate(
    tiny_model_dir, tmp_path
) -> None:
    """A repetition penalty (or any processor `generate` would add) is not applied by the own
    loop, so such a model samples through `generate`."""
    import shutil

    model_dir = tmp_path / "penalised"
    shutil.copytree(tiny_model_dir, model_dir)
    config = model_dir / "generation_config.json"
    import json

    settings = json.loads(config.read_text()) if config.exists() else {}
    config.write_text(json.dumps({**settings, "repetition_penalty": 1.3}))
    assert not TransformersBackend(model_dir, dtype="float32")._own_loop
