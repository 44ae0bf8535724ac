"""Exact outputs of the two public parsers on well-formed and semi-formed responses."""

import math

import pytest

from pipeline.mapping import extract_answers, parse_distribution
from pipeline.mapping.parsing import parse_probability

IDK = {"I don't know": 1.0}

DISTRIBUTION_TABLE = [
    # the paper's JSON format
    (
        '{"items":[{"answer":"Atlantic","p":0.55},{"answer":"Pacific","p":0.45}]}',
        {"Atlantic": 0.55, "Pacific": 0.45},
    ),
    ('{"items":[{"answer":"I don\'t know","p":1.0}]}', IDK),
    # the paper's own (broken) few-shot example, which models copy
    (
        '{"items":[{"answer":"Atlantic,"p":0.55},{"answer":"Pacific,"p":0.45}]}',
        {"Atlantic": 0.55, "Pacific": 0.45},
    ),
    # code fences, leading/trailing text, single quotes, trailing commas
    (
        'Sure! Here it is:\n```json\n{"items":[{"answer":"Paris","p":0.9},{"answer":"Lyon","p":0.1}]}\n```\nHope it helps.',
        {"Paris": 0.9, "Lyon": 0.1},
    ),
    ("{'Atlantic': 0.5, 'Pacific': 0.5,}", {"Atlantic": 0.5, "Pacific": 0.5}),
    ('The distribution is {"Paris": 0.7, "Lyon": 0.3} as requested.', {"Paris": 0.7, "Lyon": 0.3}),
    # plain JSON objects/lists
    (
        '[{"answer": "Paris", "probability": "70%"}, {"answer": "Lyon", "probability": "30%"}]',
        {"Paris": 0.7, "Lyon": 0.3},
    ),
    ('[["Paris", 0.7], ["Lyon", 0.2]]', {"Paris": 0.7, "Lyon": 0.2}),
    ('{"answer": "Paris", "p": 0.9}', {"Paris": 0.9}),
    ('[{"Atlantic": 0.55}, {"Pacific": 0.45}]', {"Atlantic": 0.55, "Pacific": 0.45}),
    ('{"answers": {"Atlantic": "3/4", "Pacific": "1/4"}}', {"Atlantic": 0.75, "Pacific": 0.25}),
    # bare numbers > 1 are percentages (the whole response is scaled)
    ('{"Atlantic": 55, "Pacific": 45}', {"Atlantic": 0.55, "Pacific": 0.45}),
    # line formats
    ("Atlantic: 55%\nPacific: 45%", {"Atlantic": 0.55, "Pacific": 0.45}),
    ("- Atlantic (55%)\n- Pacific (45%)", {"Atlantic": 0.55, "Pacific": 0.45}),
    ("1. Atlantic - 0.55\n2. Pacific - 0.45", {"Atlantic": 0.55, "Pacific": 0.45}),
    ("* Atlantic = 0.6\n* Pacific = 0.4", {"Atlantic": 0.6, "Pacific": 0.4}),
    ("Atlantic 55%, Pacific 45%", {"Atlantic": 0.55, "Pacific": 0.45}),
    (
        "Atlantic with probability 0.6, Pacific with probability 0.4",
        {"Atlantic": 0.6, "Pacific": 0.4},
    ),
    ("Here are my answers:\nParis: 0.9\nLyon: 0.1\nThese sum to one.", {"Paris": 0.9, "Lyon": 0.1}),
    ("World War 2: 60%\nWorld War 1: 40 percent", {"World War 2": 0.6, "World War 1": 0.4}),
    ("The answer is Paris (probability 0.9)", {"Paris": 0.9}),
    ("**Paris**: 0,8\n**Lyon**: 0,2", {"Paris": 0.8, "Lyon": 0.2}),
    # duplicates merged by canonical label, first surface form kept, NOT renormalised
    (
        "Pacific Ocean: 0.3\nthe pacific ocean: 0.2\nAtlantic: 0.2",
        {"Pacific Ocean": 0.5, "Atlantic": 0.2},
    ),
    (
        '{"items":[{"answer":"Paris","p":0.2},{"answer":"Lyon","p":0.2}]}',
        {"Paris": 0.2, "Lyon": 0.2},
    ),
    # "I don't know" as the paper's prompt prescribes
    ("I don't know", IDK),
    ("I'm not sure.", IDK),
    # rejected: negative, NaN, infinite, > 100, zero total, nothing parseable
    ('{"Atlantic": -0.1, "Pacific": 1.1}', None),
    ('{"items":[{"answer":"Atlantic","p":NaN}]}', None),
    ("Atlantic: inf", None),
    ('{"Atlantic": 250}', None),
    ('{"Atlantic": 0, "Pacific": 0}', None),
    ("Paris", None),
    ("Atlantic: high\nPacific: low", None),
    ("", None),
]


