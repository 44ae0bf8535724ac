"""Offline label merging: canonical equality or containment of content words, greedy clusters."""

import pytest

from pipeline.mapping.labels import LabelMerger, labels_equivalent


@pytest.mark.parametrize(
    "a,b,same",
    [
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
    ],
)
def test_labels_equivalent(a, b, same):
    assert labels_equivalent(a, b) is same
    assert labels_equivalent(b, a) is same


def test_greedy_clusters_against_first_member_do_not_chain():
    labels = [
        "pacific ocean",
        "atlantic",
        "pacific",
        "north korea",
        "south korea",
        "korea",
        "saturn",
        "jupiter",
        "da vinci",
        "leonardo da vinci",
        "leonardo",
    ]
    # "korea" is neither north nor south korea (qualifiers make other entities); "leonardo" is
    # compared with its cluster's first member "da vinci", not with "leonardo da vinci": no chains
    assert LabelMerger().cluster("Which?", labels) == [0, 1, 0, 2, 3, 4, 5, 6, 7, 7, 8]


def test_merge_by_chooses_how_a_prompts_labels_become_one_label_space(compose_cfg):
    """The set mapper with each `merge_by`, on the same responses: the label rule joins a name
    and its longer form; canonical form only keeps them apart; the paper config picks the rule
    for MAQA's sets and KGGen's clustering alone (canonical) for graphs."""
    from pipeline.config import mapper_config
    from pipeline.tasks.contract import MAPPERS, MapContext

    responses = ["The Pacific Ocean and the Atlantic.", "Pacific, Atlantic Ocean", "pacific"]
    question = "Which oceans border the USA?"

    def mapped(*overrides):
        cfg = compose_cfg("task=sets", *overrides)
        mapper = MAPPERS["sets"].build(mapper_config(cfg, "sets"), MapContext(cache_dir="."))
        return [sorted(s) for s in mapper(question, responses)]

    by_rule = mapped("mappers.sets.merge_by=rule")
    assert by_rule == [["atlantic", "pacific"], ["atlantic", "pacific"], ["pacific"]]
    assert mapped() == by_rule  # "equivalence" offline is the label rule
    assert mapped("mappers.sets.merge_by=canonical") == [
        ["atlantic", "pacific ocean"],
        ["atlantic", "pacific"],
        ["pacific"],
    ]
    assert mapped("mappers.sets.merge_by=rule", "task.extractor.merge_labels=false") == mapped(
        "mappers.sets.merge_by=canonical"
    )

    paper = compose_cfg("experiment=paper")
    assert mapper_config(paper, "sets").merge_by == "rule"
    assert not mapper_config(paper, "sets").judges_labels  # no DeBERTa on MAQA's labels
    assert mapper_config(paper, "graphs").merge_by == "canonical"
    assert mapper_config(paper, "simplex").judges_labels  # the paper's NLI merging (MAQA*)


def test_merge_by_names_the_choices_when_misspelt(compose_cfg):
    from pipeline.config import mapper_config
    from pipeline.runtime.errors import ConfigError

    with pytest.raises(ConfigError, match="merge_by.*equivalence, rule, canonical"):
        mapper_config(compose_cfg("task=sets", "mappers.sets.merge_by=nli"), "sets")
