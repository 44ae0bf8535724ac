"""The set reader (pipeline/tasks/sets/reading.py): rule extraction merged across samples, and
the LLM extractor's output parsed."""

from pipeline.tasks.sets.reading import SetExtractor, merge_sets, parse_extractor_output

from .._equivalences import by_head_word


def test_set_extractor_merges_pacific_variants():
    samples = ["The Pacific Ocean and the Atlantic.", "the Pacific", "Pacific.", "I don't know", ""]
    ex = SetExtractor(method="rule", equivalence=by_head_word)
    assert ex.map_prompt("Which ocean is largest?", samples) == [
        frozenset({"pacific", "atlantic"}),
        frozenset({"pacific"}),
        frozenset({"pacific"}),
        frozenset(),
        None,
    ]
    assert (ex.n_responses, ex.n_failures) == (5, 1)
    # without clustering, canonical form alone merges case/article/punctuation variants only
    assert merge_sets("q", [frozenset({"The Pacific."}), frozenset({"pacific ocean"})]) == [
        frozenset({"pacific"}),
        frozenset({"pacific ocean"}),
    ]


def test_map_prompts_batches_and_splits_back():
    ex = SetExtractor(method="rule")
    out = ex.map_prompts(["q1", "q2"], [["Paris", "Lyon"], ["Rome, Milan"]])
    assert out == [[frozenset({"paris"}), frozenset({"lyon"})], [frozenset({"rome", "milan"})]]


def test_parse_extractor_output_forms():
    assert parse_extractor_output(
        "Output:\nAtlantic Ocean\nPacific Ocean\n\nQ: Next question?\nA: foo\nOutput:\nFoo"
    ) == frozenset({"atlantic ocean", "pacific ocean"})
    assert parse_extractor_output('- Atlantic\n2. Pacific\n"Arctic"') == frozenset(
        {"atlantic", "pacific", "arctic"}
    )
    assert parse_extractor_output("German, French; Italian") == frozenset(
        {"german", "french", "italian"}
    )
    assert parse_extractor_output("I don't know.") == frozenset()
    assert parse_extractor_output("") is None and parse_extractor_output(None) is None
