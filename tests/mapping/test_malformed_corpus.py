"""Every parser and extractor of the map stage on a corpus of malformed model output.

The corpus (malformed_responses.json, built by build_malformed_corpus.py) holds 125 responses:
empty/whitespace, invalid JSON, NaN/negative/inf probabilities, nested junk, ~1 MB strings,
undecodable bytes, prompt echoes, wrong Python types, unicode oddities, prose junk. Nothing may
raise; every failure is counted and the counts are asserted exactly (reviewed by hand).
"""

import json
import math
import sys
from pathlib import Path

import pytest

from pipeline.clients.llm_client import LLMClient
from pipeline.mapping import extract_answers, parse_distribution
from pipeline.tasks.graphs.reading import GraphExtractor, extract_triples, parse_triples_output
from pipeline.tasks.sets.reading import SetExtractor, extract_answer_set, parse_extractor_output
from pipeline.tasks.simplex.reading import SimplexMapper

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from openai_stand_in import FakeOpenAIServer  # noqa: E402

CORPUS_PATH = Path(__file__).with_name("malformed_responses.json")


def materialise(entry: dict) -> object:
    """A corpus recipe as the object handed to the parsers."""
    kind = entry["kind"]
    if kind == "text":
        return entry["text"]
    if kind == "repeat":
        return entry["unit"] * entry["times"]
    if kind == "bytes_hex":
        return bytes.fromhex(entry["hex"])
    if kind == "value":
        return entry["value"]
    if kind == "nan":
        return math.nan
    raise ValueError(f"unknown corpus entry kind {kind!r}")


CORPUS = json.loads(CORPUS_PATH.read_text(encoding="utf-8"))
RESPONSES = [materialise(e) for e in CORPUS]
QUESTION = "Which oceans border the USA?"

# Responses of the corpus that parse_distribution DOES read, with what it reads (all others: None).
DISTRIBUTION_SUCCESSES = {
    35: {"Atlantic": 0.5},  # '{"items":[{"answer":"Atlantic","p":0.5},]' : one complete item
    109: {"I don't know": 1.0},  # "N/A"
    110: {"I don't know": 1.0},  # "As an AI language model, I cannot answer that."
    111: {"I don't know": 1.0},  # "Sorry, I cannot help with that."
    112: {"I don't know": 1.0},  # "I don't know."
    113: {"I don't know": 1.0},  # "I do not know the answer."
}
# Refusals: a valid EMPTY answer set for the set extractors (not a failure).
REFUSALS = {109, 110, 111, 112, 113}


def test_corpus_size_and_kinds():
    assert len(CORPUS) == 125
    assert {e["kind"] for e in CORPUS} == {"text", "repeat", "bytes_hex", "value", "nan"}
    assert (
        sum(isinstance(r, str) and len(r.encode()) >= 1_000_000 for r in RESPONSES) == 7
    )  # ~1 MB each


# A hang guard, not a speed target (the corpus has ~1 MB responses; catastrophic regex
# backtracking would run for hours): pytest-timeout fails the test instead of stalling the suite.
@pytest.mark.timeout(300)
def test_parse_distribution_on_corpus():
    results = [parse_distribution(r) for r in RESPONSES]
    got = {i: d for i, d in enumerate(results) if d is not None}
    assert got == DISTRIBUTION_SUCCESSES
    assert sum(d is None for d in results) == 119


# What the set rules (answer_rules) read from responses whose reading changed with them: answers
# inside otherwise invalid distributions, "label: value" lines (the value is not an answer), and
# junk prose cut at its first verb ("lorem ipsum dolor sit ...").
SET_SUCCESSES = {
    21: {"atlantic"},
    27: {"atlantic"},
    28: {"atlantic"},
    42: {"atlantic"},
    61: {"lorem ipsum dolor"},
    43: {"atlantic"},
    44: {"atlantic"},
    45: {"atlantic"},
    48: {"atlantic"},
    49: {"atlantic"},
    57: {"atlantic", "pacific"},
    119: {"atlantic", "pacific"},
    123: {"atlantic"},
    124: {"p"},
    # numbers are answers ("How many moons ...?" -> [1, 2]), and the lone letter "A" is a name
    # (an option, Vitamin A's letter), not a dropped article
    23: {"1", "2", "3"},
    31: {"a"},
    34: {"1", "2", "3"},
    82: {"1", "2"},
}


