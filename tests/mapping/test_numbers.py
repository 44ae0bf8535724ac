"""The reals g_T: every expected value below is written by hand from the response text."""

import math

import pytest

from pipeline.mapping.numbers import parse_number

CASES = [
    ("42", 42.0),
    ("The answer is 42.", 42.0),
    ("About 8.3 million people (2020)", 8_300_000.0),  # first number; magnitude word applied
    ("$1,234,567.89", 1_234_567.89),
    ("1 234 567", 1_234_567.0),
    ("1\u202f000 km", 1000.0),
    ("3,5", 3.5),  # decimal comma: a thousands comma needs three digits after it
    ("1,234", 1234.0),
    ("-4.5e-3", -0.0045),
    ("\u22127 degrees", -7.0),
    ("6.02e23", 6.02e23),
    ("1.2 x 10^5", 120_000.0),
    ("1.2\u00d710^-3", 0.0012),
    ("10^6", 1e6),  # a power: "^" or "**"
    ("2**10 = 1024", 1024.0),
    ("-2^2", -4.0),  # the sign applies to the power, as in arithmetic
    (
        "10\u00b2",
        100.0,
    ),  # a superscript after a digit is an exponent (pipeline.text.normal_forms.clean_text)
    ("45%", 45.0),  # a percent sign is a unit: stripped, not divided
    ("3/4", 0.75),
    ("2 1/2 cups", 2.5),
    ("40k", 40_000.0),
    ("2.5 bn", 2.5e9),
    ("212 \u00b0F", 212.0),
    ("eight and a half million", 8_500_000.0),
    ("twenty-one", 21.0),
    ("two hundred and five", 205.0),
    ("one thousand two hundred", 1200.0),
    ("a dozen", 12.0),
    ("minus three", -3.0),
    ("Step 1: 3 + 4 = 7\n#### 7", 7.0),  # the number after the last answer marker
    ("x = 12 so the answer is 14", 14.0),
    ("In 2019 it was 12", 12.0),  # a year that frames the answer is not the answer
    ("It landed in 1969.", 1969.0),  # ... unless it is the only number
    ("Apollo 11 landed on July 20, 1969.", 1969.0),  # a name's number and a date's day are not
    ("The Eiffel Tower is 330 metres (1,083 ft) tall.", 330.0),  # a conversion in parentheses
    ("Around 70-71%.", 70.5),  # a range: its midpoint
    ("It varies between 363,000 and 405,000 km.", 384_000.0),
    ("15% of 200 is 30.", 30.0),  # "is" after an expression marks its result
    ("One eighth, or 0.125.", 0.125),
    ("Fifty, since Hawaii joined in 1959.", 50.0),  # number words are candidates too
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_parse_number(text, expected):
    assert parse_number(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "no idea", "I can't recall", None, "1e999", "5/0"])
def test_no_number_is_none_never_an_error(text):
    assert parse_number(text) is None


def test_bytes_are_decoded():
    assert parse_number(b"about 17 apples") == 17.0
    assert not math.isnan(parse_number("0") or 0.0)
