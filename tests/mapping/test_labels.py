"""Offline label merging: canonical equality or containment of content words, greedy clusters."""

import pytest

from pipeline.mapping.labels import LabelMerger, labels_equivalent


@pytest.mark.parametrize("a,b,same", [
    ("Pacific Ocean", "the Pacific", True),
    ("Leonardo da Vinci", "da Vinci", True),
    ("German", "French", False),
    ("Saturn", "Jupiter", False),
    ("is", "is located in", False),  # function words alone absorb nothing
    ("is in", "is in", True),
    ("", "anything", False),
    ("New York", "york", False),  # a qualifier makes another place
    ("Northern Ireland", "Ireland", False),
    ("North Pacific", "Pacific", False),
    ("John Lennon", "Lennon", True),
    ("Antony and Cleopatra", "Cleopatra", True),
])
def test_labels_equivalent(a, b, same):
    assert labels_equivalent(a, b) is same
    assert labels_equivalent(b, a) is same


def test_greedy_clusters_against_first_member_do_not_chain():
    labels = ["pacific ocean", "atlantic", "pacific", "north korea", "south korea", "korea",
              "saturn", "jupiter", "da vinci", "leonardo da vinci", "leonardo"]
    # "korea" is neither north nor south korea (qualifiers make other entities); "leonardo" is
    # compared with its cluster's first member "da vinci", not with "leonardo da vinci": no chains
    assert LabelMerger().cluster("Which?", labels) == [0, 1, 0, 2, 3, 4, 5, 6, 7, 7, 8]
