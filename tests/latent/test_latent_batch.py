"""`space.batch(prompts)`: a whole cell's Bayes actions, l_MAP, l_Sample and empirical risks in
padded array code must decide exactly what the one-prompt maths decides (an independent
implementation: the one-prompt paths are tested against brute force elsewhere), for every space,
with prompts of different sizes, empty sets, ties and actions naming labels no sample holds."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.latent import get_space
from pipeline.latent.base import LatentBatch, padded_chunks


def _set(rng, labels, p=0.5):
    return frozenset(x for x in labels if rng.random() < p)


def random_prompts(name: str, rng: np.random.Generator, n_prompts: int = 40):
    """(prompts' samples, one candidate action per prompt) for space `name`."""
    prompts, actions = [], []
    for p in range(n_prompts):
        m = int(rng.integers(1, 9))
        labels = [f"y{p}_{k}" for k in range(int(rng.integers(0, 6)))]
        if name in ("sets", "sets-fbeta"):
            samples = [_set(rng, labels) for _ in range(m)]
            action = _set(rng, labels + ["beyond", "other"])
        elif name == "graphs":
            samples = [
                frozenset((a, "r", b) for a, b in zip(labels, labels[1:]) if rng.random() < 0.5)
                for _ in range(m)
            ]
            action = frozenset({("z", "r", "a")}) | (
                samples[0] if rng.random() < 0.5 else frozenset()
            )
        elif name == "classes":
            samples = [f"c{int(rng.integers(0, 3))}" for _ in range(m)]
            action = f"c{int(rng.integers(0, 4))}"
        elif name == "sphere":
            base = rng.normal(size=(3, 5))
            samples = [
                base[int(rng.integers(0, 3))] + 0.01 * rng.normal(size=5) * (rng.random() < 0.5)
                for _ in range(m)
            ]
            action = rng.normal(size=5)
        elif name == "simplex":
            names = labels or ["only"]
            samples = []
            for _ in range(m):
                support = [x for x in names if rng.random() < 0.7] or names[:1]
                q = rng.dirichlet(np.ones(len(support)))
                samples.append(dict(zip(support, q.tolist())))
            action = samples[0] if rng.random() < 0.5 else {x: 1.0 for x in names + ["beyond"]}
        else:  # reals
            samples = [
                float(rng.integers(0, 5)) if rng.random() < 0.5 else float(rng.normal())
                for _ in range(m)
            ]
            action = float(rng.normal())
        if rng.random() < 0.2:
            samples = samples + samples[:1]  # a repeat: l_MAP has a clear winner
        prompts.append(samples)
        actions.append(None if rng.random() < 0.1 else action)
    return prompts, actions


SPACES = [
    ("sets", {}),
    ("sets-fbeta", {"beta": 1.0}),
    ("sets-fbeta", {"beta": 2.0}),
    ("graphs", {}),
    ("classes", {}),
    ("sphere", {}),
    ("simplex", {}),
    ("reals", {"loss": "l1"}),
    ("reals", {"loss": "l2"}),
]


def same_action(space, a, b) -> bool:
    """Equal sets, classes and samples; vectors, means and distributions within rounding."""
    if isinstance(a, np.ndarray):
        return np.allclose(a, b, rtol=0, atol=1e-12)
    if isinstance(a, float):
        return a == pytest.approx(b, rel=1e-12, abs=1e-12)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(abs(a[k] - b[k]) <= 1e-12 for k in a)
    return space.key(space.canonical(a)) == space.key(space.canonical(b))


@pytest.mark.parametrize("name,options", SPACES, ids=lambda v: str(v))
def test_a_batch_decides_what_the_one_prompt_maths_decides(name, options):
    space = get_space(name, **options)
    prompts, candidates = random_prompts(name, np.random.default_rng(7))
    batch = space.batch(prompts)
    assert type(batch) is not LatentBatch, f"{name} has no array form"
    actions, risks = batch.bayes()
    mbr_idx, mbr_risks = batch.sample_mbr()
    map_idx = batch.map()
    cand_risks = batch.risk(candidates)
    for p, samples in enumerate(prompts):
        one = space.bayes(samples)
        assert same_action(space, actions[p], one.action), (p, actions[p], one.action)
        assert risks[p] == pytest.approx(one.risk, rel=1e-12, abs=1e-12)
        mbr = space.sample_mbr(samples)
        assert same_action(space, batch.items[p][mbr_idx[p]], mbr.action)
        assert mbr_risks[p] == pytest.approx(mbr.risk, rel=1e-12, abs=1e-12)
        assert same_action(space, batch.items[p][map_idx[p]], space.map(samples))
        # every sample's risk as the action is its empirical risk
        for i, sample in enumerate(samples):
            assert batch.sample_risks()[p][i] == pytest.approx(
                space.risk(sample, samples), rel=1e-12, abs=1e-12
            )
        if candidates[p] is None:
            assert np.isnan(cand_risks[p])
        else:
            assert cand_risks[p] == pytest.approx(
                space.risk(candidates[p], samples), rel=1e-12, abs=1e-12
            )


@pytest.mark.parametrize("name,options", SPACES, ids=lambda v: str(v))
def test_chunking_does_not_change_a_batch(name, options, monkeypatch):
    """Prompts split into many padded chunks decide as one chunk does, bit for bit."""
    import pipeline.latent.base as base

    space = get_space(name, **options)
    prompts, candidates = random_prompts(name, np.random.default_rng(11), n_prompts=25)
    whole = space.batch(prompts)
    expected = (whole.bayes()[1], whole.sample_mbr(), whole.risk(candidates))
    monkeypatch.setattr(base, "CHUNK_CELLS", 8)  # every prompt its own chunk
    split = space.batch(prompts)
    np.testing.assert_array_equal(split.bayes()[1], expected[0])
    np.testing.assert_array_equal(split.sample_mbr()[0], expected[1][0])
    np.testing.assert_array_equal(split.sample_mbr()[1], expected[1][1])
    np.testing.assert_array_equal(split.risk(candidates), expected[2])


def test_padded_chunks_cover_every_prompt_once_within_the_budget():
    widths = np.array([3, 1, 50, 2, 2, 0, 7])
    chunks = padded_chunks(widths, 4, budget=60)
    covered = [p for sl, _ in chunks for p in range(sl.start, sl.stop)]
    assert covered == list(range(len(widths)))
    for sl, width in chunks:
        assert width == max(1, *widths[sl])
        assert (sl.stop - sl.start) * 4 * width <= 60 or sl.stop - sl.start == 1
    assert [(sl.start, sl.stop) for sl, _ in chunks] == [(0, 2), (2, 3), (3, 6), (6, 7)]


def test_hamming_risk_is_exact_whatever_the_padding():
    """Integer counts summed before one division: a prompt padded with empty labels and
    zero-weight samples keeps the bit-identical risk (3 of 10 samples hold y: 0.3, not 0.30000000000000004)."""
    space = get_space("sets")
    samples = [frozenset({"y"})] * 3 + [frozenset()] * 7
    wide = [frozenset({f"z{k}" for k in range(40)})] * 20
    assert space.batch([samples, wide]).bayes()[1][0] == 0.3 == space.bayes(samples).risk


@pytest.mark.parametrize("beta", [0.5, 1.0, 3.0])
def test_gfm_batch_equals_gfm_prompt_by_prompt(beta):
    """Padded prompts of 0-12 labels, with tied labels (identical columns) and empty samples:
    the batched GFM predicts what the one-prompt GFM predicts."""
    from pipeline.tasks.sets_fbeta.space import gfm, gfm_batch

    rng = np.random.default_rng(int(beta * 10))
    n_prompts, m, width = 60, 9, 12
    x = np.zeros((n_prompts, m, width), dtype=bool)
    w = np.zeros((n_prompts, m))
    widths = rng.integers(0, width + 1, n_prompts)
    sizes = rng.integers(1, m + 1, n_prompts)
    for p in range(n_prompts):
        k, n = int(widths[p]), int(sizes[p])
        x[p, :n, :k] = rng.random((n, k)) < rng.uniform(0.1, 0.9, k)
        if k >= 2 and rng.random() < 0.5:
            x[p, :n, 1] = x[p, :n, 0]  # two labels with one profile: a tie
        w[p, :n] = 1.0 / n
    masks = gfm_batch(x, w, widths, beta)
    for p in range(n_prompts):
        k, n = int(widths[p]), int(sizes[p])
        expected, _ = gfm(x[p, :n, :k], w[p, :n], beta)
        np.testing.assert_array_equal(masks[p, :k], expected)
        assert not masks[p, k:].any()


@pytest.mark.parametrize("name,options", SPACES, ids=lambda v: str(v))
def test_an_empty_batch_decides_nothing(name, options):
    batch = get_space(name, **options).batch([])
    actions, risks = batch.bayes()
    assert actions == [] and risks.shape == (0,)
    assert batch.map().shape == (0,) and batch.sample_mbr()[0].shape == (0,)
    assert batch.risk([]).shape == (0,)


def test_a_prompt_without_samples_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="latents is empty"):
        get_space("sets").batch([[frozenset({"a"})], []])