@pytest.mark.parametrize(("text", "expected"), DISTRIBUTION_TABLE)
def test_parse_distribution_table(text, expected):
    got = parse_distribution(text)
    if expected is None:
        assert got is None
    else:
        assert got is not None and list(got) == list(expected)  # keys and their order
        assert got == pytest.approx(expected, abs=1e-12)


def test_parse_distribution_accepts_bytes_and_none():
    assert parse_distribution(b'{"Paris": 0.6, "Lyon": 0.4}') == {"Paris": 0.6, "Lyon": 0.4}
    assert parse_distribution(None) is None
    assert parse_distribution(b"Paris: 50%\n\xff\xfe: 50%") == {
        "Paris": 0.5
    }  # U+FFFD label dropped


def test_parse_probability_forms():
    assert parse_probability("55%") == (55.0, True)
    assert parse_probability(" 0.25 ") == (0.25, False)
    assert parse_probability("1/4") == (0.25, False)
    assert parse_probability("12 percent") == (12.0, True)
    assert parse_probability(True) is None and parse_probability("high") is None
    assert math.isnan(parse_probability("1/0")[0])  # rejected later by the caller


SET_TABLE = [
    (
        "The Atlantic and Pacific Oceans.",
        None,
        {"atlantic", "pacific"},
    ),  # a shared plural head is dropped
    (
        "German, French, Italian, and Romansh are the four official languages.",
        None,
        {"german", "french", "italian", "romansh"},
    ),
    (
        "The oceans that border the USA are the Atlantic and the Pacific.",
        None,
        {"atlantic", "pacific"},
    ),
    (
        "Both the Atlantic and Pacific Ocean border the USA.",
        "Which ocean borders the USA?",
        {"atlantic", "pacific"},
    ),
    ("Paris is the capital of France.", None, {"paris"}),
    ("The answer is Paris, because it is the largest city.", None, {"paris"}),
    ("The answers are: Atlantic; Pacific; Arctic", None, {"atlantic", "pacific", "arctic"}),
    ("I think it's probably Paris.", None, {"paris"}),
    ("I'm not sure, but I think Paris", None, {"paris"}),
    (
        "- Atlantic Ocean\n- Pacific Ocean\n* Arctic Ocean",
        None,
        {"atlantic ocean", "pacific ocean", "arctic ocean"},
    ),
    ("1. Mercury\n2. Venus\n3. Earth", None, {"mercury", "venus", "earth"}),
    (
        "Leonardo da Vinci (1452-1519) painted it.",
        "Who painted the Mona Lisa?",
        {"leonardo da vinci"},
    ),
    ("Atlantic / Pacific or Arctic", None, {"atlantic", "pacific", "arctic"}),
    ("Spanish & Portuguese, etc.", None, {"spanish", "portuguese"}),
    ("French & Dutch", None, {"french", "dutch"}),
    ("Church & Dwight and Unilever", None, {"church and dwight", "unilever"}),
    ("Paris. It is also the largest city in France.", None, {"paris"}),
    ('["Atlantic", "Pacific"]', None, {"atlantic", "pacific"}),
    ("```\nAtlantic\nPacific\n```", None, {"atlantic", "pacific"}),
    ("The Atlantic and\nthe Pacific.", None, {"atlantic", "pacific"}),
    ("The Pacific, the pacific and THE PACIFIC!", None, {"pacific"}),
    ("I don't know.", None, set()),
    ("Sorry, I cannot answer that.", None, set()),
    ("", None, set()),
]


@pytest.mark.parametrize(("text", "question", "expected"), SET_TABLE)
def test_extract_answers_table(text, question, expected):
    assert extract_answers(text, question) == frozenset(expected)


def test_extract_answers_accepts_bytes_and_none():
    assert extract_answers(b"Atlantic, Pacific") == frozenset({"atlantic", "pacific"})
    assert extract_answers(None) == frozenset()
