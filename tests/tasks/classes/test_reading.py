"""Question-aware reading of single answers (issue 51): the answer is what the question asks
for, not what it already names. Expected values written by hand; the chat-answer corpus
(tests/corpora/chat_answers_corpus.yaml, written independently of these rules) is measured
in test_chat_corpus_reading below and in scripts/bench_extraction.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from pipeline.tasks.classes.reading import read_single_answer
from pipeline.tasks.classes.task import class_key

CASES = [  # (question, response, the answer a careful reader takes)
    (
        "Who wrote Romeo and Juliet?",
        "The play *Romeo and Juliet* was written by the English playwright William Shakespeare in "
        "the 1590s.",
        "William Shakespeare",
    ),
    (
        "Who wrote Romeo and Juliet?",
        "Romeo and Juliet was written by William Shakespeare.",
        "William Shakespeare",
    ),
    (
        "In which year did the Berlin Wall fall?",
        "The Berlin Wall fell on November 9, 1989, when East German authorities opened the border.",
        "1989",
    ),
    ("When did World War II end?", "The war ended in 1945: Germany surrendered on 8 May.", "1945"),
    ("What is the capital of Canada?", "The capital of Canada is **Ottawa**.", "Ottawa"),
    ("What is the capital of Australia?", "It's Canberra, not Sydney.", "Canberra"),
    (
        "Which country won the 2018 FIFA World Cup?",
        "France won the 2018 FIFA World Cup, beating Croatia 4-2 in the final.",
        "France",
    ),
    (
        "Which country won the 2018 FIFA World Cup?",
        "The 2018 tournament in Russia was won by Croatia.",
        "Croatia",
    ),
    ("What is the currency of Japan?", "The currency of Japan is the yen (¥).", "yen"),
    (
        "Which city hosted the 2016 Summer Olympics?",
        "The 2016 Summer Olympics took place in Tokyo, Japan.",
        "Tokyo",
    ),
    ("Who composed the Moonlight Sonata?", "Beethoven wrote it, not Chopin.", "Beethoven"),
    (
        "Who wrote the Harry Potter books?",
        "The Harry Potter books were written by J.K. Rowling.",
        "J.K. Rowling",
    ),
    ("What is the smallest prime number?", "**2** - it's also the only even prime.", "2"),
    ("Where is the Eiffel Tower?", "I'm sorry, but I can't verify the location.", ""),
    ("Which sport is played at Wimbledon?", "Wimbledon is famous for cricket.", "cricket"),
    (
        "Which city hosted the 1992 Summer Olympics?",
        "The 1992 Summer Olympics were hosted by Barcelona, Spain.",
        "Barcelona",
    ),
    (
        "In which country is most of the Atacama Desert located?",
        "Chile \u2014 the desert covers much of the north of the country.",
        "Chile",
    ),
    ("What is the capital of France?", "Paris, France", "Paris, France"),  # kept whole
    # the packaged SmolLM2's own TriviaQA answers (default run): the maker named with the work,
    # a possessor, "a type of X", and a subject that names the answer (not its predicate)
    (
        "Who wrote the novel Nineteen Eighty-Four?",
        'The novel "Nineteen Eighty-Four" by George Orwell is a dystopian',
        "George Orwell",
    ),
    (
        "Who wrote the play Romeo and Juliet?",
        "The play Romeo and Juliet by William Shakespeare was written by the 18th",
        "William Shakespeare",
    ),
    (
        "Which physicist developed the theory of general relativity?",
        "Einstein's theory of general relativity is a cornerstone of modern physics.",
        "Einstein",
    ),
    (
        "Which fruit is the main ingredient of guacamole?",
        "The main ingredient of guacamole is a type of avocado.",
        "avocado",
    ),
    (
        "Which musical instrument usually has 88 keys?",
        "The instrument that has 88 keys is the piano.",
        "piano",
    ),
    (
        "What is the official language of Brazil?",
        "The main language spoken in Brazil is Spanish.",
        "Spanish",
    ),
    (
        "Who was the first person to walk on the Moon?",
        "The first person to walk on the Moon was Neil Armstrong. Buzz Aldrin followed him.",
        "Neil Armstrong",
    ),
    # no question rule applies: the general reader as before
    ("Which city is the capital of Australia?", "Canberra.", "Canberra"),
    ("Who wrote the novel Nineteen Eighty-Four?", "George Orwell.", "George Orwell"),
]


@pytest.mark.parametrize(("question", "text", "expected"), CASES)
def test_the_answer_is_what_the_question_asks_for(question, text, expected):
    assert read_single_answer(text, question) == expected


def test_a_number_question_reads_the_number_as_digits():
    assert class_key("A spider has **eight** legs.", "How many legs does a spider have?") == "8"


def _bench():
    path = Path(__file__).resolve().parents[3] / "scripts" / "bench_extraction.py"
    spec = importlib.util.spec_from_file_location("bench_extraction", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_chat_corpus_reading():
    """The corpus's per-response accuracy as measured on 2026-11-28 (docs/extraction.md): 308 of
    365 at first measure (the corpus written without reading the rules), 358 after the rules
    were developed on it (classes 146 -> 188 of 190; sets 162 -> 170 of 175); the held-out
    corpus 122 -> 125 of 150 at its first measure, 132 after its errors were looked at. A change
    that reads fewer right fails here."""
    bench = _bench()
    got = bench.evaluate_chat(bench.chat_corpus())
    assert got["n"] == 365
    assert got["classes"][0] >= 188 and got["sets"][0] >= 170
    held = bench.evaluate_chat(bench.chat_corpus("chat_answers_holdout.yaml"))
    assert held["n"] == 150 and held["right"] >= 132


SET_CASES = [  # (question, response, the labels a careful reader takes)
    (
        "Which oceans border the USA?",
        "The USA's coastline includes the Atlantic, Pacific, and Arctic Oceans.",
        {"atlantic", "pacific", "arctic"},
    ),  # the shared head "Oceans" dropped
    (
        "Which countries border Germany?",
        "Germany's neighbours include France, the Netherlands, Poland and Austria, among others.",
        {"france", "netherlands", "poland", "austria"},
    ),
    (
        "Which US states border Mexico?",
        "Texas and California border Mexico, and so do Arizona and New Mexico.",
        {"texas", "california", "arizona", "new mexico"},
    ),
    (
        "Who were the Beatles?",
        "They were Lennon, McCartney, Harrison and Starr, managed by Brian Epstein and produced by "
        "George Martin.",
        {"lennon", "mccartney", "harrison", "starr"},
    ),
    (
        "Which continents does Russia span?",
        "Russia spans Europe, Asia and North America.",
        {"europe", "asia", "north america"},
    ),
    # the agent of the act the question asks about is the answer (SmolLM2, maqa_star_bundled)
    (
        "Who invented the electric light bulb?",
        "The electric light bulb, invented by Humphry Davy in 1809.",
        {"humphry davy"},
    ),
    # "followed by" can name the next answer: kept
    (
        "Who walked on the Moon during Apollo 11?",
        "Armstrong was first, followed by Aldrin about 19 minutes later.",
        {"armstrong", "aldrin"},
    ),
]


@pytest.mark.parametrize(("question", "text", "expected"), SET_CASES)
def test_set_answers_of_chat_sentences(question, text, expected):
    from pipeline.mapping import extract_answers

    assert set(extract_answers(text, question)) == expected
