"""`reals` near the float limit: means and risks are computed on values scaled by a power of two,
so a risk whose true value is a float comes out (checked against exact rational arithmetic,
`fractions.Fraction`), and one whose true value exceeds the largest float is refused by name
(RiskOverflowError), never inf or NaN, and without numpy overflow warnings."""

from __future__ import annotations

import sys
import warnings
from fractions import Fraction
from functools import partial

import numpy as np
import pytest

from pipeline.latent import BayesResult, RealSpace
from pipeline.tasks.reals.space import RiskOverflowError

FLOAT_MAX = Fraction(sys.float_info.max)


@pytest.fixture(autouse=True)
def _no_numpy_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def exact_risk(action: float, values, weights, loss: str) -> Fraction:
    a = Fraction(action)
    losses = (abs(Fraction(x) - a) if loss == "l1" else (Fraction(x) - a) ** 2 for x in values)
    return sum(Fraction(w) * d for w, d in zip(weights, losses)) / sum(Fraction(w) for w in weights)


def exact_mean(values, weights) -> Fraction:
    return sum(Fraction(w) * Fraction(x) for w, x in zip(weights, values)) / sum(
        Fraction(w) for w in weights
    )


def risk_of(decide, *args) -> float:
    return decide(*args).risk


def check(got, exact: Fraction, rel: float = 1e-13) -> None:
    """`got()` is the float nearest `exact` (within rounding of a sum) or refuses where
    `exact` exceeds the largest float (values within 1e-9 of the limit may go either way)."""
    if exact > FLOAT_MAX * Fraction(1 + 1e-9):
        with pytest.raises(RiskOverflowError, match="exceeds the largest float"):
            got()
    elif exact < FLOAT_MAX * Fraction(1 - 1e-9):
        assert got() == pytest.approx(float(exact), rel=rel, abs=0)


def test_l1_risks_of_values_near_the_limit_are_finite():
    space = RealSpace("l1")
    values = [1e308, 1e308, -1e308]
    third = float(2 * Fraction(1e308) / 3)  # the Bayes risk 2e308 / 3, correctly rounded
    res = space.bayes(values)
    assert (res.action, res.risk) == (1e308, third)
    assert space.risk(-1e308, values) == float(4 * Fraction(1e308) / 3)
    assert space.sample_mbr(values) == res
    assert space.max_risk([1e308, -1e308]) == 1e308
    assert space.confidence(values) == 2 / 3  # agreement 1, 1, 0: never NaN
    assert RealSpace("l2").confidence(values, action=1e308) == 2 / 3

    batch = space.batch([[1.0, 2.0], values])
    actions, risks = batch.bayes()
    assert actions == [1.0, 1e308]
    assert risks.tolist() == [0.5, res.risk]
    assert batch.sample_risks()[1].tolist() == [res.risk, res.risk, space.risk(-1e308, values)]
    assert batch.risk([None, -1e308])[1] == space.risk(-1e308, values)


def test_l2_mean_of_values_near_the_limit_is_finite():
    space = RealSpace("l2")
    assert space.bayes([1.5e308, 1.5e308]) == BayesResult(1.5e308, 0.0)  # 3e308 / 2 unscaled
    res = space.bayes([1e154, -1e154])  # variance 1e308: a float; (2e154)^2 is not
    assert (res.action, res.risk) == (0.0, 1e308)
    actions, risks = space.batch([[1.5e308, 1.5e308], [1e154, -1e154]]).bayes()
    assert actions == [1.5e308, 0.0] and risks.tolist() == [0.0, 1e308]


