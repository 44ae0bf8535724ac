"""Sphere: the closed-form action against a random-candidate search, and hand examples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.latent import SphereSpace


def _unit(rng, n, d):
    x = rng.normal(size=(n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _sphere_risk_loop(a, latents, weights):
    a = np.asarray(a, float) / np.linalg.norm(a)
    total = sum(weights)
    return (
        sum(
            w * (1 - float(np.dot(np.asarray(lat, float) / np.linalg.norm(lat), a)))
            for lat, w in zip(latents, weights)
        )
        / total
    )


@pytest.mark.parametrize("seed", range(8))
def test_sphere_nothing_beats_closed_form(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 6))
    m = int(rng.integers(1, 15))
    # unnormalised inputs: the space must normalise them
    latents = list(_unit(rng, m, d) * rng.uniform(0.1, 5.0, size=(m, 1)))
    weights = None if seed % 2 else rng.random(m)
    w = [1.0] * m if weights is None else list(weights)
    res = SphereSpace().bayes(latents, weights)
    assert np.linalg.norm(res.action) == pytest.approx(1.0)
    assert res.risk == pytest.approx(_sphere_risk_loop(res.action, latents, w), abs=1e-12)
    cands = np.vstack(
        [_unit(rng, 3000, d), np.stack(latents), res.action + 0.01 * rng.normal(size=(500, d))]
    )
    cands /= np.linalg.norm(cands, axis=1, keepdims=True)  # 500 of them near the optimum
    unit = np.stack(latents) / np.linalg.norm(np.stack(latents), axis=1, keepdims=True)
    cand_risks = (np.asarray(w) @ (1.0 - unit @ cands.T)) / sum(w)
    assert res.risk <= cand_risks.min() + 1e-12
    assert _sphere_risk_loop(cands[int(np.argmin(cand_risks))], latents, w) >= res.risk - 1e-12


def test_sphere_hand_examples():
    res = SphereSpace().bayes([[1.0, 0.0], [0.0, 2.0]])
    np.testing.assert_allclose(res.action, [math.sqrt(0.5)] * 2)
    assert res.risk == pytest.approx(1 - math.sqrt(0.5), abs=1e-15)  # ||mu|| = sqrt(2)/2
    assert SphereSpace().distance([1, 0], [0, 3]) == pytest.approx(1.0)
    assert SphereSpace().distance([1, 0], [-2, 0]) == pytest.approx(2.0)


def test_sphere_zero_mean_is_risk_one_and_first_sample():
    res = SphereSpace().bayes([[0.0, 3.0], [0.0, -1.0]])
    assert res.risk == 1.0
    np.testing.assert_array_equal(res.action, [0.0, 1.0])
    # weighted: the first POSITIVE-weight sample is the documented action
    res = SphereSpace().bayes([[1.0, 0.0], [0.0, 1.0], [0.0, -1.0]], weights=[0, 1, 1])
    assert res.risk == 1.0
    np.testing.assert_array_equal(res.action, [0.0, 1.0])
