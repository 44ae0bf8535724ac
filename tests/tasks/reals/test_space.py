"""Reals: the closed-form action (median, mean) against a candidate search, and hand examples."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.latent import RealSpace, get_space


@pytest.mark.parametrize("loss", ["l1", "l2"])
@pytest.mark.parametrize("seed", range(10))
def test_reals_nothing_beats_closed_form(loss, seed):
    rng = np.random.default_rng(200 + seed)
    m = int(rng.integers(1, 12))
    latents = list(np.round(rng.normal(size=m) * 10, int(rng.integers(0, 3))))
    weights = None if seed % 2 else rng.integers(0, 4, size=m).astype(float) + (np.arange(m) == 0)
    w = [1.0] * m if weights is None else list(weights)
    space = RealSpace(loss=loss)
    res = space.bayes(latents, weights)

    def loop(a):
        return sum(
            wi * (abs(x - a) if loss == "l1" else (x - a) ** 2) for x, wi in zip(latents, w)
        ) / sum(w)

    assert res.risk == pytest.approx(loop(res.action), abs=1e-9)
    lo, hi = min(latents) - 1, max(latents) + 1
    candidates = (
        list(np.linspace(lo, hi, 4000)) + latents + list(res.action + rng.normal(size=200) * 1e-3)
    )
    assert res.risk <= min(loop(c) for c in candidates) + 1e-9


def test_reals_hand_examples():
    assert RealSpace("l1").bayes([1, 2, 3, 10]) == get_space("reals").bayes([1.0, 2.0, 3.0, 10.0])
    res = RealSpace("l1").bayes([10, 1, 3, 2])
    assert (res.action, res.risk) == (2.0, 2.5)  # lower median of an even count
    res = RealSpace("l2").bayes([1, 2, 3, 10])
    assert (res.action, res.risk) == (4.0, 12.5)  # mean and (population) variance
    res = RealSpace("l1").bayes([1, 2, 3], weights=[1, 1, 2])  # cum weights 1, 2, 4: 2*2 >= 4
    assert (res.action, res.risk) == (2.0, 0.75)
    res = RealSpace("l1").bayes([1, 2, 3], weights=[1, 0.9, 2])
    assert res.action == 3.0
    assert RealSpace("l1").bayes([5.0] * 10, weights=[0.1] * 10).action == 5.0
    assert RealSpace("l1").bayes(list(range(10)), weights=[0.1] * 10).action == 4.0
    assert RealSpace("l2").distance(1, 4) == 9.0 and RealSpace("l1").distance(1, 4) == 3.0
