"""The graph reader (pipeline/tasks/graphs/reading.py): rule triples, the extractor's output,
graphs merged across samples and g_T^-1."""

from pipeline.tasks.graphs.reading import (
    GraphExtractor,
    extract_triples,
    graph_to_text,
    merge_graphs,
    parse_triples_output,
)

from .._equivalences import by_head_word


def test_rule_triples_overlap_across_paraphrases():
    a = extract_triples(
        "Marie Curie won the Nobel Prize in Physics in 1903. She was born in Warsaw."
    )
    b = extract_triples(
        "In 1903, Marie Curie won the Nobel Prize in Physics. Marie Curie was born in Warsaw, Poland."
    )
    assert a == frozenset(
        {("marie curie", "won", "nobel prize"), ("marie curie", "born in", "warsaw")}
    )
    assert a == b
    c = extract_triples("The storm killed 12 people and destroyed hundreds of homes in Florida.")
    assert c == frozenset(
        {("storm", "kill", "12 people"), ("storm", "destroy", "hundreds of homes")}
    )
    assert extract_triples("I do not know the answer.") is None


def test_parse_triples_output_forms():
    assert parse_triples_output(
        "Marie Curie | won | Nobel Prize\n- (Curie, was born in, Warsaw)"
    ) == frozenset({("marie curie", "won", "nobel prize"), ("curie", "born in", "warsaw")})
    assert parse_triples_output('[["Paris", "is capital of", "France"]]') == frozenset(
        {("paris", "capital of", "france")}
    )
    assert parse_triples_output("no triples here") is None


def test_merge_graphs_clusters_entities_and_relations():
    g1 = frozenset({("Marie Curie", "won", "Nobel Prize")})
    g2 = frozenset(
        {("marie curie", "won", "nobel prize in physics"), ("Marie Curie", "born in", "Warsaw")}
    )
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
    out = ex.map_prompt(
        ["Curie won the prize. She was born in Warsaw.", "", "Curie won the prize."]
    )
    assert out == [
        frozenset({("curie", "won", "prize"), ("curie", "born in", "warsaw")}),
        None,
        frozenset({("curie", "won", "prize")}),
    ]
    assert (ex.n_responses, ex.n_failures) == (3, 1)


def test_graph_to_text_is_sorted_sentences():
    g = frozenset({("marie curie", "won", "nobel prize"), ("marie curie", "born in", "warsaw")})
    assert graph_to_text(g) == "Marie curie born in warsaw. Marie curie won nobel prize."
    assert graph_to_text(frozenset()) == "" and graph_to_text(None) == ""