def test_a_risk_beyond_the_largest_float_is_refused_by_name():
    space = RealSpace("l2")
    values = [1e308, 1e308, -1e308]  # variance 8/9 * 1e616
    with pytest.raises(
        RiskOverflowError,
        match=r"reals \(l2\): the Bayes risk exceeds the "
        r"largest float .*values span -1e\+308 to 1e\+308.*loss=l1",
    ):
        space.bayes(values)
    with pytest.raises(RiskOverflowError, match="risk exceeds"):
        space.risk(0.0, values)
    with pytest.raises(RiskOverflowError, match="chosen sample"):
        space.sample_mbr(values)
    with pytest.raises(RiskOverflowError, match="bound on the Bayes risk"):
        space.max_risk(values)
    batch = space.batch([[1.0, 2.0], values, [3.0], [-1e200, 1e200]])
    with pytest.raises(RiskOverflowError, match=r"Bayes risk of batch rows 1, 3 exceeds") as err:
        batch.bayes()
    assert err.value.rows == [1, 3]
    with pytest.raises(RiskOverflowError, match="risk of a sample of batch rows 1, 3"):
        batch.sample_risks()
    # a decode far from its samples: only its row is named; an unknown action is not computed
    assert np.isnan(space.batch([[1e200, 1e200]]).risk([None])[0])
    with pytest.raises(
        RiskOverflowError, match=r"risk of batch row 0 exceeds .* span -1e\+200 to 1e\+200"
    ):
        space.batch([[1e200, 1e200]]).risk([-1e200])
    # l1: an action on the far side of values near the limit
    with pytest.raises(RiskOverflowError, match=r"reals \(l1\).*larger units$"):
        RealSpace("l1").risk(-1.7e308, [1.7e308])


def huge_values(rng: np.random.Generator, n: int) -> list[float]:
    """Values from tiny to near the largest float, mostly huge, both signs, with repeats."""
    out = []
    for _ in range(n):
        exponent = int(
            rng.choice(
                [
                    int(rng.integers(1010, 1025)),
                    int(rng.integers(-20, 20)),
                    int(rng.integers(500, 520)),
                ],
                p=[0.7, 0.15, 0.15],
            )
        )
        out.append(float(np.ldexp(rng.uniform(0.5, 1.0), exponent) * rng.choice([-1, 1])))
    if n > 1 and rng.random() < 0.3:
        out[-1] = out[0]
    return out


@pytest.mark.parametrize("loss", ["l1", "l2"])
@pytest.mark.parametrize("seed", range(4))
def test_risks_of_huge_values_match_exact_arithmetic(loss, seed):
    rng = np.random.default_rng(900 + seed)
    space = RealSpace(loss)
    prompts, actions = [], []
    for _ in range(25):
        n = int(rng.integers(1, 6))
        values = huge_values(rng, n)
        weights = [int(w) for w in rng.integers(1, 4, size=n)]
        action = -values[0] if rng.random() < 0.3 else huge_values(rng, 1)[0]  # far side
        prompts.append(values)
        actions.append(action)

        # Bayes action and risk: l1 against every sample (the lower median is one), l2 the mean
        if loss == "l1":
            best = min(exact_risk(x, values, weights, loss) for x in values)
            check(partial(risk_of, space.bayes, values, weights), best)
            assert exact_risk(space.bayes(values, weights).action, values, weights, loss) == best
        else:
            mean = exact_mean(values, weights)
            variance = exact_risk(float(mean), values, weights, loss)
            check(partial(risk_of, space.bayes, values, weights), variance, rel=1e-9)
            if variance < FLOAT_MAX / 2:
                scale = max(abs(x) for x in values)
                assert space.bayes(values, weights).action == pytest.approx(
                    float(mean), rel=1e-13, abs=1e-13 * scale
                )
        check(
            partial(space.risk, action, values, weights), exact_risk(action, values, weights, loss)
        )
        sample_risks = [exact_risk(x, values, weights, loss) for x in values]
        check(partial(risk_of, space.sample_mbr, values, weights), min(sample_risks))

    # the batch names exactly the prompts whose risk is no float, and decides the others
    uniform = [[1] * len(v) for v in prompts]
    exact_bayes = [
        min(exact_risk(x, v, u, loss) for x in v)
        if loss == "l1"
        else exact_risk(float(exact_mean(v, u)), v, u, loss)
        for v, u in zip(prompts, uniform)
    ]
    exact_actions = [exact_risk(a, v, u, loss) for a, v, u in zip(actions, prompts, uniform)]
    for exact, decide in (
        (exact_bayes, lambda b, keep: b.bayes()[1]),
        (exact_actions, lambda b, keep: b.risk([actions[p] for p in keep])),
    ):
        rows = [p for p, r in enumerate(exact) if r > FLOAT_MAX]
        if rows:
            with pytest.raises(RiskOverflowError) as err:
                decide(space.batch(prompts), range(len(prompts)))
            assert err.value.rows == rows
        keep = [p for p in range(len(prompts)) if p not in rows]
        risks = decide(space.batch([prompts[p] for p in keep]), keep)
        assert risks == pytest.approx([float(exact[p]) for p in keep], rel=1e-9, abs=0)
