"""Merging across samples (canonical + equivalence clustering), graphs, simplex helpers."""

import pytest

from pipeline.evaluation.matching import remap_distribution
from pipeline.mapping.labels import representatives
from pipeline.tasks.graphs.reading import (
    GraphExtractor,
    extract_triples,
    graph_to_text,
    merge_graphs,
    parse_triples_output,
)
from pipeline.tasks.sets.reading import SetExtractor, merge_sets, parse_extractor_output
from pipeline.tasks.simplex.reading import SimplexMapper, merge_distributions, renormalise


def by_head_word(question, labels):
    """A user-supplied equivalence: labels sharing their first word are one cluster.

    (The project's NLI/embedding `cluster` has the same signature; it is tested by its owner.)
    """
    firsts = {}
    return [firsts.setdefault(label.split()[0], len(firsts)) for label in labels]


def test_representatives_most_frequent_then_first_seen():
    occ = ["pacific ocean", "atlantic", "pacific", "pacific", "atlantic ocean"]
    assert representatives("q", occ, by_head_word) == {
        "pacific ocean": "pacific", "pacific": "pacific",  # "pacific" seen twice
        "atlantic": "atlantic", "atlantic ocean": "atlantic",  # tie 1-1: first seen
    }
    assert representatives("q", occ) == {x: x for x in occ}
    with pytest.raises(ValueError, match="one per label"):
        representatives("q", ["a", "b"], lambda q, labels: [0])


def test_set_extractor_merges_pacific_variants():
    samples = ["The Pacific Ocean and the Atlantic.", "the Pacific", "Pacific.", "I don't know", ""]
    ex = SetExtractor(method="rule", equivalence=by_head_word)
    assert ex.map_prompt("Which ocean is largest?", samples) == [
        frozenset({"pacific", "atlantic"}), frozenset({"pacific"}), frozenset({"pacific"}), frozenset(), None
    ]
    assert (ex.n_responses, ex.n_failures) == (5, 1)
    # without clustering, canonical form alone merges case/article/punctuation variants only
    assert merge_sets("q", [frozenset({"The Pacific."}), frozenset({"pacific ocean"})]) == [
        frozenset({"pacific"}), frozenset({"pacific ocean"})
    ]


def test_map_prompts_batches_and_splits_back():
    ex = SetExtractor(method="rule")
    out = ex.map_prompts(["q1", "q2"], [["Paris", "Lyon"], ["Rome, Milan"]])
    assert out == [[frozenset({"paris"}), frozenset({"lyon"})], [frozenset({"rome", "milan"})]]


def test_parse_extractor_output_forms():
    assert parse_extractor_output("Output:\nAtlantic Ocean\nPacific Ocean\n\nQ: Next question?\nA: foo\nOutput:\nFoo") == \
        frozenset({"atlantic ocean", "pacific ocean"})
    assert parse_extractor_output("- Atlantic\n2. Pacific\n\"Arctic\"") == frozenset({"atlantic", "pacific", "arctic"})
    assert parse_extractor_output("German, French; Italian") == frozenset({"german", "french", "italian"})
    assert parse_extractor_output("I don't know.") == frozenset()
    assert parse_extractor_output("") is None and parse_extractor_output(None) is None


def test_rule_triples_overlap_across_paraphrases():
    a = extract_triples("Marie Curie won the Nobel Prize in Physics in 1903. She was born in Warsaw.")
    b = extract_triples("In 1903, Marie Curie won the Nobel Prize in Physics. Marie Curie was born in Warsaw, Poland.")
    assert a == frozenset({("marie curie", "won", "nobel prize"), ("marie curie", "born in", "warsaw")})
    assert a == b
    c = extract_triples("The storm killed 12 people and destroyed hundreds of homes in Florida.")
    assert c == frozenset({("storm", "kill", "12 people"), ("storm", "destroy", "hundreds of homes")})
    assert extract_triples("I do not know the answer.") is None


def test_parse_triples_output_forms():
    assert parse_triples_output("Marie Curie | won | Nobel Prize\n- (Curie, was born in, Warsaw)") == frozenset(
        {("marie curie", "won", "nobel prize"), ("curie", "born in", "warsaw")}
    )
    assert parse_triples_output('[["Paris", "is capital of", "France"]]') == frozenset({("paris", "capital of", "france")})
    assert parse_triples_output("no triples here") is None


