"""What a prompt's reader sees: the latent distribution, each space's risk bound, and the
confidence (the Bayes answer's expected task quality under the samples).

Checked against direct counts, against sample sets built to reach each space's bound (the bound
is the supremum, so a construction attaining it and random draws below it pin it down), against
the task quality computed by hand, and on constructed cases: scattered < split < unanimous.
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
    assert space.confidence(samples) == pytest.approx(0.5)
    assert space.confidence(["a"] * 4) == 1.0
    assert space.confidence(samples, "lyon") == pytest.approx(0.3)


def _f1(a, b):
    a, b = frozenset(a), frozenset(b)
    return 1.0 if not a and not b else 2 * len(a & b) / (len(a) + len(b))


@pytest.mark.parametrize("name", ["sets", "graphs"])
def test_set_marginals_equal_direct_counts_and_confidence_is_the_expected_f1(name):
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
        # confidence = mean F1 of the Bayes set against each sample (F(empty, empty) = 1)
        action = frozenset(k for k, p in marginal.items() if p >= 0.5)
        if name == "graphs":
            action = space.bayes(samples).action
        want = np.mean([_f1(action, s) for s in samples])
        assert space.confidence(samples) == pytest.approx(want)
        other = draw()  # any answer, not only the Bayes one
        assert space.confidence(samples, other) == pytest.approx(
            np.mean([_f1(other, s) for s in samples])
        )


def test_an_empty_answer_from_scattered_samples_is_not_confident():
    """What real vLLM output showed: scattered junk labels, each named once, give an empty Bayes
    answer; the old mean agreement |2p - 1| over those labels read 0.84-0.88 for it."""
    space = get_space("sets")
    scattered = [{f"junk{i}", f"more{i}"} for i in range(10)]
    res = space.bayes(scattered)
    assert res.action == frozenset()
    assert space.confidence(scattered) == 0.0
    assert 1.0 - res.risk / space.max_risk(scattered) == pytest.approx(0.8)  # the old reading


def test_the_set_bound_is_reached_when_every_answer_splits_the_samples_in_half():
    space = get_space("sets")
    samples = [{"a", "b"}, set(), {"a"}, {"b"}]
    res = space.bayes(samples)
    assert res.risk == pytest.approx(space.max_risk(samples)) == 1.0
    # the Bayes set {a, b} (p = 1/2 each): F1 1, 0, 2/3, 2/3 against the four samples
    assert space.confidence(samples) == pytest.approx(np.mean([1, 0, 2 / 3, 2 / 3]))


def test_simplex_distribution_is_the_mean_and_the_bound_log_k_is_reached_by_one_hot_splits():
    space = get_space("simplex")
    one_hot = [
        {"a": 1.0, "b": 0.0, "c": 0.0},
        {"a": 0.0, "b": 1.0, "c": 0.0},
        {"a": 0.0, "b": 0.0, "c": 1.0},
    ]
    assert space.bayes(one_hot).risk == pytest.approx(math.log(3))
    # exp(-KL(e_k || uniform)) = 1/3 for each one-hot sample
    assert space.confidence(one_hot) == pytest.approx(1 / 3)
    for _ in range(30):
        p = RNG.dirichlet(np.ones(4), size=int(RNG.integers(1, 6)))
        samples = [dict(zip("wxyz", map(float, row))) for row in p]
        mean = p.mean(axis=0)
        assert space.distribution(samples) == pytest.approx(dict(zip("wxyz", mean)))
        conf = space.confidence(samples)
        kl = [sum(r * math.log(r / m) for r, m in zip(row, mean) if r > 0) for row in p]
        assert conf == pytest.approx(np.mean(np.exp(-np.array(kl))))


@pytest.mark.parametrize("loss", ["l1", "l2"])
def test_real_bounds_are_reached_by_a_split_between_the_extremes(loss):
    space = get_space("reals", loss=loss)
    split = [0.0, 0.0, 4.0, 4.0]
    assert space.bayes(split).risk == pytest.approx(space.max_risk(split))
    # the answer 0 (lower median) or 2 (mean): 1 - |a - x| / |x| floored at 0, a zero sample
    # agreeing only with 0
    want = 0.5 if loss == "l1" else np.mean([0, 0, 0.5, 0.5])
    assert space.confidence(split) == pytest.approx(want)
    for _ in range(50):
        x = list(RNG.normal(size=int(RNG.integers(2, 9))))
        risk = space.bayes(x).risk
        assert risk <= space.max_risk(x) + 1e-12
    assert space.distribution([1.0, 2.0]) is None  # numbers carry no labels
    assert space.confidence([3.0, 3.0]) == 1.0
    assert space.confidence([8.0, 8.0, 10.0], 10.0) == pytest.approx((0.75 + 0.75 + 1) / 3)


def test_sphere_confidence_is_the_mean_length():
    space = get_space("sphere")
    antipodal = np.array([[1.0, 0.0], [-1.0, 0.0]])
    assert space.confidence(antipodal, np.array([1.0, 0.0])) == pytest.approx(0.0)
    x = RNG.normal(size=(6, 5))
    mu = (x / np.linalg.norm(x, axis=1, keepdims=True)).mean(axis=0)
    assert space.confidence(x) == pytest.approx(np.linalg.norm(mu))
    assert space.distribution(x) is None


def test_fbeta_confidence_is_the_expected_fbeta_of_the_decision():
    space = get_space("sets-fbeta", beta=1.0)
    samples = [{"a"}, {"a", "b"}, {"a"}]
    res = space.bayes(samples)

    def f1(a, b):
        return 1.0 if not a and not b else 2 * len(a & b) / (len(a) + len(b))

    expected_f = np.mean([f1(frozenset(s), res.action) for s in samples])
    assert space.confidence(samples) == pytest.approx(expected_f) == pytest.approx(1 - res.risk)


def _unit(v):
    v = np.asarray(v, dtype=float)
    return v / np.linalg.norm(v)


# Per space: samples that scatter, samples split between two answers, unanimous samples.
ORDERING_CASES = {
    "classes": ([f"c{i}" for i in range(10)], ["paris"] * 6 + ["lyon"] * 4, ["paris"] * 10),
    "sets": (
        [{f"x{i}", f"y{i}"} for i in range(10)],
        [{"a"}] * 6 + [{"b", "c"}] * 4,
        [{"a", "b"}] * 10,
    ),
    "graphs": (
        [{(f"h{i}", "r", f"t{i}")} for i in range(10)],
        [{("a", "r", "b")}] * 6 + [{("c", "r", "d")}] * 4,
        [{("a", "r", "b")}] * 10,
    ),
    "sets-fbeta": ([{f"x{i}"} for i in range(10)], [{"a"}] * 6 + [{"b"}] * 4, [{"a"}] * 10),
    # ten of eleven evenly spaced directions: |mu| = 1/10
    "sphere": (
        [np.array([np.cos(t), np.sin(t)]) for t in 2 * np.pi * np.arange(10) / 11],
        [_unit([1, 0])] * 6 + [_unit([0, 1])] * 4,
        [_unit([1, 1])] * 10,
    ),
    "simplex": (
        [{f"k{i}": 1.0} for i in range(10)],
        [{"a": 1.0}] * 6 + [{"b": 1.0}] * 4,
        [{"a": 0.7, "b": 0.3}] * 10,
    ),
    "reals": (
        [1.0, -40.0, 300.0, 7.0, 1e4, -2.0, 55.0, 0.5, 90.0, -600.0],
        [8.0] * 6 + [12.0] * 4,
        [8.0] * 10,
    ),
}


@pytest.mark.parametrize("name", sorted(ORDERING_CASES))
def test_confidence_orders_scattered_below_split_below_unanimous(name):
    space = get_space(name)
    scattered, split, unanimous = ORDERING_CASES[name]
    got = [space.confidence(s) for s in (scattered, split, unanimous)]
    assert 0.0 <= got[0] < got[1] < got[2] == pytest.approx(1.0), got
    assert got[0] <= 0.2, got  # scattered samples: the answer is rarely right
