"""White-box scores from sequence log-probs: checked against lm-polygraph 0.7.0's own estimators on
the same statistics, by hand, and through the scorer (columns only when log-probs are given)."""

import math

import numpy as np
import pytest

from pipeline.uncertainty.whitebox import msp_of_answer, semantic_entropy

RNG = np.random.default_rng(3)


def test_semantic_entropy_equals_lm_polygraphs_on_the_same_classes():
    polygraph = pytest.importorskip("lm_polygraph.estimators")
    for _ in range(30):
        m = int(RNG.integers(1, 12))
        lps = list(-RNG.exponential(3.0, size=m))
        classes = [f"c{k}" for k in RNG.integers(0, 4, size=m)]
        order = list(dict.fromkeys(classes))
        stats = {
            "sample_log_probs": [lps],
            "sample_texts": [[f"t{i}" for i in range(m)]],
            "semantic_classes_entail": {
                "class_to_sample": [[[i for i, c in enumerate(classes) if c == k] for k in order]],
                "sample_to_class": [{i: order.index(c) for i, c in enumerate(classes)}],
            },
        }
        want = polygraph.SemanticEntropy()(stats)[0]
        assert semantic_entropy(lps, classes) == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_semantic_entropy_by_hand():
    # two classes: {a, a} with p = e^-1 + e^-2, {b} with p = e^-3
    lp_a = math.log(math.exp(-1) + math.exp(-2))
    assert semantic_entropy([-1, -2, -3], ["a", "a", "b"]) == pytest.approx(-(2 * lp_a - 3) / 3)
    assert math.isnan(semantic_entropy([-1, math.nan], ["a", "b"]))
    assert math.isnan(semantic_entropy([], []))


def test_msp_is_lm_polygraphs_of_the_most_probable_sample_closest_to_the_answer():
    polygraph = pytest.importorskip("lm_polygraph.estimators")
    lps, distances = [-4.0, -1.5, -0.5, -2.0], [0.0, 1.0, 2.0, 0.0]
    got = msp_of_answer(lps, distances)
    assert got == 2.0  # the samples equal to the answer: -4 and -2; the better is -2
    want = polygraph.MaximumSequenceProbability()({"greedy_log_likelihoods": [[-2.0]]})[0]
    assert got == pytest.approx(want)
    assert msp_of_answer([-3.0, -1.0], [0.5, 0.25]) == 1.0  # none equal: the closest one


def test_the_scorer_adds_white_box_columns_only_with_log_probs():
    import pipeline

    records = [
        {
            "id": "q",
            "question": "Capital of France?",
            "responses": ["Paris", "Paris", "Lyon"],
            "logprobs": [-1.0, -2.0, -3.0],
        }
    ]
    df = pipeline.score(records, task="classes")
    lp_paris = math.log(math.exp(-1) + math.exp(-2))
    assert df["whitebox_semantic_entropy"].iloc[0] == pytest.approx(-(2 * lp_paris - 3) / 3)
    assert df["whitebox_msp"].iloc[0] == pytest.approx(1.0)  # the best "Paris" sample
    plain = pipeline.score([["Paris", "Paris", "Lyon"]], task="classes")
    assert not {"whitebox_msp", "whitebox_semantic_entropy"} & set(plain)
