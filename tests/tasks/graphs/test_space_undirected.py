"""Undirected graph edges (paper: "undirected knowledge graphs (V, E)"): the structural Hamming
distance is symmetric in an edge's endpoints, and the Bayes action matches brute force over every
edge subset under an independently written undirected distance."""

import itertools

import numpy as np
import pytest

from pipeline.latent import get_space


def _undirected_hamming(a, b, labels=True):
    key = lambda e: (frozenset((e[0], e[2])), e[1] if labels else "")  # noqa: E731
    return len({key(e) for e in a} ^ {key(e) for e in b})


def test_distance_is_symmetric_in_the_endpoints():
    g = get_space("graphs")
    assert g.distance({("paris", "capital of", "france")}, {("france", "capital of", "paris")}) == 0
    assert g.distance({("a", "r", "b")}, {("b", "s", "a")}) == 2  # relations still count
    assert (
        get_space("graphs", relation_labels=False).distance({("a", "r", "b")}, {("b", "s", "a")})
        == 0
    )
    assert get_space("graphs", directed=True).distance({("a", "r", "b")}, {("b", "r", "a")}) == 2


def test_stored_latent_is_one_edge_for_both_directions():
    g = get_space("graphs")
    latent = g.from_json(g.to_json(frozenset({("b", "r", "a"), ("a", "r", "b")})))
    assert latent == frozenset({("a", "r", "b")})


@pytest.mark.parametrize("labels", [True, False])
def test_bayes_matches_brute_force_over_edge_subsets(labels):
    rng = np.random.default_rng(7)
    nodes, rels = ["a", "b", "c"], ["r", "s"]
    all_edges = [(h, r, t) for h in nodes for r in rels for t in nodes if h != t]
    g = get_space("graphs", relation_labels=labels)
    for _ in range(25):
        samples = [frozenset(e for e in all_edges if rng.random() < 0.25) for _ in range(5)]
        weights = rng.random(5) + 0.1
        res = g.bayes(samples, weights)
        # candidates: every subset of the distinct undirected edges the samples contain
        distinct = {}
        for s in samples:
            for h, r, t in s:
                distinct[(frozenset((h, t)), r if labels else "")] = (h, r, t)
        cands = [
            frozenset(c)
            for n in range(len(distinct) + 1)
            for c in itertools.combinations(distinct.values(), n)
        ]
        risks = [
            sum(w * _undirected_hamming(s, c, labels) for s, w in zip(samples, weights))
            / weights.sum()
            for c in cands
        ]
        assert res.risk == pytest.approx(min(risks))
        assert sum(
            w * _undirected_hamming(s, res.action, labels) for s, w in zip(samples, weights)
        ) / weights.sum() == pytest.approx(min(risks))


def test_an_undirected_edge_is_written_the_way_the_samples_state_it():
    g = get_space("graphs")
    action = g.canonical({("paris", "capital of", "france")})
    assert next(iter(action))[0] == "france"  # stored in sorted order
    assert (
        g.render(action, [(action, "Paris is the capital of France.")])
        == "Paris capital of france."
    )
    assert (
        get_space("graphs", directed=True).render(
            frozenset({("france", "capital of", "paris")}), []
        )
        == "France capital of paris."
    )
