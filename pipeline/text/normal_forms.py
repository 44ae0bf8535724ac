"""Answer normal forms shared by the mappers and the quality metrics (stdlib only).

`clean_text(value)` is what every reader of model output reads: the text as a reader sees it,
compatibility characters folded (NFKC: "\ufb01" -> "fi", full-width digits -> ASCII) and
invisible characters (zero-width, soft hyphen, bidi controls) dropped, so "Paris\u200b" is
"Paris". Two normal forms of names, for two different jobs:

- `canonical_label(text)`: the identity of a *name* used as a label (sets, graph entities,
  simplex answers, classes read offline). It keeps what makes a name that name: letters inside
  it ("Vitamin A", "Malcolm X"), symbols attached to it ("C++", "C#", "F#", ".NET", "AT&T",
  "R&B"), an internal article ("Lord of the Rings"); it drops what a careful reader ignores:
  case, accents on Latin letters, a leading article ("The Hague" ~ "Hague"), acronym dots
  ("U.S." ~ "US"), apostrophes, hyphens and other punctuation.
- `squad_normalize(text)`: the official TriviaQA / SQuAD evaluation normalisation (lower case,
  punctuation to spaces, every article removed, whitespace collapsed), used only where a
  benchmark's own scorer is reproduced (TriviaQA exact match).
"""

from __future__ import annotations

import functools
import re
import string
import unicodedata

from pipeline.text.lexicon import protect_and_names

__all__ = ["to_text", "clean_text", "canonical_label", "squad_normalize", "split_names"]

_SPACES = re.compile(r"\s+")


def to_text(value: object) -> str:
    """Any model output as `str`: bytes are decoded with replacement, None becomes ""."""
    if value is None:
        return ""
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    return value if isinstance(value, str) else str(value)


