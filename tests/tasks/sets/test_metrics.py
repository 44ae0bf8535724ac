"""The answer-set task's metric maths on hand-computed values (paper appendix "Evaluation
Metrics", DESIGN s6; pipeline/tasks/sets/metrics.py)."""

from __future__ import annotations

import math

import pytest

from pipeline.tasks.sets.metrics import align_to_aliases, f1_score, normalized_hamming


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
