"""The sphere task's metric maths on hand-computed values (pipeline/tasks/sphere/metrics.py)."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.tasks.sphere.metrics import cosine_distance


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
