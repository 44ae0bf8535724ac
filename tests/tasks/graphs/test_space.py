"""Graphs (sets of edges): brute force over all 2^K edge subsets and a hand example."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.latent import GraphSpace

from ..sets._brute import all_subsets, hamming_risk, random_instance


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
