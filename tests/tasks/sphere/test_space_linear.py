"""Sphere l_Sample in O(M d) (risk_i = 1 - <x_i, mu>) against the M x M distance matrix and a
brute-force double loop over `SphereSpace.distance`: the same risks (to float rounding) and the
same chosen sample, ties included."""

import numpy as np
import pytest

from pipeline.latent import get_space
from pipeline.tasks.sphere.space import (
    sphere_pairwise_matrix_risks_batch,
    sphere_pairwise_risks_batch,
    sphere_sample_mbr_batch,
)


def brute_risks(vectors: np.ndarray, weights: np.ndarray) -> np.ndarray:
    space = get_space("sphere")
    return np.array(
        [
            sum(w * space.distance(c, r) for r, w in zip(vectors, weights)) / weights.sum()
            for c in vectors
        ]
    )


@pytest.mark.parametrize("m,dim", [(1, 3), (5, 2), (20, 16), (100, 8)])
def test_linear_risks_equal_the_pairwise_sum(m, dim):
    rng = np.random.default_rng(m * 31 + dim)
    x = rng.normal(size=(3, m, dim))
    w = rng.integers(1, 4, size=(3, m)).astype(float)
    linear = sphere_pairwise_risks_batch(x, w)
    matrix = sphere_pairwise_matrix_risks_batch(x, w)
    np.testing.assert_allclose(linear, matrix, rtol=0, atol=1e-12)
    for p in range(3):
        np.testing.assert_allclose(linear[p], brute_risks(x[p], w[p]), rtol=0, atol=1e-12)


def test_same_choice_as_the_matrix_on_duplicates_and_padding():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(4, 6))
    # samples repeat (exact ties between copies); the first copy of the best must win
    x = np.stack([base[[0, 1, 1, 2, 3, 1, 0, 2]], base[[3, 3, 2, 2, 1, 0, 0, 1]]])
    idx, risk = sphere_sample_mbr_batch(x)
    matrix = sphere_pairwise_matrix_risks_batch(x)
    assert idx.tolist() == [int(np.argmin(r)) for r in matrix]
    np.testing.assert_allclose(risk, matrix.min(axis=1), atol=1e-12)
    # zero-weight padding is never chosen and changes nothing
    w = np.ones((2, 8))
    w[:, 5:] = 0.0
    padded = sphere_pairwise_risks_batch(x, w)
    assert np.all(np.isinf(padded[:, 5:]))
    np.testing.assert_allclose(padded[:, :5], sphere_pairwise_risks_batch(x[:, :5]), atol=1e-12)


def test_one_prompt_sample_mbr_is_linear_and_agrees():
    rng = np.random.default_rng(3)
    vectors = list(rng.normal(size=(30, 5)))
    res = get_space("sphere").sample_mbr(vectors)
    risks = brute_risks(np.stack(vectors), np.ones(30))
    assert np.array_equal(
        res.action, vectors[int(np.argmin(risks))] / np.linalg.norm(vectors[int(np.argmin(risks))])
    )
    assert res.risk == pytest.approx(risks.min(), abs=1e-12)
    # the batch form gives the same choice
    idx, _ = get_space("sphere").batch([vectors]).sample_mbr()
    assert idx[0] == int(np.argmin(risks))
