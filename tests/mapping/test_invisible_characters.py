"""Invisible and compatibility characters: every reader of model output reads the text as
`pipeline.text.normal_forms.clean_text` gives it, so "Paris\u200b", "Pa\u00adris" and "\u202aParis\u202c"
are "Paris" in every latent space, and a full-width or superscript number is the number a
reader sees."""

from __future__ import annotations

import unicodedata

import pytest

from pipeline.mapping import extract_answers, parse_distribution
from pipeline.mapping.extractor import extraction_prompt
from pipeline.mapping.labels import LabelMerger, labels_equivalent
from pipeline.mapping.numbers import parse_number
from pipeline.mapping.parsing import parse_probability
from pipeline.mapping.response_text import is_refusal, json_answer_strings
from pipeline.tasks.sets.reading import extract_answer_set, parse_extractor_output
from pipeline.text.normal_forms import INVISIBLE, canonical_label, clean_text

# zero-width space / non-joiner / joiner, word joiner, BOM, soft hyphen, bidi controls
LISTED = (
    "\u200b\u200c\u200d\u2060\ufeff\u00ad\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
    "\u2066\u2067\u2068\u2069\u061c"
)
PLACES = [
    lambda c: f"Paris{c}",
    lambda c: f"{c}Paris",
    lambda c: f"Pa{c}ris",
    lambda c: f"{c}Paris{c}",
]


def test_the_invisible_characters_are_the_listed_ones():
    assert INVISIBLE == frozenset(LISTED)
    assert all(unicodedata.category(c) == "Cf" for c in INVISIBLE)


@pytest.mark.parametrize("char", LISTED, ids=lambda c: f"U+{ord(c):04X}")
def test_clean_text_drops_each_invisible_character_wherever_it_stands(char):
    for place in PLACES:
        assert clean_text(place(char)) == "Paris"
    assert clean_text(f"4{char}2 km") == "42 km"


@pytest.mark.parametrize(
    ("text", "clean"),
    [
        ("\ufb01sh", "fish"),  # ligature
        ("\uff14\uff12", "42"),  # full-width digits
        ("\uff30aris", "Paris"),  # full-width letter
        ("1\u00a0000\u202f000", "1 000 000"),  # no-break spaces
        ("caf\u0065\u0301", "caf\u00e9"),  # composed
        ("m\u00b2", "m2"),
        ("H\u2082O", "H2O"),
        ("x\u00b2", "x2"),  # not after a digit: NFKC
        ("10\u00b2", "10^2"),
        ("6.02\u00d710\u00b2\u00b3", "6.02\u00d710^23"),  # an exponent
        ("10\u207b\u00b3", "10^\u22123"),
        ("2\u00bd", "2 1/2"),
        ("\u00bd", "1/2"),
        ("1\u20442", "1/2"),  # fractions
        ("Paris", "Paris"),
        ("", ""),
        (None, ""),
        (b"Pa\xe2\x80\x8bris", "Paris"),
    ],
)
def test_clean_text_folds_compatibility_characters(text, clean):
    assert clean_text(text) == clean


def test_clean_text_is_idempotent_and_leaves_nothing_invisible():
    """Every character of the Basic Multilingual Plane, alone and after a digit."""
    for code in range(0x80, 0x10000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        for s in (chr(code), f"1{chr(code)}", f"1{chr(code)}{chr(code)}"):
            once = clean_text(s)
            assert clean_text(once) == once, (hex(code), once)
            assert not INVISIBLE & set(once), hex(code)


@pytest.mark.parametrize("char", LISTED, ids=lambda c: f"U+{ord(c):04X}")
def test_every_reader_reads_past_invisible_characters(char):
    q = "What is the capital of France?"
    merger = LabelMerger()
    for place in PLACES:
        text = place(char)
        assert canonical_label(text) == "paris"
        assert labels_equivalent(text, "Paris")
        assert merger.cluster(q, [text, "Paris"]) == [0, 0]
        assert extract_answers(f"The capital is {text}.", q) == {"paris"}
        assert extract_answer_set(text, q) == {"paris"}
        assert parse_extractor_output(f"{text}\nLyon") == {"paris", "lyon"}
        assert parse_distribution(f'{{"{text}": 0.5, "Lyon": 0.5}}') == {"Paris": 0.5, "Lyon": 0.5}
        assert parse_distribution(f"{text}: 55%\nLyon: 45%") == {"Paris": 0.55, "Lyon": 0.45}
        assert json_answer_strings(f'["{text}"]') == ["Paris"]
        assert extraction_prompt("answer_set", q, text) == extraction_prompt(
            "answer_set", q, "Paris"
        )
    assert parse_number(f"4{char}2") == 42.0
    assert parse_number(f"{char}1{char},{char}000 km") == 1000.0
    assert is_refusal(f"{char}I don{char}'t know")
    assert parse_probability(f"0.5{char}") == (0.5, False)


def test_json_escapes_of_invisible_characters_are_read_too():
    """A JSON string's escapes write the characters after the text was cleaned."""
    assert json_answer_strings('["Paris\\u200b", "Ly\\u00adon"]') == ["Paris", "Lyon"]
    assert parse_distribution('{"Paris\\u200b": 0.5, "\\u202aLyon\\u202c": 0.5}') == {
        "Paris": 0.5,
        "Lyon": 0.5,
    }
    assert parse_distribution('[{"answer": "Paris", "p": "55\\u200b%"}]') == {"Paris": 0.55}
    assert parse_extractor_output('["Paris\\ufeff", "Lyon"]') == {"paris", "lyon"}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("\uff14\uff12", 42.0),
        ("\uff11\uff0c\uff10\uff10\uff10 km", 1000.0),  # full-width
        ("10\u00b2", 100.0),
        ("10\u00b3 m", 1000.0),
        ("10\u207b\u00b3", 0.001),  # an exponent
        ("6.02\u00d710\u00b2\u00b3", 6.02e23),
        ("1.2 \u00d7 10\u207b\u00b3", 0.0012),
        ("5\u00b2 = 25", 25.0),
        ("About 551,695 km\u00b2.", 551_695.0),
        ("42 m\u00b2", 42.0),  # a unit's square: no exponent
        ("2\u00bd cups", 2.5),
        ("\u00bd", 0.5),
        ("\u00be of them", 0.75),
        ("1\u20444", 0.25),
    ],
)
def test_numbers_read_as_a_reader_sees_them(text, value):
    assert parse_number(text) == value


def test_a_class_with_an_invisible_character_is_the_same_class():
    """The issue's case end to end: three samples of "Paris", one with U+200B (and the same
    with a soft hyphen, bidi controls and a BOM) are one class with Bayes risk 0."""
    import pipeline.scorer.run

    prompts = [
        ["Paris\u200b", "Paris", "Paris"],
        ["Pa\u00adris", "Paris", "Paris"],
        ["\u202aParis\u202c", "Paris", "Paris"],
        ["\ufeffParis", "\u200eParis", "Paris"],
    ]
    df = pipeline.scorer.run.score(prompts, task="classes")
    assert df["bayes_risk"].tolist() == [0.0] * 4
    assert df["confidence"].tolist() == [1.0] * 4
    assert df["bayes_text"].tolist() == ["Paris"] * 4
