"""Quality metrics on hand-computed values (paper appendix "Evaluation Metrics", DESIGN s6)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.evaluation import (
    align_to_aliases,
    cosine_distance,
    f1_score,
    hamming_graph,
    kl_divergence,
    normalized_hamming,
)


def test_normalized_hamming() -> None:
    # symmetric difference {a, d}, |ref| = 3
    assert normalized_hamming({"a", "b", "c"}, {"b", "c", "d"}) == 2 / 3
    assert normalized_hamming(set(), {"a", "b"}) == 1.0  # abstaining misses every true label
    assert normalized_hamming({"a", "b", "c"}, {"a"}) == 2.0  # can exceed 1
    assert normalized_hamming(["a", "a"], ("a",)) == 0.0  # any iterable, duplicates collapse
    # Empty reference: denominator max(|ref|, 1) -> number of predicted labels.
    assert normalized_hamming({"x", "y"}, set()) == 2.0
    assert normalized_hamming(set(), set()) == 0.0
    assert normalized_hamming(None, {"a"}) == 1.0


def test_hamming_graph_over_edges() -> None:
    pred = {("paris", "capital of", "france"), ("paris", "located in", "europe")}
    ref = {("paris", "capital of", "france"), ("france", "member of", "eu")}
    assert hamming_graph(pred, ref) == 1.0  # 2 differing edges / 2 true edges
    assert hamming_graph(pred, pred) == 0.0
    assert hamming_graph(frozenset(), ref) == 1.0


def test_f1_score() -> None:
    pred, ref = {"a", "b"}, {"b", "c", "d"}  # precision 1/2, recall 1/3
    assert f1_score(pred, ref) == pytest.approx(0.4, abs=1e-15)  # 2 * (1/6) / (5/6)
    assert f1_score(pred, ref, mean="geometric") == pytest.approx(math.sqrt(1 / 6), abs=1e-15)
    assert f1_score({"a"}, {"a"}) == 1.0
    assert f1_score({"a"}, {"b"}) == 0.0
    assert f1_score({"a"}, {"b"}, mean="geometric") == 0.0
    # Empty-set conventions.
    assert f1_score(set(), set()) == 1.0
    assert f1_score(set(), set(), mean="geometric") == 1.0
    assert f1_score(set(), {"a"}) == 0.0
    assert f1_score({"a"}, set()) == 0.0
    with pytest.raises(ValueError, match="harmonic"):
        f1_score({"a"}, {"a"}, mean="arithmetic")  # type: ignore[arg-type]


def test_set_metrics_reject_a_bare_string() -> None:
    with pytest.raises(TypeError, match="wrap it"):
        normalized_hamming("paris", {"paris"})
    with pytest.raises(TypeError, match="hashable"):
        f1_score([["a"]], {"a"})


def test_align_to_aliases() -> None:
    answers = [["United States", "USA", "the U.S."], ["Canada"]]
    pred, ref = align_to_aliases(["usa", "The Mexico", "", "U.S."], answers)
    assert ref == {"united states", "canada"}
    assert pred == {"united states", "mexico"}
    assert normalized_hamming(pred, ref) == 1.0  # {mexico, canada} / 2
    assert align_to_aliases([], []) == (frozenset(), frozenset())


def test_cosine_distance() -> None:
    assert cosine_distance([1.0, 0.0], [0.0, 1.0]) == pytest.approx(1.0, abs=1e-15)
    assert cosine_distance([1.0, 1.0], [2.0, 2.0]) == pytest.approx(0.0, abs=1e-15)
    assert cosine_distance([1.0, 0.0], [-3.0, 0.0]) == pytest.approx(2.0, abs=1e-15)
    assert cosine_distance([3.0, 4.0], [4.0, 3.0]) == pytest.approx(1 - 24 / 25, abs=1e-15)
    assert cosine_distance(np.array([[3.0, 4.0]]), np.array([4.0, 3.0])) == pytest.approx(0.04)
    with pytest.raises(ValueError, match="zero vector"):
        cosine_distance([0.0, 0.0], [1.0, 0.0])
    with pytest.raises(ValueError, match="same length"):
        cosine_distance([1.0, 0.0], [1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="finite"):
        cosine_distance([np.nan, 1.0], [1.0, 0.0])


def test_kl_divergence_with_smoothing() -> None:
    eps = 1e-6
    # Union support K = 2; pred smoothed to a = (1 + eps) / (1 + 2 eps), b = eps / (1 + 2 eps).
    expected = 0.5 * math.log(0.5 * (1 + 2 * eps) / (1 + eps)) + 0.5 * math.log(
        0.5 * (1 + 2 * eps) / eps
    )
    assert kl_divergence({"a": 0.5, "b": 0.5}, {"a": 1.0}) == pytest.approx(expected, abs=1e-12)
    assert expected == pytest.approx(6.2146, abs=1e-4)  # ~ 0.5 log(0.5 / 1e-6): a missed answer
    # Labels only in pred enlarge K and smooth, but p* = 0 terms contribute nothing.
    k3 = 1.0 * math.log(1.0 * (1 + 3 * eps) / (0.5 + eps))
    assert kl_divergence({"a": 1.0}, {"a": 0.5, "b": 0.25, "c": 0.25}) == pytest.approx(
        k3, abs=1e-12
    )
    # Both sides are renormalised: unnormalised counts give the same value.
    assert kl_divergence({"a": 2, "b": 2}, {"a": 3}) == pytest.approx(expected, abs=1e-12)
    # Identical distributions: only the smoothing remains (tiny but positive).
    same = kl_divergence({"a": 0.3, "b": 0.7}, {"a": 0.3, "b": 0.7})
    assert 0.0 <= same < 1e-5
    assert kl_divergence({"a": 1.0}, {"a": 1.0}, eps=0.1) == pytest.approx(
        math.log((1 + 0.1) / (1 + 0.1)), abs=1e-15
    )


def test_kl_divergence_bad_input() -> None:
    with pytest.raises(ValueError, match="no probability mass"):
        kl_divergence({"a": 1.0}, {})
    with pytest.raises(ValueError, match=r"p_star\['a'\].*>= 0"):
        kl_divergence({"a": -0.1, "b": 1.1}, {"a": 1.0})
    with pytest.raises(ValueError, match="finite"):
        kl_divergence({"a": 1.0}, {"a": float("nan")})
    with pytest.raises(ValueError, match="eps"):
        kl_divergence({"a": 1.0}, {"a": 1.0}, eps=0.0)
    with pytest.raises(TypeError, match="dict"):
        kl_divergence([0.5, 0.5], {"a": 1.0})  # type: ignore[arg-type]
