"""Simplex: the closed-form action against a random-candidate search, and hand examples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.latent import SimplexSpace

from ._brute import kl, normalise


def _simplex_risk_loop(a, latents, weights):
    total = sum(weights)
    return sum(w * kl(normalise(lat), a) for lat, w in zip(latents, weights)) / total


def _random_dist(rng, labels):
    support = [lab for lab in labels if rng.random() < 0.7] or [labels[0]]
    p = rng.dirichlet(np.ones(len(support)))
    return {lab: float(v) * rng.uniform(0.5, 2.0) for lab, v in zip(support, p)}  # unnormalised


@pytest.mark.parametrize("seed", range(8))
def test_simplex_nothing_beats_closed_form(seed):
    rng = np.random.default_rng(100 + seed)
    labels = ["a", "b", "c", "d"][: int(rng.integers(2, 5))]
    m = int(rng.integers(1, 10))
    latents = [_random_dist(rng, labels) for _ in range(m)]
    weights = None if seed % 2 else rng.random(m) + 0.01
    w = [1.0] * m if weights is None else list(weights)
    res = SimplexSpace().bayes(latents, weights)
    assert sum(res.action.values()) == pytest.approx(1.0)
    assert res.risk == pytest.approx(_simplex_risk_loop(res.action, latents, w), abs=1e-12)
    candidates = [
        dict(zip(labels, rng.dirichlet(np.ones(len(labels)) * c)))
        for c in (0.3, 1, 5)
        for _ in range(1000)
    ]
    candidates += [normalise(lat) for lat in latents]
    mean = np.array([res.action.get(k, 0.0) for k in labels])
    for _ in range(300):  # small perturbations inside the simplex
        q = np.clip(mean + 0.01 * rng.normal(size=len(labels)), 1e-9, None)
        candidates.append(dict(zip(labels, q / q.sum())))
    # vectorised over candidates (all have full support on `labels`, so KL is finite)
    lat = np.array([[normalise(lat).get(k, 0.0) for k in labels] for lat in latents])
    cand = np.array([[c.get(k, 0.0) for k in labels] for c in candidates])
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(lat > 0, lat * np.log(np.where(lat > 0, lat, 1.0)), 0.0).sum(axis=1)
        cross = np.where(lat[:, None, :] > 0, lat[:, None, :] * np.log(cand[None, :, :]), 0.0).sum(
            axis=2
        )
    kl_mat = plogp[:, None] - cross  # (latents, candidates), inf where a sample's label is missing
    cand_risks = (np.asarray(w) @ kl_mat) / sum(w)
    assert res.risk <= cand_risks.min() + 1e-12
    best = candidates[int(np.argmin(cand_risks))]
    assert _simplex_risk_loop(best, latents, w) >= res.risk - 1e-12


def test_simplex_hand_examples_and_alignment():
    res = SimplexSpace().bayes(
        [{"a": 1.0}, {"a": 2.0, "b": 2.0}]
    )  # second renormalised to 1/2, 1/2
    assert res.action == pytest.approx({"a": 0.75, "b": 0.25})
    expected = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25)) - 0.5 * math.log(2)
    assert res.risk == pytest.approx(expected, abs=1e-15)
    res = SimplexSpace().bayes([{"sunny": 1.0}, {"rainy": 1.0}])
    assert res.action == {"rainy": 0.5, "sunny": 0.5}
    assert res.risk == pytest.approx(math.log(2), abs=1e-15)
    space = SimplexSpace()
    assert space.distance({"a": 1.0}, {"b": 1.0}) == math.inf  # a_k = 0 < l_k
    assert space.distance({"a": 1.0, "b": 0.0}, {"a": 0.5, "b": 0.5}) == pytest.approx(math.log(2))
    assert space.distance({"a": 0.5, "b": 0.5}, {"a": 1.0}) == math.inf
    # sample_mbr with disjoint supports: every sample has infinite risk, first is chosen
    mbr = space.sample_mbr([{"a": 1.0}, {"b": 1.0}])
    assert mbr.risk == math.inf and mbr.action == {"a": 1.0}


def test_simplex_risk_of_action_equals_closed_form():
    latents = [{"x": 0.2, "y": 0.8}, {"x": 0.6, "z": 0.4}, {"y": 1.0}]
    res = SimplexSpace().bayes(latents, weights=[1, 2, 3])
    assert SimplexSpace().risk(res.action, latents, weights=[1, 2, 3]) == pytest.approx(
        res.risk, abs=1e-12
    )
    assert SimplexSpace().risk({"x": 1.0}, latents) == math.inf
