"""Sets: the Hamming Bayes action against brute force over all 2^K candidates, and hand
examples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.latent import SetSpace

from ._brute import OCEANS, all_subsets, hamming_risk, random_instance


def test_hamming_oceans_example_exact():
    res = SetSpace().bayes(OCEANS)
    assert res.action == frozenset({"Pacific", "Arctic"})
    assert res.risk == pytest.approx(0.3, abs=1e-15)  # P(Atlantic)=3/20, P(Arctic)=17/20


def test_hamming_paper_two_responses_half_is_included():
    res = SetSpace().bayes([frozenset({"Pacific"}), frozenset({"Pacific", "Atlantic"})])
    assert res.action == frozenset({"Pacific", "Atlantic"})  # p = 1/2 -> included (>= 1/2)
    assert res.risk == 0.5


def test_hamming_risk_not_normalised_and_bounded_by_k_over_2():
    latents = [frozenset("abcd"), frozenset()]
    res = SetSpace().bayes(latents)
    assert res.risk == 2.0  # four labels at p = 1/2, each contributes 1/2
    assert SetSpace().distance(frozenset("ab"), frozenset("bc")) == 2.0


@pytest.mark.parametrize("seed", range(40))
def test_hamming_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    labels = list("abcdefg")[: int(rng.integers(1, 8))]
    latents, weights = random_instance(rng, labels)
    w = [1.0] * len(latents) if weights is None else list(weights)
    universe = labels + ["never-seen"]  # K <= 8
    risks = {c: hamming_risk(c, latents, w) for c in all_subsets(universe)}
    best = min(risks.values())
    res = SetSpace().bayes(latents, weights)
    assert res.risk == pytest.approx(best, abs=1e-12)
    assert risks[res.action] == pytest.approx(best, abs=1e-12)
    assert SetSpace().risk(res.action, latents, weights) == pytest.approx(best, abs=1e-12)


def test_hamming_bayes_never_worse_than_sample_mbr_or_map():
    space = SetSpace()
    res = space.bayes(OCEANS)
    assert res.risk <= space.sample_mbr(OCEANS).risk
    assert res.risk <= space.risk(space.map(OCEANS), OCEANS)
    assert math.isclose(space.risk(res.action, OCEANS), res.risk)
