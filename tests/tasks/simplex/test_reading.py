"""The simplex reader (pipeline/tasks/simplex/reading.py): distributions merged across samples
(probabilities summed) and the rule path."""

import pytest

from pipeline.tasks.simplex.reading import SimplexMapper, merge_distributions, renormalise

from .._equivalences import by_head_word


def test_merge_distributions_sums_equivalent_answers():
    dists = [
        {"Pacific Ocean": 0.6, "the Pacific": 0.2, "Atlantic": 0.2},
        None,
        {"pacific": 0.5, "Atlantic.": 0.25},
    ]
    assert merge_distributions("q", dists) == [
        {"pacific ocean": 0.6, "pacific": 0.2, "atlantic": 0.2},
        None,
        {"pacific": 0.5, "atlantic": 0.25},
    ]
    merged = merge_distributions("q", dists, by_head_word, renormalise_output=True)
    assert merged[0] == pytest.approx({"pacific": 0.8, "atlantic": 0.2})  # "pacific" 2 samples vs 1
    assert merged[2] == pytest.approx({"pacific": 0.5 / 0.75, "atlantic": 0.25 / 0.75})
    assert renormalise({"a": 0.0}) is None and renormalise(None) is None


def test_simplex_mapper_rule_path():
    m = SimplexMapper(method="rule", renormalise=True)
    out = m.map_prompt(
        "q", ['{"items":[{"answer":"Atlantic","p":0.3},{"answer":"Pacific","p":0.3}]}', "garbage"]
    )
    assert out == [pytest.approx({"atlantic": 0.5, "pacific": 0.5}), None]
    assert (m.n_responses, m.n_failures) == (2, 1)