# Characters that change a string but not what a reader sees: zero-width space, non-joiner and
# joiner, word joiner, byte order mark, soft hyphen, and the bidi marks, embeddings, overrides
# and isolates. NFKC keeps them all.
INVISIBLE = frozenset(
    "\u200b\u200c\u200d\u2060\ufeff\u00ad\u200e\u200f\u061c"
    "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
_DROP_INVISIBLE = dict.fromkeys(map(ord, INVISIBLE))
_SUPERSCRIPT_DIGITS = "\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079"
# NFKC writes "10\u00b2" as "102" and "2\u00bd" as "21\u20442": after a digit, an exponent becomes
# "^2" ("10^2": 100) and a vulgar fraction the fraction part of a mixed number ("2 1/2").
_EXPONENT_AFTER_DIGIT = re.compile(f"(?<=\\d)[\u207a\u207b]?[{_SUPERSCRIPT_DIGITS}]+")
_FRACTION_AFTER_DIGIT = re.compile("(?<=\\d)(?=[\u00bc-\u00be\u2150-\u215e\u2189])")


def clean_text(value: object) -> str:
    """`to_text(value)` as a reader sees it: invisible characters (`INVISIBLE`) dropped and
    compatibility characters folded (NFKC: "\ufb01" -> "fi", full-width "\uff14\uff12" -> "42",
    no-break spaces -> spaces, "m\u00b2" -> "m2"), except that a superscript after a digit is
    an exponent ("10\u00b2" -> "10^2", "6.02\u00d710\u00b2\u00b3" -> "6.02\u00d710^23") and a
    vulgar fraction after a digit the fraction of a mixed number ("2\u00bd" -> "2 1/2"); the
    fraction slash U+2044 is "/". Idempotent. Every reader of model output (pipeline.mapping)
    reads this, so no latent tells apart texts a reader cannot."""
    s = to_text(value)
    if s.isascii():
        return s
    s = s.translate(_DROP_INVISIBLE)
    s = _EXPONENT_AFTER_DIGIT.sub(lambda m: "^" + m.group(0), s)
    s = _FRACTION_AFTER_DIGIT.sub(" ", s)
    return unicodedata.normalize("NFKC", s).replace("\u2044", "/")


# --------------------------------------------------------------------------- label identity

_APOSTROPHES = re.compile(r"['\u2018\u2019\u02bc\u00b4`]")
_N_JOINER = re.compile(r"\s+['\u2019]n['\u2019]?\s+")
_POSSESSIVE = re.compile(r"(?<=\w)['\u2019]s\b")  # "Earth's" is Earth
# Single letters joined by dots: "u.s.", "u.s.a", "d.c." -> "us", "usa", "dc".
_ACRONYM = re.compile(r"(?<![\w.])[^\W\d_](?:\.[^\W\d_])+\.?(?![\w])")
# Symbols that belong to a name when attached to it.
_NAME_SYMBOL = re.compile(
    r"(?<=\w)(?:\+\+|\+|#)|(?<=\w)&(?=\w)|(?:(?<=\s)|^)\.(?=[^\W\d_])|(?<=\w)\.(?=\w)"
)
_KEEP = "\u0000"  # stand-in marking a kept symbol while the rest of the punctuation goes
_LEADING_ARTICLE = re.compile(r"^(?:the|a|an)\s+(?=\S)")


def _fold_latin(s: str) -> str:
    """Accents off Latin letters only ("zürich" -> "zurich"); other scripts keep their marks
    (a kana's dakuten is a combining mark under NFD and changes the word)."""
    out: list[str] = []
    for ch in unicodedata.normalize("NFD", s):
        if unicodedata.combining(ch) and out and "a" <= out[-1] <= "z":
            continue
        out.append(ch)
    return unicodedata.normalize("NFC", "".join(out))


def canonical_label(text: object) -> str:
    """The identity of a name as a label: "The Hague." -> "hague", "C++" -> "c++",
    "Vitamin A" -> "vitamin a", "U.S.A." -> "usa", "AT&T" -> "at&t", ".NET" -> ".net",
    "Côte d'Ivoire" -> "cote divoire", "Earth's" -> "earth", "rock 'n' roll" -> "rock and roll", "Tom & Jerry" -> "tom and jerry";
    "" when nothing is left."""
    if type(text) is str and len(text) <= 200:
        # a pure function of the text that the readers call ~16 times per response on the
        # same few names: remembered (most of a scorer's reading time before)
        return _canonical_label_cached(text)
    return _canonical_label(text)


@functools.lru_cache(maxsize=1 << 16)
def _canonical_label_cached(text: str) -> str:
    return _canonical_label(text)


# ASCII text (most labels) takes str.translate for the per-character category tests: the ASCII
# controls are exactly its "Cc" characters, string.punctuation exactly its "P*" and "S*" ones
# (tested against unicodedata), and it has no accents to fold
_ASCII_CONTROL_TO_SPACE = str.maketrans({chr(c): " " for c in [*range(32), 127]})
_ASCII_PUNCTUATION_TO_SPACE = str.maketrans({c: " " for c in string.punctuation})


def _canonical_label(text: object) -> str:
    s = clean_text(text).casefold()
    plain_ascii = s.isascii()  # stays so: the substitutions below only write ASCII
    if plain_ascii:
        s = s.translate(_ASCII_CONTROL_TO_SPACE)
    else:
        s = "".join(" " if unicodedata.category(ch) == "Cc" else ch for ch in s)
        s = _fold_latin(s)
    s = _ACRONYM.sub(lambda m: m.group(0).replace(".", ""), s)
    s = _POSSESSIVE.sub("", s)
    s = _N_JOINER.sub(" and ", s)  # "rock 'n' roll" is "rock and roll"
    s = _APOSTROPHES.sub("", s)
    s = _NAME_SYMBOL.sub(
        lambda m: (
            m.group(0)
            .replace("+", _KEEP + "p")
            .replace("#", _KEEP + "h")
            .replace("&", _KEEP + "a")
            .replace(".", _KEEP + "d")
        ),
        s,
    )
    s = re.sub(r"(?<!\S)&(?!\S)", " and ", s)
    if plain_ascii:
        s = s.translate(_ASCII_PUNCTUATION_TO_SPACE)
    else:
        s = "".join(" " if unicodedata.category(ch)[0] in "PS" else ch for ch in s)
    s = (
        s.replace(_KEEP + "p", "+")
        .replace(_KEEP + "h", "#")
        .replace(_KEEP + "a", "&")
        .replace(_KEEP + "d", ".")
    )
    s = _SPACES.sub(" ", s).strip()
    return _LEADING_ARTICLE.sub("", s)


# --------------------------------------------------------------------------- benchmark scorers

_SQUAD_PUNCT = frozenset(string.punctuation + "\u2018\u2019\u00b4`")
_SQUAD_ARTICLES = re.compile(r"\b(a|an|the)\b")


def squad_normalize(text: object) -> str:
    """The normalisation of the official TriviaQA evaluation (triviaqa_evaluation.py,
    `normalize_answer`; SQuAD's with underscores and curly quotes added): lower case,
    underscores and punctuation to spaces, the articles a/an/the removed anywhere, whitespace
    collapsed. Nothing else (no Unicode folding), so numbers match the benchmark's scorer."""
    s = to_text(text).replace("_", " ").lower()
    s = "".join(" " if ch in _SQUAD_PUNCT else ch for ch in s)
    s = _SQUAD_ARTICLES.sub(" ", s)
    return " ".join(s.split())


# --------------------------------------------------------------------------- lists of names

_LIST_MARKER = re.compile(r"^\s*(?:[-*\u2022\u25cf+]+|\(?\d{1,3}[.)]|\(?[a-h]\))\s+")
_INLINE_NUMBERED = re.compile(r"(?:^|\s)\(?\d{1,3}[.)]\s+")


def split_names(text: object) -> list[str]:
    """The names a reference string lists, each as written: one per line (bullets and numbers
    dropped), else per semicolon, else per comma and "and" / "or" / "&" ("Pacific, Atlantic and
    Arctic", "United States and Canada"), except inside the names that hold "and"
    (`pipeline.text.lexicon.AND_NAMES`: "Bosnia and Herzegovina", "rhythm and blues"). Empty pieces
    are dropped."""
    s = to_text(text).strip()
    if not s:
        return []
    lines = [x for x in s.splitlines() if x.strip()]
    if len(lines) > 1:
        return [n for n in (_LIST_MARKER.sub("", x).strip(" \t,;.") for x in lines) if n]
    if len(_INLINE_NUMBERED.findall(s)) >= 2:  # "1. Paris 2. Lyon"
        return [n for n in (p.strip(" \t,;.") for p in _INLINE_NUMBERED.split(s)) if n]
    s = _LIST_MARKER.sub("", s)
    if ";" in s:
        return [n for n in (p.strip(" \t,.") for p in s.split(";")) if n]
    parts = [p.strip() for p in s.split(",")]
    parts = [p for p in parts if p.strip(" .")]
    if not parts:
        return []
    parts[-1] = re.sub(r"^(?:and|or)\s+", "", parts[-1], flags=re.IGNORECASE)

    out: list[str] = []
    for part in parts:  # "A and B" is two names unless it is one ("Bosnia and Herzegovina")
        kept = protect_and_names(part, _KEEP)
        out.extend(
            p.replace(f" {_KEEP} ", " and ")
            for p in re.split(r"\s+(?:and|or|&)\s+", kept, flags=re.IGNORECASE)
        )
    return [n for n in (p.strip(" \t.") for p in out) if n]
