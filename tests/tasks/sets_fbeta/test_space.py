"""F-beta sets: the GFM action against brute force over all 2^K candidates, and hand examples."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.latent import FBetaSetSpace, SetSpace, get_space

from ..sets._brute import OCEANS, all_subsets, fbeta_risk, random_instance


@pytest.mark.parametrize("beta", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("seed", range(25))
def test_fbeta_gfm_equals_brute_force(beta, seed):
    rng = np.random.default_rng(1000 + seed)
    labels = list("abcdefgh")[: int(rng.integers(1, 9))]
    latents, weights = random_instance(rng, labels, max_m=12)
    w = [1.0] * len(latents) if weights is None else list(weights)
    risks = {c: fbeta_risk(c, latents, w, beta) for c in all_subsets(labels)}
    best = min(risks.values())
    space = FBetaSetSpace(beta=beta)
    res = space.bayes(latents, weights)
    assert res.risk == pytest.approx(best, abs=1e-12)
    assert risks[res.action] == pytest.approx(best, abs=1e-12)
    # nothing in l_Sample's candidate pool beats it
    assert res.risk <= space.sample_mbr(latents, weights).risk + 1e-12


def test_fbeta_oceans_example_exact():
    res = FBetaSetSpace(beta=1.0).bayes(OCEANS)
    assert res.action == frozenset({"Pacific", "Arctic"})
    # E[F1] = (14 * 1 + 3 * 0.8 + 3 * 2/3) / 20 = 0.92
    assert res.risk == pytest.approx(0.08, abs=1e-15)


def test_fbeta_empty_set_option_wins():
    latents = [frozenset()] * 3 + [frozenset({"a"}), frozenset({"b"})]
    res = FBetaSetSpace().bayes(latents)
    assert res.action == frozenset()
    assert res.risk == pytest.approx(0.4, abs=1e-15)  # F(empty, empty) = 1 for 3 of 5
    assert FBetaSetSpace().distance(frozenset(), frozenset()) == 0.0
    assert FBetaSetSpace().distance(frozenset({"a"}), frozenset()) == 1.0


def test_fbeta_recall_weighting_includes_minority_labels():
    latents = [frozenset("ab"), frozenset("ac"), frozenset("ad")]
    assert SetSpace().bayes(latents).action == frozenset("a")
    res = FBetaSetSpace(beta=2.0).bayes(latents)
    assert res.action == frozenset(
        "abcd"
    )  # F2({a,x}, {a,b,c,d}) = 5*2/(8+4) = 5/6 for every sample
    assert res.risk == pytest.approx(1 / 6, abs=1e-15)
    res_half = FBetaSetSpace(beta=0.5).bayes(latents)
    assert res_half.action == frozenset("a")  # precision-weighted: F0.5 = 1.25*1/(0.5+1) = 5/6
    assert res_half.risk == pytest.approx(1 / 6, abs=1e-15)


def test_fbeta_distance_is_asymmetric_for_beta_not_one():
    space = FBetaSetSpace(beta=2.0)
    truth, pred = frozenset("ab"), frozenset("a")
    assert space.distance(truth, pred) == pytest.approx(1 - 5 * 1 / (4 * 2 + 1))
    assert space.distance(pred, truth) == pytest.approx(1 - 5 * 1 / (4 * 1 + 2))


def test_fbeta_registry_kwargs():
    space = get_space("sets-fbeta", beta=2.0)
    assert isinstance(space, FBetaSetSpace) and space.beta == 2.0
