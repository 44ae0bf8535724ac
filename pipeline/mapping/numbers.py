"""g_T for the `reals` task: one real number out of a free-form response (stdlib only).

`parse_number(text) -> float | None` never raises on model output. What it understands:

- digits with thousands separators ("1,234,567", "1_000", "1'000", "1 000 000" with thin or
  no-break spaces), decimals ("3.25", ".5", European "3,5" when the comma cannot be a
  thousands separator), signs ("-4", "+4", "\u22124"), scientific notation ("6.02e23",
  "1.2 x 10^5", "1.2\u00d710^-3", "6.02\u00d710\u00b2\u00b3"), powers ("10^6", "2**10",
  "10\u00b2" = 100), simple fractions ("3/4", "2 1/2", "2\u00bd");
- magnitude words and suffixes: thousand/million/billion/trillion, k, bn ("2.5 million" ->
  2.5e6, "40k" -> 40000);
- units and currency are stripped ("$1,200", "42 km", "45%" -> 45: a percent sign is a unit
  here, so a reference written "45%" compares equal);
- number words ("eight and a half million", "twenty-one", "a dozen") when no digit is present.

The text is read as `pipeline.text.normal_forms.clean_text` gives it: invisible characters dropped
("4\u200b2" is 42), full-width digits folded, superscripts after a digit an exponent.

Which number, when a response has several: the first one after the last answer marker
("####", "answer is", "answer:", "=", "\u2248"), otherwise the first one in the text
("About 8.3 million people (2020)" -> 8.3e6).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

from pipeline.text.normal_forms import clean_text, to_text

_MAGNITUDES = {
    "thousand": 1e3,
    "k": 1e3,
    "million": 1e6,
    "mln": 1e6,
    "mn": 1e6,
    "billion": 1e9,
    "bn": 1e9,
    "trillion": 1e12,
    "tn": 1e12,
}
_SPACES = "\u00a0\u202f\u2009 "  # no-break, narrow no-break, thin, plain
_NUMBER = re.compile(
    r"(?P<sign>[-+\u2212])?\s*[$\u20ac\u00a3\u00a5]?\s*"
    r"(?P<body>(?:\d{1,3}(?:(?:[,_'\u00a0\u202f\u2009]|(?<=\d) (?=\d{3}\b))\d{3})+|\d+)"
    r"(?:[.,]\d+)?|[.]\d+)"
    r"(?:\s*(?P<frac>/\s*\d+)|\s+(?P<mixed>\d+\s*/\s*\d+))?"
    r"(?:\s*(?:[eE](?P<exp>[-+\u2212]?\d+)|\s*[x\u00d7*]\s*10\s*(?:\^|\*\*)\s*(?P<exp10>[-+\u2212]?\d+)"
    r"|(?:\^|\*\*)\s*(?P<power>[-+\u2212]?\d{1,4})))?"
    r"(?:\s*(?P<mag>thousand|million|mln|mn|billion|bn|trillion|tn|k)\b)?",
    flags=re.IGNORECASE,
)
_MARKERS = re.compile(r"####|answer\s+is|answer\s*:|=|\u2248", flags=re.IGNORECASE)

_UNITS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "a": 1,
    "an": 1,
    "dozen": 12,
}
_TENS = {
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
_FRACTION_WORDS = {"half": 0.5, "quarter": 0.25}


def _body_to_decimal(body: str) -> Decimal:
    """ "1,234.5" / "1 234" / "3,5" -> Decimal, deciding what a comma means."""
    for ch in "_'" + _SPACES:
        body = body.replace(ch, "")
    if "," in body and "." in body:
        return Decimal(body.replace(",", ""))
    if "," in body:
        groups = body.split(",")
        # "1,234" / "12,345,678": thousands; "3,5" / "0,25": a decimal comma.
        if all(len(g) == 3 for g in groups[1:]) and len(groups[0]) <= 3:
            return Decimal(body.replace(",", ""))
        return Decimal(f"{''.join(groups[:-1])}.{groups[-1]}")
    return Decimal(body)


def _match_value(m: re.Match) -> float | None:
    try:
        # Decimal keeps "8.3 million" exactly 8300000.0 and "4.5e-3" exactly 0.0045.
        value = _body_to_decimal(m.group("body"))
        exp = m.group("exp") or m.group("exp10")
        if exp:
            value = value.scaleb(int(exp.replace("\u2212", "-")))
        if m.group("power"):  # "10^6", "2**10"; "3/4^2" is ambiguous: no number
            if m.group("frac") or m.group("mixed"):
                return None
            value = value ** int(m.group("power").replace("\u2212", "-"))
        if m.group("mag"):
            value *= Decimal(int(_MAGNITUDES[m.group("mag").lower()]))
        if m.group("frac"):
            denominator = Decimal(m.group("frac").lstrip("/ ").strip())
            if denominator == 0:
                return None
            value /= denominator
        elif m.group("mixed"):
            num, den = (Decimal(x.strip()) for x in m.group("mixed").split("/"))
            if den == 0:
                return None
            value += num / den
        result = float(value)
        if m.group("sign") in ("-", "\u2212"):
            result = -result
    except (ArithmeticError, ValueError, OverflowError):
        return None
    return result if math.isfinite(result) else None


def _words_to_number(text: str) -> float | None:
    """ "eight and a half million" -> 8.5e6, "a dozen" -> 12; None without number words."""
    low = re.sub(r"\band a half\b", " HALF ", text.lower().replace("-", " "))
    words = re.findall(r"[a-z]+|HALF", low)
    total, current, started, negative = 0.0, 0.0, False, False
    for i, w in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if not started and w in ("minus", "negative"):
            negative = True
        elif w in ("a", "an") and nxt in ("hundred", "dozen", "half", *_BIG):
            current, started = max(current, 1.0) if started else 1.0, True
        elif w in _UNITS and w not in ("a", "an", "dozen"):
            current, started = current + _UNITS[w], True
        elif w in _TENS:
            current, started = current + _TENS[w], True
        elif w == "HALF" and started:
            current += 0.5
        elif w == "half" and started:
            current *= 0.5  # "a half" -> 0.5
        elif w == "dozen":
            current, started = max(current, 1.0) * 12, True
        elif w == "hundred" and started:
            current = max(current, 1.0) * 100
        elif w in _BIG and started:
            total, current = total + max(current, 1.0) * _MAGNITUDES[w], 0.0
        elif w == "and" and started:
            continue
        elif started:
            break
    if not started:
        return None
    value = total + current
    return -value if negative else value


_BIG = ("thousand", "million", "billion", "trillion")


_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_DAY_OF_DATE = re.compile(rf"^\s*(?:{_MONTHS})\b|\b(?:{_MONTHS})\.?\s*$", re.IGNORECASE)
_FRAMING = re.compile(
    r"(?:\b(?:in|since|as\s+of|by|from|until|till|before|after|during|circa|c\.)\s+(?:the\s+year\s+)?"
    r"|\(\s*|^\s*)$",
    re.IGNORECASE,
)
_QUANTIFIERS = frozenset(
    "about around approximately roughly nearly almost over under some circa only just exactly "
    "precisely maybe perhaps probably estimated estimates".split()
)
_RANGE = re.compile(r"^\s*(?:-|\u2013|\u2014|to|and)\s*$", re.IGNORECASE)
_NUMBER_WORD = re.compile(
    r"\b(?:(?:a|an|minus|negative)\s+)?(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|"
    r"fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|"
    r"hundred|thousand|million|billion|trillion|dozen|half)(?:[\s-]+(?:and\s+)?(?:a\s+)?(?:zero|one|two|three|four|five|"
    r"six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|"
    r"thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|million|billion|trillion|dozen|half))*\b",
    re.IGNORECASE,
)


_ORDINAL_DENOMINATORS = {
    "half": 2,
    "third": 3,
    "quarter": 4,
    "fourth": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
}


class _Candidate:
    """A number in the text, with what a careful reader knows about its role."""

    def __init__(self, start: int, end: int, value: float, year: bool):
        self.start, self.end, self.value, self.year = start, end, value, year
        self.aside = False  # in parentheses, a date's day, a name ("Apollo 11"), a framing year


def _candidates(s: str) -> list[_Candidate]:
    """Every number of `s` in order (digits, then number words outside them), each marked where
    a careful reader reads past it."""
    out = _digit_candidates(s)
    _add_word_candidates(s, out)
    out.sort(key=lambda c: c.start)
    _mark_asides(s, out)
    return out


def _digit_candidates(s: str) -> list[_Candidate]:
    """The numbers written in digits ("1,083", "70-71%", "2.5 million")."""
    out: list[_Candidate] = []
    for m in _NUMBER.finditer(s):
        value = _match_value(m)
        if value is None:
            continue
        body = m.group("body")
        year = (
            re.fullmatch(r"\d{4}", body) is not None
            and 1000 <= value <= 2100
            and not m.group("mag")
            and not m.group("sign")
        )
        start = m.start() + len(m.group(0)) - len(m.group(0).lstrip())
        if m.group("sign") == "-" and out and out[-1].end == m.start():
            value, start = -value, m.start("body")  # "70-71%": a range dash, not a minus sign
        out.append(_Candidate(start, m.end(), value, year))
    return out


def _add_word_candidates(s: str, out: list[_Candidate]) -> None:
    """The numbers written in words ("two thirds") outside those already in `out`, added to it."""
    for m in _NUMBER_WORD.finditer(s):
        if any(c.start <= m.start() < c.end for c in out):
            continue
        value = _words_to_number(m.group(0))
        fraction = re.match(
            r"^[\s-]+(half|halves|thirds?|quarters?|fourths?|fifths?|sixths?|sevenths?|eighths?|ninths?|tenths?)\b",
            s[m.end() :],
            re.IGNORECASE,
        )
        if value is not None and fraction:  # "one eighth", "two thirds"
            value /= _ORDINAL_DENOMINATORS[
                fraction.group(1).lower().rstrip("s")
                if fraction.group(1).lower() != "halves"
                else "half"
            ]
        if value is not None:
            out.append(
                _Candidate(m.start(), m.end() + (fraction.end() if fraction else 0), value, False)
            )


def _mark_asides(s: str, out: list[_Candidate]) -> None:
    """Mark the numbers that are not the answer: in parentheses, a date's day, a framing year,
    part of a name."""
    depth_at = _paren_depths(s)
    for c in out:
        before, after = s[: c.start], s[c.end :]
        word_before = re.search(r"([A-Za-z][\w'-]*)\W*$", before)
        if depth_at[c.start] > 0:
            c.aside = True  # "(1,083 ft)", "(2023)"
        elif (
            c.value == int(c.value)
            and 1 <= c.value <= 31
            and (
                _DAY_OF_DATE.search(before[-12:])
                or re.match(rf"^(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS})\b", after, re.IGNORECASE)
            )
        ):
            c.aside = True  # the day of "July 20, 1969" / "9 November 1989": the year is the number
        elif c.year and (_FRAMING.search(before[-25:]) or re.match(r"^\s*,", after)):
            c.aside = True  # "In 2020, ...", "completed in 1889": frames the answer
        elif (
            word_before
            and word_before.group(1)[:1].isupper()
            and before.rstrip().endswith(word_before.group(1))
            and word_before.group(1).lower() not in _QUANTIFIERS
            and not re.search(r"[$\u20ac\u00a3]\s*$", before)
            and not re.fullmatch(_MONTHS, word_before.group(1), re.IGNORECASE)
        ):
            c.aside = True  # "Apollo 11", "Boeing 747": part of a name


def _paren_depths(s: str) -> list[int]:
    depths, depth = [], 0
    for ch in s:
        if ch == "(":
            depth += 1
        depths.append(depth)
        if ch == ")":
            depth = max(0, depth - 1)
    depths.append(depth)
    return depths


def parse_number(text: object) -> float | None:
    """The response's number as a float, or None when it holds none (see the module doc).

    Which number: candidates are the numbers in digits and in words; asides are set back (in
    parentheses: conversions and dates; the day of a date; a year that frames the answer, as in
    "In 2020, ..." or "completed in 1889"; a number that is part of a name, "Apollo 11"). The
    answer is the first candidate after the last answer marker ("####", "answer is", "=", "is"
    after an expression with numbers), else the first candidate; a range ("70-71%", "from 6,650
    to 7,088", "between 363,000 and 405,000") gives its midpoint. When every number is an aside,
    the first one is the answer ("In 1989.").
    """
    s = clean_text(to_text(text).strip()[:100_000]).strip()
    if not s:
        return None
    try:
        cands = _candidates(s)
    except (ValueError, ArithmeticError, OverflowError):  # pragma: no cover - defence in depth
        return None
    if not cands:
        return None
    markers = [m.end() for m in _MARKERS.finditer(s)]
    # "15% of 200 is 30": "is" after an expression with numbers marks the result
    for m in re.finditer(r"\b(?:is|are|equals|makes|gives)\b", s, re.IGNORECASE):
        if any(c.end <= m.start() and not c.aside for c in cands) and re.search(
            r"[\d%]\s*(?:[x\u00d7*/+\-]|of|times|percent)\s*\d", s[: m.start()], re.IGNORECASE
        ):
            markers.append(m.end())
    pool = [c for c in cands if not c.aside] or [c for c in cands if c.year] or cands
    if markers:
        after = [c for c in pool if c.start >= max(markers)]
        pool = after or pool
    first = pool[0]
    nxt = next((c for c in cands if c.start >= first.end), None)
    if (
        nxt is not None
        and not nxt.aside
        and nxt.value > first.value
        and (
            # "between 363,000 and 405,000", "from 6,650 to 7,088", "36.5 to 37.5", "70-71%"
            (
                _RANGE.match(s[first.end : nxt.start])
                and re.search(
                    r"\b(?:from|between|range|ranges|ranging)\s+[^\d]{0,20}$",
                    s[: first.start],
                    re.IGNORECASE,
                )
            )
            or s[first.end : nxt.start].strip() in ("-", "\u2013", "to")
        )
    ):
        return (first.value + nxt.value) / 2
    return first.value