def test_rule_set_extractors_on_corpus():
    answers = [extract_answers(r) for r in RESPONSES]
    assert all(isinstance(a, frozenset) for a in answers)
    assert sum(not a for a in answers) == 77
    assert {i: set(a) for i, a in enumerate(answers) if i in SET_SUCCESSES} == SET_SUCCESSES
    sets = [extract_answer_set(r) for r in RESPONSES]
    assert sum(s is None for s in sets) == 72
    assert {i for i, s in enumerate(sets) if s == frozenset()} == REFUSALS
    extractor_out = [parse_extractor_output(r) for r in RESPONSES]
    # one JSON reader for responses and extractor output: answers inside objects and numbers
    # count for both (the 11 entries extract_answers reads from JSON above)
    assert sum(s is None for s in extractor_out) == 73
    assert {i for i, s in enumerate(extractor_out) if s is not None and i in SET_SUCCESSES} >= {
        21,
        27,
        28,
        42,
        48,
        49,
        57,
    }
    assert {i for i, s in enumerate(extractor_out) if s == frozenset()} == REFUSALS


def test_rule_graph_extractors_on_corpus():
    triples = [extract_triples(r) for r in RESPONSES]
    assert (
        sum(t is None for t in triples) == 121
    )  # "Q: Which oceans border the USA?" is a question, not a fact (was 120)
    assert all(
        t is None or all(len(x) == 3 and all(isinstance(p, str) and p for p in x) for x in t)
        for t in triples
    )
    assert sum(parse_triples_output(r) is None for r in RESPONSES) == 125


def test_mapper_classes_count_failures_on_corpus():
    sets = SetExtractor(method="rule")
    merged = sets.map_prompt(QUESTION, RESPONSES)
    assert (sets.n_responses, sets.n_failures) == (125, 72)
    assert sum(m is None for m in merged) == 72
    simplex = SimplexMapper(method="rule", renormalise=True)
    dists = simplex.map_prompt(QUESTION, RESPONSES)
    assert (simplex.n_responses, simplex.n_failures) == (125, 119)
    assert {i: d for i, d in enumerate(dists) if d is not None} == {
        35: {"atlantic": 1.0},
        **{i: {"i dont know": 1.0} for i in REFUSALS},
    }
    graphs = GraphExtractor(method="rule")
    graphs.map_prompt(RESPONSES)
    assert (graphs.n_responses, graphs.n_failures) == (125, 121)


def test_llm_extractors_on_corpus_through_loopback_server(tmp_path):
    """The corpus through the OpenAI-compatible path (real HTTP, rule-answering server)."""
    with FakeOpenAIServer() as server:
        client = LLMClient(
            model="rule-server",
            base_url=server.base_url,
            cache_dir=tmp_path,
            max_workers=4,
            backoff_base=0.01,
        )
        sets = SetExtractor(method="llm", client=client)
        out = sets.extract([QUESTION] * len(RESPONSES), RESPONSES)
        # The server answers "I don't know" when its rules find no item, so nothing fails to
        # parse; the 77 responses where extract_answers finds nothing map to the empty set.
        assert (sets.n_responses, sets.n_failures) == (125, 0)
        assert sum(o == frozenset() for o in out) == 77
        simplex = SimplexMapper(method="llm", client=client)
        dists = simplex.parse([QUESTION] * len(RESPONSES), RESPONSES)
        assert (simplex.n_responses, simplex.n_failures) == (125, 0)
        assert {i: d for i, d in enumerate(dists) if d != {"I don't know": 1.0}} == {
            35: {"Atlantic": 0.5}
        }
        graphs = GraphExtractor(method="llm", client=client)
        graphs.extract(RESPONSES)
        assert (graphs.n_responses, graphs.n_failures) == (125, 121)  # as the rule extractor
        # identical prompts (e.g. the several empty responses) are served from the cache
        assert server.state.requests == client.stats.calls
        assert client.stats.calls + client.stats.cache_hits == 3 * 125