def test_merge_graphs_clusters_entities_and_relations():
    g1 = frozenset({("Marie Curie", "won", "Nobel Prize")})
    g2 = frozenset({("marie curie", "won", "nobel prize in physics"), ("Marie Curie", "born in", "Warsaw")})
    g3 = frozenset({("Marie", "won", "Nobel Prize")})
    merged = merge_graphs([g1, g2, g3, None], by_head_word)
    # entity clusters: {marie curie x3, marie x1} -> "marie curie"; {nobel prize x2, ... in physics x1} -> "nobel prize"
    assert merged == [
        frozenset({("marie curie", "won", "nobel prize")}),
        frozenset({("marie curie", "won", "nobel prize"), ("marie curie", "born in", "warsaw")}),
        frozenset({("marie curie", "won", "nobel prize")}),
        None,
    ]
    ex = GraphExtractor(method="rule")
    out = ex.map_prompt(["Curie won the prize. She was born in Warsaw.", "", "Curie won the prize."])
    assert out == [frozenset({("curie", "won", "prize"), ("curie", "born in", "warsaw")}), None,
                   frozenset({("curie", "won", "prize")})]
    assert (ex.n_responses, ex.n_failures) == (3, 1)


def test_graph_to_text_is_sorted_sentences():
    g = frozenset({("marie curie", "won", "nobel prize"), ("marie curie", "born in", "warsaw")})
    assert graph_to_text(g) == "Marie curie born in warsaw. Marie curie won nobel prize."
    assert graph_to_text(frozenset()) == "" and graph_to_text(None) == ""


def test_merge_distributions_sums_equivalent_answers():
    dists = [{"Pacific Ocean": 0.6, "the Pacific": 0.2, "Atlantic": 0.2}, None, {"pacific": 0.5, "Atlantic.": 0.25}]
    assert merge_distributions("q", dists) == [
        {"pacific ocean": 0.6, "pacific": 0.2, "atlantic": 0.2}, None, {"pacific": 0.5, "atlantic": 0.25}
    ]
    merged = merge_distributions("q", dists, by_head_word, renormalise_output=True)
    assert merged[0] == pytest.approx({"pacific": 0.8, "atlantic": 0.2})  # "pacific" 2 samples vs 1
    assert merged[2] == pytest.approx({"pacific": 0.5 / 0.75, "atlantic": 0.25 / 0.75})
    assert renormalise({"a": 0.0}) is None and renormalise(None) is None


def test_simplex_mapper_rule_path():
    m = SimplexMapper(method="rule", renormalise=True)
    out = m.map_prompt("q", ['{"items":[{"answer":"Atlantic","p":0.3},{"answer":"Pacific","p":0.3}]}', "garbage"])
    assert out == [pytest.approx({"atlantic": 0.5, "pacific": 0.5}), None]
    assert (m.n_responses, m.n_failures) == (2, 1)


def test_distribution_remapped_onto_reference_answers():
    answers = [["Pacific Ocean", "Pacific"], ["Atlantic Ocean", "the Atlantic"], ["Arctic"]]
    dist = {"pacific": 0.5, "Atlantic": 0.2, "the atlantic ocean": 0.05, "Arctic Ocean": 0.05,
            "Indian Ocean": 0.2}
    # alias, head noun ("Arctic Ocean" names "Arctic"); the Indian Ocean names no answer
    assert remap_distribution(dist, answers) == pytest.approx(
        {"pacific ocean": 0.5, "atlantic ocean": 0.25, "arctic": 0.05, "indian ocean": 0.2})
    assert remap_distribution({"x": 1.0}, []) == {"x": 1.0}


def test_bad_configuration_is_named():
    with pytest.raises(ValueError, match="method"):
        SetExtractor(method="gpt")
    with pytest.raises(ValueError, match="client"):
        SimplexMapper(method="llm")
    with pytest.raises(ValueError, match="one question per response"):
        SetExtractor().extract(["q"], ["a", "b"])
