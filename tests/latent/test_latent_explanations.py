"""What a prompt's reader sees: the latent distribution and the confidence 1 - risk / max_risk.

Checked against direct counts and against sample sets built to reach each space's bound (the
bound is the supremum, so a construction attaining it and random draws below it pin it down).
"""

import math
from collections import Counter

import numpy as np
import pytest

from pipeline.latent import get_space

RNG = np.random.default_rng(7)


def test_a_class_distribution_is_the_share_of_each_class_and_confidence_the_mode_share():
    space = get_space("classes")
    samples = ["paris"] * 5 + ["lyon"] * 3 + ["nice"] * 2
    assert space.distribution(samples) == {"paris": 0.5, "lyon": 0.3, "nice": 0.2}
    assert space.confidence(space.bayes(samples).risk, samples) == pytest.approx(0.5)
    assert space.confidence(space.bayes(["a"] * 4).risk, ["a"] * 4) == 1.0


@pytest.mark.parametrize("name", ["sets", "graphs"])
def test_set_marginals_and_confidence_equal_direct_counts(name):
    space = get_space(name)
    if name == "sets":
        universe = list("abcdef")
        draw = lambda: frozenset(x for x in universe if RNG.random() < 0.4)  # noqa: E731
    else:
        universe = [("a", "r", "b"), ("b", "r", "c"), ("a", "s", "c"), ("c", "t", "d")]
        draw = lambda: frozenset(e for e in universe if RNG.random() < 0.5)  # noqa: E731
    for _ in range(50):
        samples = [draw() for _ in range(int(RNG.integers(1, 9)))]
        counts = Counter(label for s in samples for label in space.labels(s))
        marginal = {k: v / len(samples) for k, v in counts.items()}
        got = space.distribution(samples)
        assert got == pytest.approx(marginal)
        assert list(got.values()) == sorted(got.values(), reverse=True)
        # confidence = mean agreement |2 p(y) - 1| over the labels the samples name
        want = np.mean([abs(2 * p - 1) for p in marginal.values()]) if marginal else 1.0
        assert space.confidence(space.bayes(samples).risk, samples) == pytest.approx(want)


def test_the_set_bound_is_reached_when_every_answer_splits_the_samples_in_half():
    space = get_space("sets")
    samples = [{"a", "b"}, set(), {"a"}, {"b"}]
    assert space.bayes(samples).risk == pytest.approx(space.max_risk(samples)) == 1.0
    assert space.confidence(space.bayes(samples).risk, samples) == 0.0


def test_simplex_distribution_is_the_mean_and_the_bound_log_k_is_reached_by_one_hot_splits():
    space = get_space("simplex")
    one_hot = [{"a": 1.0, "b": 0.0, "c": 0.0}, {"a": 0.0, "b": 1.0, "c": 0.0},
               {"a": 0.0, "b": 0.0, "c": 1.0}]
    assert space.bayes(one_hot).risk == pytest.approx(math.log(3))
    assert space.confidence(space.bayes(one_hot).risk, one_hot) == pytest.approx(0.0)
    for _ in range(30):
        p = RNG.dirichlet(np.ones(4), size=int(RNG.integers(1, 6)))
        samples = [dict(zip("wxyz", map(float, row))) for row in p]
        mean = p.mean(axis=0)
        assert space.distribution(samples) == pytest.approx(dict(zip("wxyz", mean)))
        conf = space.confidence(space.bayes(samples).risk, samples)
        assert 0.0 <= conf <= 1.0


@pytest.mark.parametrize("loss", ["l1", "l2"])
def test_real_bounds_are_reached_by_a_split_between_the_extremes(loss):
    space = get_space("reals", loss=loss)
    split = [0.0, 0.0, 4.0, 4.0]
    assert space.bayes(split).risk == pytest.approx(space.max_risk(split))
    assert space.confidence(space.bayes(split).risk, split) == pytest.approx(0.0)
    for _ in range(50):
        x = list(RNG.normal(size=int(RNG.integers(2, 9))))
        risk = space.bayes(x).risk
        assert risk <= space.max_risk(x) + 1e-12
    assert space.distribution([1.0, 2.0]) is None  # numbers carry no labels
    assert space.confidence(0.0, [3.0, 3.0]) == 1.0


def test_sphere_confidence_is_the_mean_length():
    space = get_space("sphere")
    antipodal = np.array([[1.0, 0.0], [-1.0, 0.0]])
    assert space.confidence(space.bayes(antipodal).risk, antipodal) == pytest.approx(0.0)
    x = RNG.normal(size=(6, 5))
    mu = (x / np.linalg.norm(x, axis=1, keepdims=True)).mean(axis=0)
    assert space.confidence(space.bayes(x).risk, x) == pytest.approx(np.linalg.norm(mu))
    assert space.distribution(x) is None


def test_fbeta_confidence_is_the_expected_fbeta_of_the_decision():
    space = get_space("sets-fbeta", beta=1.0)
    samples = [{"a"}, {"a", "b"}, {"a"}]
    res = space.bayes(samples)

    def f1(a, b):
        return 1.0 if not a and not b else 2 * len(a & b) / (len(a) + len(b))

    expected_f = np.mean([f1(frozenset(s), res.action) for s in samples])
    assert space.confidence(res.risk, samples) == pytest.approx(expected_f)
