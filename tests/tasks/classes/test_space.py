"""Classes: the mode and its 0-1 risk on hand examples."""

from __future__ import annotations

import pytest

from pipeline.latent import ClassSpace


def test_classes_hand_examples():
    space = ClassSpace()
    res = space.bayes(["Cape Town"] * 17 + ["Khartoum"] * 2 + ["Windhoek"])
    assert res.action == "Cape Town" and res.risk == pytest.approx(0.15, abs=1e-15)
    res = space.bayes(["b", "a", "a", "b"])
    assert res.action == "b" and res.risk == 0.5  # tie: first seen
    res = space.bayes(["b", "a", "c"], weights=[1, 3, 2])
    assert res.action == "a" and res.risk == pytest.approx(0.5)
    assert space.distance("a", "a") == 0.0 and space.distance("a", 1) == 1.0
    assert space.risk("c", ["a", "c", "c", "d"]) == 0.5
