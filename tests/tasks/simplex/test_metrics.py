"""The simplex task's metric maths on hand-computed values (pipeline/tasks/simplex/metrics.py)."""

from __future__ import annotations

import math

import pytest

from pipeline.tasks.simplex.metrics import kl_divergence


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
