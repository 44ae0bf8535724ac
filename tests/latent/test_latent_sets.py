"""Sets, F-beta sets and graphs: brute force over all 2^K candidates and hand examples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.latent import FBetaSetSpace, GraphSpace, SetSpace, get_space

from ._brute import all_subsets, fbeta_risk, hamming_risk

OCEANS = (
    [frozenset({"Pacific", "Arctic"})] * 14
    + [frozenset({"Atlantic", "Pacific", "Arctic"})] * 3
    + [frozenset({"Pacific"})] * 3
)


def random_instance(rng: np.random.Generator, labels: list, max_m: int = 10):
    m = int(rng.integers(1, max_m + 1))
    latents = []
    for _ in range(m):
        keep = rng.random(len(labels)) < rng.uniform(0.1, 0.9)
        latents.append(frozenset(lab for lab, k in zip(labels, keep) if k))
    kind = rng.integers(3)
    if kind == 0:
        weights = None
    elif kind == 1:
        weights = rng.integers(0, 4, size=m).astype(float)
        if weights.sum() == 0:
            weights[0] = 1.0
    else:
        weights = rng.random(m)
    return latents, weights


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


def _edge(i: int) -> tuple[str, str, str]:
    return (f"e{i % 3}", "rel" if i % 2 else "part of", f"v{i}")


@pytest.mark.parametrize("seed", range(20))
def test_graphs_equal_brute_force(seed):
    rng = np.random.default_rng(2000 + seed)
    edges = [_edge(i) for i in range(int(rng.integers(1, 8)))]
    latents, weights = random_instance(rng, edges)
    w = [1.0] * len(latents) if weights is None else list(weights)
    risks = {c: hamming_risk(c, latents, w) for c in all_subsets(edges)}
    best = min(risks.values())
    res = GraphSpace().bayes(latents, weights)
    assert res.risk == pytest.approx(best, abs=1e-12)
    assert risks[res.action] == pytest.approx(best, abs=1e-12)


def test_graph_hand_example_and_vertices():
    paris = ("Paris", "is capital of", "France")
    tower = ("Eiffel Tower", "is in", "Paris")
    wrong = ("Paris", "is in", "Germany")
    latents = [
        frozenset({paris, tower}),
        frozenset({paris}),
        frozenset({paris, wrong}),
        [list(tower), list(paris)],
    ]
    res = GraphSpace(directed=True).bayes(latents)
    assert res.action == frozenset({paris, tower})  # tower in 2 of 4 (>= 1/2), wrong in 1 of 4
    assert res.risk == pytest.approx(0.0 + 0.5 + 0.25)
    assert GraphSpace.vertices(res.action) == frozenset({"Paris", "France", "Eiffel Tower"})
    assert GraphSpace.vertices(frozenset()) == frozenset()


def test_hamming_bayes_never_worse_than_sample_mbr_or_map():
    space = SetSpace()
    res = space.bayes(OCEANS)
    assert res.risk <= space.sample_mbr(OCEANS).risk
    assert res.risk <= space.risk(space.map(OCEANS), OCEANS)
    assert math.isclose(space.risk(res.action, OCEANS), res.risk)
