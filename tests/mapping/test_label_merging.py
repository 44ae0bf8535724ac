"""Labels merged across a prompt's samples (`pipeline.mapping.labels.representatives`, shared by
the readers), distributions remapped onto reference answers, and the readers' settings checks.
Each task's own reading is tested beside it (tests/tasks/<task>/test_reading.py)."""

import pytest

from pipeline.evaluation.matching import remap_distribution
from pipeline.mapping.labels import representatives
from pipeline.tasks.sets.reading import SetExtractor
from pipeline.tasks.simplex.reading import SimplexMapper


def by_head_word(question, labels):
    """A user-supplied equivalence: labels sharing their first word are one cluster.

    (The project's NLI/embedding `cluster` has the same signature; it is tested by its owner.)
    """
    firsts = {}
    return [firsts.setdefault(label.split()[0], len(firsts)) for label in labels]


def test_representatives_most_frequent_then_first_seen():
    occ = ["pacific ocean", "atlantic", "pacific", "pacific", "atlantic ocean"]
    assert representatives("q", occ, by_head_word) == {
        "pacific ocean": "pacific",
        "pacific": "pacific",  # "pacific" seen twice
        "atlantic": "atlantic",
        "atlantic ocean": "atlantic",  # tie 1-1: first seen
    }
    assert representatives("q", occ) == {x: x for x in occ}
    with pytest.raises(ValueError, match="one per label"):
        representatives("q", ["a", "b"], lambda q, labels: [0])


def test_distribution_remapped_onto_reference_answers():
    answers = [["Pacific Ocean", "Pacific"], ["Atlantic Ocean", "the Atlantic"], ["Arctic"]]
    dist = {
        "pacific": 0.5,
        "Atlantic": 0.2,
        "the atlantic ocean": 0.05,
        "Arctic Ocean": 0.05,
        "Indian Ocean": 0.2,
    }
    # alias, head noun ("Arctic Ocean" names "Arctic"); the Indian Ocean names no answer
    assert remap_distribution(dist, answers) == pytest.approx(
        {"pacific ocean": 0.5, "atlantic ocean": 0.25, "arctic": 0.05, "indian ocean": 0.2}
    )
    assert remap_distribution({"x": 1.0}, []) == {"x": 1.0}


def test_bad_configuration_is_named():
    with pytest.raises(ValueError, match="method"):
        SetExtractor(method="gpt")
    with pytest.raises(ValueError, match="client"):
        SimplexMapper(method="llm")
    with pytest.raises(ValueError, match="one question per response"):
        SetExtractor().extract(["q"], ["a", "b"])
