"""The answers a response states, read the way a careful person reads them (rule-based).

`read_answers(text, question)` returns the canonical labels in the order they are stated. It is
shared: the rule-based set g_T is `pipeline.mapping.extract_answers` over it, and task folders
build their own readers on it and its pieces (a single answer, answers without probabilities).
The rules were developed on the labelled corpus in tests/corpora (scripts/bench_extraction.py prints
their precision and recall; docs/extraction.md has the conventions). In order:

1. Structure. JSON (bare, fenced or after a preamble) gives its answer strings. Otherwise lines
   are classified: bullet or numbered items ("1. ", "- ", "* ", also inline "1. A, 2. B"),
   lines under a header ending in ":", and runs of short lines ("India - east") are list items;
   when a response has a list, its items are the answers and its prose is preamble or
   explanation. A header that announces non-answers ("The other colours are:") drops its items.
2. Prose. Sentences are read in order (abbreviations such as "U.S." do not end one); preambles
   ("Sure!", "Switzerland is a multilingual country.") give nothing and are skipped; the first
   sentence that names answers is the answer sentence. A later sentence adds answers only when
   it says so ("also", "too", "the third", "the fourth state") and is not negated.
3. Clauses. The answer sentence is cut into clauses (";", ", while", ", but", ", and" + a new
   subject and verb, ", as do"); answers attached with ", along with", ", with", ", plus",
   ", followed by" are kept. In each clause the main verb splits subject from predicate and the
   side that restates the question ("Switzerland borders ...", "... also have ring systems")
   is not the answer: the other side is. Later clauses count only when they continue the
   answer (a subject that is the question's topic, "also", parallel structure).
4. Conjuncts. The answer side is split on commas, "and", "or", "&", "+", "/", "as well as"...
   (not inside quotes, italics, "North and South X", or "Antony and Cleopatra" in an Oxford-comma
   list); each conjunct is cut to its noun phrase: leading hedges, determiners and counts go
   ("two violins" -> "violins"), and so does everything from the first preposition, verb or
   relative word ("Germany to the north", "Romania before reaching ..."); "the tiny state of
   Andorra" -> "Andorra"; a plural head shared by the conjuncts ("the Atlantic and Pacific
   Oceans") is dropped; appositives and participles (", a metal", ", spoken by ...") are not
   answers, nor are descriptions ("the most common noble gases") or restated question words.
5. Labels are canonical (docs/design.md s6) and deduplicated within the response: a later mention
   that is contained in an earlier one ("Pacific" after "Pacific Ocean") is the same answer.

Everything is linear in the input (bounded pieces only), and nothing here raises on model text.
"""

from __future__ import annotations

import re
from functools import lru_cache

from pipeline.mapping.labels import QUALIFIERS
from pipeline.mapping.response_text import json_answer_strings
from pipeline.text.lexicon import protect_and_names as protect
from pipeline.text.normal_forms import canonical_label

__all__ = ["read_answers"]

MAX_ITEM_WORDS = 8  # a "label" longer than this is a sentence, not an answer
MAX_ITEM_CHARS = 120
_MAX_LINE = 1_000
_MAX_LINES = 400

# --------------------------------------------------------------------------- vocabularies

_ARTICLES = frozenset({"the", "a", "an"})
_NUMBER_WORDS = frozenset(
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "twenty both several many few".split()
)
_DETERMINERS = _ARTICLES | frozenset(
    "its their his her our my your this that these those some all each every any other another".split()
)
_PRONOUNS = frozenset(
    "it they them its their this these those he she him her which that there".split()
)
_SELF = frozenset("i we you me us i'm i've i'd let".split())
_PREPOSITIONS = frozenset(
    "to in on at by with from into through across along off near between before after during since "
    "under over above below for as than via within without against toward towards around about "
    "among amongst beyond behind beside besides onto upon throughout inside outside except like per "
    "until till".split()
)
_SUBORDINATORS = frozenset(
    "which who whom whose that where when while whereas although though because if unless so but yet "
    "whether once".split()
)
_AUX = frozenset(
    "is are was were be been being am has have had having do does did will would can could may might "
    "shall should must".split()
)
# Verbs that link a topic to its answers in model prose, in base form; inflections are derived.
_VERB_BASES = (
    "border share include contain comprise consist make form flow pass run rise cross reach use speak "
    "write author walk play stay sign join lead found host hold count recognise recognize surround "
    "divide bound separate lie sit touch cover orbit follow replace take call name consider know become "
    "belong represent compose constitute occupy mix combine produce give create melt drain end start "
    "begin enter empty help say mean refer go come serve govern dominate allow feature involve remain "
    "exist appear live see get put keep seem look adopt add sing perform release win lose beat defeat "
    "invade fight marry unite merge extend stretch continue connect link grow work stand assassinate "
    "impeach kill elect design develop invent discover build paint compete originate span bring "
    "wrote made took led held ran rose lay became "
    "gave spoken written known taken given risen begun sat drawn drew grew grown went gone came fought "
    "won lost beaten met told thought seen began flowed spoke wore worn found"
)
_IRREGULAR_VERBS = frozenset(
    "wrote made took led held ran rose lay became gave spoken written known taken given risen begun sat "
    "drawn drew grew grown went gone came fought won lost beaten met told thought seen began spoke "
    "worn wore found bound split set put let cut hit brought".split()
)


def _inflections(base: str) -> set[str]:
    forms = {base}
    if base.endswith("e"):
        forms |= {base + "s", base + "d", base[:-1] + "ing"}
    elif base.endswith(("s", "sh", "ch", "x")):
        forms |= {base + "es", base + "ed", base + "ing"}
    elif base.endswith("y") and len(base) > 2 and base[-2] not in "aeiou":
        forms |= {base[:-1] + "ies", base[:-1] + "ied", base + "ing"}
    else:
        forms |= {base + "s", base + "ed", base + "ing"}
    return forms


_VERBS = frozenset(f for b in _VERB_BASES.split() for f in _inflections(b)) | _IRREGULAR_VERBS
# Words ending in -ed/-ing that are not verbs when they modify an answer.
_NOT_VERBS = frozenset(
    "united red bed need based armed aged related detailed advanced limited unnamed scheduled disputed "
    "coloured colored mixed fixed landlocked string spring thing king ring wing during morning evening "
    "painting building ceiling pudding wedding clothing herring viking sterling beijing nothing "
    "something anything everything bring sing sibling kingdom seed speed feed".split()
)
_ADVERBS = frozenset(
    "also all both only traditionally usually often mainly mostly not never now still just even "
    "generally typically commonly sometimes always largely primarily officially strictly together "
    "currently today again then each briefly partly fully completely respectively close closely".split()
)
# Nouns that, before "of" + a name, describe the name: "the tiny state of Andorra".
_CONTAINERS = frozenset(
    "part parts state territory island islands country countries city region province nation kingdom "
    "republic principality peninsula drizzle pinch splash dash cup cups bit touch slice piece pieces "
    "handful spoon spoonful sprinkle layer sheet bits alloy mixture blend combination".split()
)
# Plural heads a coordination can share: "the Atlantic and Pacific Oceans".
_SHARED_HEADS = frozenset(
    "oceans seas rivers lakes islands mountains ranges branches states countries languages planets "
    "gases colours colors elements metals brothers sisters members continents peninsulas seas "
    "gulfs bays straits deserts provinces regions cities "
    # singular, as models write it too: "the Atlantic and Pacific Ocean"
    "ocean sea river lake island mountain branch range desert peninsula gulf bay strait continent".split()
)
_DIRECTIONS = frozenset(
    "north south east west northeast northwest southeast southwest northern southern eastern western "
    "north-east north-west south-east south-west northeastern northwestern southeastern southwestern "
    "central upper lower".split()
)
# Words that make a noun phrase a description rather than an answer.
_DESCRIPTORS = frozenset(
    "most best least main only first second third fourth fifth sixth last other others one ones "
    "largest smallest biggest common famous known important major minor primary principal classic "
    "classical typical usual following remaining rest same kind kinds type types example examples "
    "number group list core majority".split()
)
_ORDINAL_CUES = frozenset("third fourth fifth sixth seventh other another last remaining".split())
_ADDITIVE_CUES = re.compile(
    r"\b(?:also|too|as\s+well|additionally|in\s+addition|likewise|(?:do|does|did|done)\s+so)\b",
    re.IGNORECASE,
)
_NEGATION = re.compile(
    r"\b(?:not|no|never|none|neither|nor|rather\s+than|instead\s+of|except|excluding|unlike|no\s+longer)\b|n't\b",
    re.IGNORECASE,
)
_STOP = (
    _ARTICLES
    | _DETERMINERS
    | _PREPOSITIONS
    | _SUBORDINATORS
    | _AUX
    | _ADVERBS
    | frozenset("and or of s what which who whom how why does do".split())
)

# --------------------------------------------------------------------------- text helpers

_MD = re.compile(r"\*\*|__|`")
_QUOTES = "\"'\u2018\u2019\u201c\u201d\u00ab\u00bb`"
_CONTRACTIONS = [
    (re.compile(r"\b(it|that|there|here|what|this|he|she)['\u2019]s\b", re.I), r"\1 is"),
    (re.compile(r"\b(they|we|you)['\u2019]re\b", re.I), r"\1 are"),
    (re.compile(r"\bi['\u2019]m\b", re.I), "I am"),
    (
        re.compile(r"\b(can|won|don|doesn|didn|isn|aren|wasn|weren|haven|hasn)['\u2019]t\b", re.I),
        r"\1 not",
    ),
]
_WORD_CHARS = re.compile(r"[^\W_]", re.UNICODE)


@lru_cache(maxsize=1 << 16)  # pure, and asked ~25 times per response for the same few words
def _core(word: str) -> str:
    """A word without surrounding punctuation, lower case, possessive "'s" removed."""
    w = word.strip(".,;:!?()[]{}*_\"'`\u2018\u2019\u201c\u201d").lower()
    if w.endswith(("'s", "\u2019s")):
        w = w[:-2]
    elif w.endswith(("'", "\u2019")):
        w = w[:-1]
    return w


@lru_cache(maxsize=1 << 16)
def _stem(word: str) -> str:
    """Crude stem so "borders"/"bordered"/"border" and "states"/"state" compare equal."""
    w = word.lower()
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith(("sses", "shes", "ches", "xes", "zes")):
        w = w[:-2]
    elif w.endswith(("ing", "ed")) and len(w) > 5:
        w = w[:-3] if w.endswith("ing") else w[:-2]
    elif w.endswith("s") and not w.endswith("ss") and len(w) > 3:
        w = w[:-1]
    return w[:-1] if w.endswith("e") and len(w) > 3 else w


def _is_capitalised(word: str) -> bool:
    w = word.lstrip(_QUOTES + "*_([")
    return bool(w) and (w[0].isupper() or w[0].isdigit())


# Patterns the reader applies to every response, compiled once (re's own cache costs a lookup
# per call: ~10 % of reading a short list)
_NOTE_START = re.compile(r"\s+[-\u2013\u2014:]\s+|\s*\(|:\s")
_NUMBERED = re.compile(r"\s*\(?\d")
_COMPASS_AND = re.compile(
    r"\b(North|South|East|West|Upper|Lower)\s+and\s+(?=(?:North|South|East|West|Upper|Lower)\b)"
)
_LISTED = re.compile(r",|\sand\s")
_DIGIT = re.compile(r"\d")
_LIST_IN_PARENS = re.compile(
    r"\b(?:the\s+)?(?:\w+\s+){0,3}?(?:countries|states|members|nations|languages|planets|ones)\s*"
    r"\((?P<inner>[^()]{1,200})\)",
    re.IGNORECASE,
)
_DASH = re.compile(r"\s+[-\u2013\u2014]+\s+|\u2014")
_COMMA_SPLIT = re.compile(r"\s*,\s*")
_AND_OR_FIRST = re.compile(r"(?:and|or)\s", re.IGNORECASE)
_COORDINATING = re.compile(r"\b(?:and|or|nor|plus|with|as well as|followed by)\b|&|\+|/")
_ADDING = re.compile(r"\b(?:plus|as well as|along with|together with)\b")
_AND_OR_WORD = re.compile(r"\b(?:and|or)\b")
_CLAUSE_JOINT = re.compile(r"(,\s*(?:and\s+|or\s+)?|\s+and\s+)")
_COMMA_OR_AND = re.compile(r",|\band\b")
_LEAD_CONJUNCTION = re.compile(
    r"^(?:while|whereas|although|though|but|yet|and|or|so)\s+", re.IGNORECASE
)
_INVERTED = re.compile(r"^(?:as|so)\s+(?:do|does|did)\s+", re.IGNORECASE)
_ANSWER_TAG = re.compile(r"^(?:a|answer|output)\s*:\s*", re.IGNORECASE)
_ITEM_NOTE = re.compile(
    r"^(?P<head>[^:]{1,120}?)(?:\s+[-\u2013\u2014]+\s+|\s*:\s+|\s*:$)(?P<rest>.*)$"
)
_SHORT_HEAD = re.compile(r"^[^,]{1,60},")
_SPACES = re.compile(r"\s+")
_SPACE_BEFORE_MARK = re.compile(r"\s+([,;:.!?])(?=\s|$)")
_AMONG = re.compile(r"^(?:of|among|from)\s+(?:the\s+)?", re.IGNORECASE)
_COLON_BEFORE = re.compile(r":\s+(?=\S)")
_WH_START = re.compile(r"^(?:which|what|who|whom|how|why|where|when)\b", re.IGNORECASE)
_COLON_THEN = re.compile(r":\s*\S")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_BUT = re.compile(r"\bbut\b", re.IGNORECASE)


# --------------------------------------------------------------------------- the question

_OPTION_SPAN = re.compile(r"(?::|,)\s*(?P<span>[^:?]{1,300}?)\s*\??\s*$")


def _question_options(question: str) -> tuple[list[str], int]:
    """The options a question lists for the answer to choose from ("Which are marsupials:
    kangaroo, koala, platypus, wombat?", "Which is larger, Mars or Venus?"), in order, and
    where they start in the question; ([], len) when it lists none."""
    question = question.rstrip()
    m = _OPTION_SPAN.search(question)
    if m is None:
        return [], len(question)
    parts = [
        p.strip(" .;")
        for p in re.split(r"\s*,\s*(?:(?:or|and)\s+)?|\s+(?:or|and)\s+", m.group("span"))
    ]
    parts = [p for p in parts if p]
    if len(parts) < 2 or any(len(p.split()) > 5 for p in parts):
        return [], len(question)
    if re.match(r"(?:which|what|who|how|why|where|when)\b", parts[0], re.I):
        return [], len(question)
    return parts, m.start("span")


def protect_and_names(text: str) -> str:
    """`text` with the "and" of one-name phrases (pipeline/text/lexicon.py, "X & Y") kept from
    splitting."""
    return protect(text, _AND)


_TITLE_AND = re.compile(
    r"(?<![\w'])[A-Z][\w'.-]*(?:\s+[A-Z][\w'.-]*){0,3}\s+and\s+[A-Z][\w'.-]*(?:\s+[A-Z][\w'.-]*){0,3}"
)


class _Question:
    """What the question says, for recognising restatements of it in a response."""

    def __init__(self, question: str | None):
        text = question or ""
        self.options, start = _question_options(text)
        if self.options:  # the options are what the answer names, never a restatement
            text = text[:start]
        words = [_core(w) for w in text.split()]
        self.stems = {_stem(w) for w in words if w and w not in _STOP and _WORD_CHARS.search(w)}
        self.stems -= {"which", "what", "who", "name", "list"}
        # Capitalised phrases after the first word: the question's topic ("United States").
        self.entities: set[str] = set()
        run: list[str] = []
        for i, raw in enumerate(text.split()):
            if i > 0 and _is_capitalised(raw) and _core(raw) not in _STOP:
                run.append(_core(raw))
                if not raw.rstrip("?").endswith((",", ".", ":", ";")):
                    continue
            if run:
                self.entities.add(" ".join(run))
                run = []
        if run:
            self.entities.add(" ".join(run))
        self.initials = {
            "".join(w[0] for w in e.split()) for e in self.entities if len(e.split()) > 1
        }
        # Titles with "and" the question names ("Romeo and Juliet"): one name, never two answers.
        self.titles = [t for t in _TITLE_AND.findall(question or "")]

    def protect_titles(self, text: str) -> str:
        """`text` with the "and" inside the question's titles kept from splitting."""
        for title in self.titles:
            text = re.sub(
                re.escape(title).replace(r"\ and\ ", r"\s+and\s+"),
                lambda m: m.group(0).replace(" and ", f" {_AND} "),
                text,
                flags=re.IGNORECASE,
            )
        return text

    def echoes(self, word: str) -> bool:
        """The word restates the question (or points back at its topic)."""
        w = _core(word)
        if not w:
            return False
        if w in _PRONOUNS:
            return True
        if w.replace(".", "") in self.initials:
            return True
        return _stem(w) in self.stems

    def restates(self, phrase: str) -> bool:
        """Every content word of `phrase` restates the question."""
        content = [w for w in phrase.split() if _core(w) and _core(w) not in _STOP]
        return bool(content) and all(self.echoes(w) for w in content)

    def echo_ratio(self, words: list[str]) -> float:
        content = [w for w in words if _core(w) and _core(w) not in _STOP - _PRONOUNS]
        if not content:
            return 0.0
        return sum(self.echoes(w) for w in content) / len(content)


@lru_cache(maxsize=256)
def _question(question: str | None) -> _Question:
    """_Question(question), built once per question: a prompt's responses share it (it is only
    read after construction)."""
    return _Question(question)


# --------------------------------------------------------------------------- JSON

# --------------------------------------------------------------------------- structure

_BULLET = re.compile(
    r"^\s*(?:[-*\u2022\u25cf\u25aa+>\u2013\u2014]+|\(?\d{1,2}[.)]|\(?[a-h]\))(?=\s|$)\s*"
)
_NUMBER_ONLY = re.compile(r"^\s*\(?\d{1,2}[.)]?\s*$")
_INLINE_MARKER = re.compile(r"(?:(?<=^)|(?<=[\s:;,.]))\(?(\d{1,2})[.)](?=\s)")
_HEADER_NEGATIVE = re.compile(
    r"\b(?:other|not|non|except|excluded|incorrect|wrong)\b", re.IGNORECASE
)
_ECHO_LINE = re.compile(r"^\s*(?:q|question|task|rules?|example\s*\d*)\s*:", re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_+-]*[ \t]*\n?(.*?)```", flags=re.DOTALL)


def _split_inline_numbered(line: str) -> list[str] | None:
    """ "1. Portugal, 2. Spain, 3. Italy" -> ["Portugal,", "Spain,", "Italy"]; None without such markers.

    Markers count only as an increasing run 1, 2, 3, ... so "122.5" or "in 2. half" do not split.
    """
    markers = []
    expected = None
    for m in _INLINE_MARKER.finditer(line):
        n = int(m.group(1))
        if expected is None:
            if n != 1:
                continue
        elif n != expected:
            continue
        markers.append(m)
        expected = n + 1
    if len(markers) < 2:
        return None
    parts = [line[a.end() : b.start()] for a, b in zip(markers, markers[1:])] + [
        line[markers[-1].end() :]
    ]
    return [p.strip() for p in parts]


def _strip_markup(line: str) -> str:
    return _MD.sub("", line).strip()


def _is_header(line: str) -> bool:
    return line.rstrip(" *_").endswith(":")


def _short_line(line: str) -> bool:
    """A line that reads as one list entry: a short name, maybe with " - note" or "(note)"."""
    head = _NOTE_START.split(line, maxsplit=1)[0]
    words = head.split()
    return (
        0 < len(words) <= 4
        and len(line.split()) <= 10
        and not line.rstrip().endswith((".", "!", "?"))
    )


def _units(text: str) -> tuple[list[str], list[str]]:
    """(list items, prose lines) of a response."""
    lines = [_strip_markup(x)[:_MAX_LINE] for x in text.splitlines()[:_MAX_LINES]]
    items: list[str] = []
    prose: list[str] = []
    in_header_block = False  # inside the lines that follow a header, up to a blank line
    header_dropped = False  # the header announced non-answers ("The other colours are:")
    block_started = False  # the header block has at least one entry
    block_bullets = False  # ... and its entries are bulleted
    last_numbered = False
    for i, line in enumerate(lines):
        if not line.strip():
            if block_started:
                in_header_block = False
            continue
        if _ECHO_LINE.match(line):
            continue  # an echoed "Q: ..." line is the prompt, not the answer
        inline = _split_inline_numbered(line)
        bullet = _BULLET.match(line)
        if inline is not None:
            lead = line[: _INLINE_MARKER.search(line).start()].strip()
            if (
                lead
                and not _is_header(lead)
                and not re.fullmatch(r"(?:a|answer|output)\s*:?", lead, re.I)
            ):
                prose.append(lead)
            items.extend(inline)
            in_header_block, last_numbered = False, True
        elif bullet is not None:
            body = line[bullet.end() :].strip()
            last_numbered = bool(_NUMBERED.match(line))
            if not body:
                continue  # a truncated marker ("5.")
            if not (in_header_block and header_dropped):
                items.append(body)
            block_started = block_started or in_header_block
            block_bullets = block_bullets or in_header_block
        elif last_numbered and _NUMBER_ONLY.match(line):
            continue  # "5" after "4. ...": a truncated marker
        elif _is_header(line) and not line.rstrip(" *_:").endswith(tuple("0123456789")):
            in_header_block, block_started, block_bullets = True, False, False
            header_dropped = bool(_HEADER_NEGATIVE.search(line)) and bool(items)
        elif in_header_block and not block_bullets:
            if not header_dropped:
                items.append(line)
            block_started = True
        elif _short_line(line) and (
            (i + 1 < len(lines) and _short_line(lines[i + 1]) and lines[i + 1].strip())
            or (i > 0 and lines[i - 1].strip() and _short_line(lines[i - 1]))
        ):
            items.append(line)
        else:
            prose.append(line)  # after a bulleted block, a sentence ends the list
            in_header_block = False
    return items, prose


# --------------------------------------------------------------------------- sentences

_ABBREVIATION = re.compile(
    r"(?:\b(?:[A-Za-z]\.){2,}|\b(?:e\.g|i\.e|etc|vs|mr|mrs|ms|dr|st|mt|ft|no|approx|ca|jr|sr|inc|ltd|co)\.)$",
    re.IGNORECASE,
)
# "George W. Bush": a capital letter and a dot after a capitalised word (or opening the text) is
# an initial; after a lower-case word it ends a sentence ("Bell Labs created C. Java ...").
_INITIAL = re.compile(r"(?:^|(?<=\s))(?P<prev>\S+\s+)?[A-Z]\.$")
_SENTENCE_END = re.compile(r"[.!?]+(?=\s+[\"'(\[*_]*[A-Z0-9]|\s*$)")


def _sentences(text: str) -> list[str]:
    out, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        before = text[start : m.end()]
        if m.group(0) == "." and _ABBREVIATION.search(before):
            continue
        initial = _INITIAL.search(before) if m.group(0) == "." else None
        if initial and (initial.group("prev") is None or _is_capitalised(initial.group("prev"))):
            continue
        out.append(text[start : m.end()].strip())
        start = m.end()
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return [s for s in out if s]


# --------------------------------------------------------------------------- lead phrases

_LEAD = re.compile(
    r"^(?:"
    r"(?:sure|certainly|of\s+course|absolutely|okay|ok|well|yes|so|great\s+question|good\s+question|"
    r"happy\s+to\s+help|no\s+problem)\b[\s,.!:]*"
    r"|(?:the\s+)?(?:correct\s+|final\s+|right\s+|short\s+|best\s+)?answers?\s*(?:is|are|would\s+be)?\s*[:\-]?\s+"
    r"|(?:a|output|response)\s*:\s*"
    r"|i\s+am\s+(?:not\s+(?:completely\s+|entirely\s+|totally\s+|100%\s+)?(?:sure|certain)|unsure)\s*(?:,|\.)?\s*but\s*,?\s*"
    r"|not\s+sure\s*,?\s*but\s*,?\s*"
    r"|(?:i\s+(?:think|believe|guess|suppose|reckon|would\s+say|'d\s+say)|i\s+am\s+(?:fairly|pretty|quite|almost)\s+(?:sure|certain)"
    r"|if\s+i\s+(?:remember|recall)\s+correctly|as\s+far\s+as\s+i\s+know|to\s+my\s+knowledge)\s*(?:that\s+)?,?\s*"
    r"|(?:strictly|broadly|technically|generally)\s+speaking\s*,\s*"
    r"|as\s+of\s+\d{4}\s*,\s*"
    r"|in\s+(?:short|summary|brief)\s*,\s*"
    r"|that\s+would\s+be\s+"
    r"|(?:of|among|from)\s+(?:these|them|those|the\s+(?:above|options|choices|following|list))\s*,\s*"
    r"|(?:probably|possibly|perhaps|maybe|likely|most\s+likely|mainly|mostly|primarily|chiefly|only|just|"
    r"namely|definitely|certainly|presumably|both|either)\b\s*,?\s*"
    r")",
    re.IGNORECASE,
)
_TRAILING_HEDGE = re.compile(
    r"(?:,?\s*(?:i\s+(?:think|believe|guess|suppose)|if\s+i\s+am\s+not\s+mistaken|i\s+am\s+not\s+sure)\s*[.!?]?$"
    r"|,?\s*\b(?:etc|and\s+so\s+on|among\s+others|and\s+others|and\s+more|so\s+far|too|as\s+well)\b\.?\s*$)",
    re.IGNORECASE,
)
_PREAMBLE = re.compile(
    r"^(?:sure|certainly|of\s+course|absolutely|okay|ok|great\s+question|good\s+question|happy\s+to\s+help|"
    r"let\s+me\s+(?:think|see|check)|here\s+(?:is|are)|hmm+|well)\b",
    re.IGNORECASE,
)


def _strip_lead(s: str) -> str:
    for _ in range(6):  # hedges stack: "I'm not sure, but I think probably ..."
        new = _LEAD.sub("", s.strip(" \t-:*_")).strip()
        if new == s:
            break
        s = new
    return s


# --------------------------------------------------------------------------- noun phrases

_PARENS = re.compile(r"\([^()]{0,300}\)|\[[^\[\]]{0,300}\]")
_OPEN_PAREN_TAIL = re.compile(r"\s*[(\[][^)\]]*$")
_PROTECT_QUOTED = re.compile(
    r"[\"\u201c]([^\"\u201c\u201d]{1,80})[\"\u201d]|(?<![\w*])\*([^*]{1,80})\*(?![\w*])|(?<!\w)_([^_]{1,80})_(?!\w)"
)
_AND, _COMMA = "\u0001", "\u0002"  # stand-ins for separators that must not split
_RELATIVE = re.compile(
    r",\s*(?:(?:the|a|an|all|some|each|most|one|two|both|none|many|either)\s+(?:\w+\s+){0,2}of\s+)?"
    r"(?:which|who|whom|whose|where)\b[^,;:]*",
    re.IGNORECASE,
)
_TRAILING_SELF = re.compile(
    r",\s*(?:i|we)\s+(?:am|was|think|believe|guess|suppose|may|might|could|would|hope|recall)\b.*$",
    re.IGNORECASE,
)
# ", managed by Brian Epstein and produced by George Martin": a trailing participle with its
# agent says who else, not the answers ("followed by Aldrin" can be the next answer)
_TRAILING_AGENT = re.compile(
    r",\s*(?:(?!followed\b|joined\b|accompanied\b)(?:\w+ed|known|led|made|written|taken|given|seen|"
    r"sung|drawn|shown)\s+by\b|with\s+the\s+[^,;]{1,60}?\s+(?:\w+ly\s+)?(?:taken|seen|considered|"
    r"regarded|lying|being|forming|marking|serving|acting)\b).*$",
    re.IGNORECASE,
)
_RANGE = re.compile(r"\b(between|from)\s+(\S+)\s+(and|to)\s+", re.IGNORECASE)
_DIRECTION_TRAILER = re.compile(
    r"^(?:to|in|on|at|along|off|toward|towards)\s+(?:the\s+|its\s+|their\s+)?(?:far\s+|extreme\s+)?"
    r"(?:north|south|east|west|northeast|northwest|southeast|southwest|northern|southern|eastern|western|"
    r"north-east|north-west|south-east|south-west|northeastern|northwestern|southeastern|southwestern)\b",
    re.IGNORECASE,
)
_POSSESSIVE_DETERMINERS = frozenset("its their his her our my your".split())
# "the synthetic element oganesson": a category noun before the name.
_CATEGORIES = frozenset(
    "element gas metal planet country state city river lake island language colour color artist painter "
    "composer writer author drummer singer guitarist band territory principality kingdom region nation "
    "capital ocean sea mountain".split()
)
_NEIGHBOURS = frozenset(
    "neighbours neighbors neighbouring neighboring coastlines shores borders".split()
)
# "Germany's Black Forest" names a place in Germany: the possessor is the answer.
_PLACE_HEADS = frozenset(
    "forest alps mountains coast region capital border borders north south east west side part territory "
    "waters shore coastline interior".split()
)


def _protect(s: str) -> str:
    """Keep "and"/commas inside quoted or italic titles, ranges ("between 1787 and 1788") and
    "North and South X" from splitting."""

    def keep(m: re.Match) -> str:
        inner = next(g for g in m.groups() if g is not None)
        return inner.replace(" and ", f" {_AND} ").replace(",", _COMMA)

    s = _PROTECT_QUOTED.sub(keep, s)
    s = _RANGE.sub(
        lambda m: (
            f"{m.group(1)} {m.group(2)} {_AND if m.group(3).lower() == 'and' else m.group(3)} "
        ),
        s,
    )
    return _COMPASS_AND.sub(lambda m: f"{m.group(1)} {_AND} ", s)


def _restore(s: str) -> str:
    return s.replace(_AND, "and").replace(_COMMA, ",")


def _list_parenthetical(s: str) -> str:
    """ "the three Benelux countries (Belgium, the Netherlands and Luxembourg)" -> the list."""

    def repl(m: re.Match) -> str:
        inner = m.group("inner")
        if _LISTED.search(inner) and not _DIGIT.search(inner):
            return inner
        return m.group(0)

    return _LIST_IN_PARENS.sub(repl, s)


def _cut_dashes(s: str) -> str:
    """ "The inner planets - Mercury, Venus, Earth and Mars - orbit ..." -> the list between dashes;
    "X, Y — the 'Inner Six'" -> the part before the dash."""
    parts = _DASH.split(s)
    if len(parts) >= 3 and _LISTED.search(parts[1]):
        return parts[1]
    if len(parts) == 2 and _LISTED.search(parts[0]) and not _LISTED.search(parts[1]):
        return parts[0]
    return s


_SPLIT = re.compile(
    r"(\s*(?:;|,|/)\s*(?:(?:and|or)\s+)?|\s+(?:&|\+)\s+|\s+(?:and|or|plus|nor|and/or|as\s+well\s+as|along\s+with|together\s+with|"
    r"in\s+addition\s+to|followed\s+by|but\s+also|and\s+also|and\s+then|then)\s+)",
    re.IGNORECASE,
)


def _conjuncts(span: str) -> list[tuple[str, str]]:
    """(separator before, part) for the coordinated parts of an answer span. Oxford-comma lists
    keep "A and B" whole inside a middle item ("Julius Caesar, Antony and Cleopatra, and Coriolanus")."""
    comma_parts = _COMMA_SPLIT.split(span)
    oxford = len(comma_parts) >= 3 and _AND_OR_FIRST.match(comma_parts[-1] or "")
    if oxford:
        for k in range(1, len(comma_parts) - 1):
            words = comma_parts[k].split()
            if (
                len(words) <= 4
                and " and " in comma_parts[k]
                and all(_is_capitalised(w) for w in words if w != "and")
            ):
                comma_parts[k] = comma_parts[k].replace(" and ", f" {_AND} ")
        span = ", ".join(comma_parts)
    pieces = _SPLIT.split(span)
    out = [("", pieces[0])]
    for k in range(1, len(pieces) - 1, 2):
        out.append((pieces[k].strip().lower(), pieces[k + 1]))
    return [(sep, p.strip()) for sep, p in out if p and p.strip()]


_LEADING_WORDS = frozenset(
    "and or also then plus with including include includes like namely especially particularly even e.g "
    "i.e such as mainly mostly probably possibly perhaps maybe sometimes usually only just both either "
    "finally lastly formerly arguably each all traditionally generally".split()
)


_EDGE_DOTS = re.compile(r"^\.+(?![^\W\d_])|\.+$")


def _trim(s: str, chars: str) -> str:
    """`s` without surrounding `chars` and dots, except a dot that starts a name (".NET")."""
    for _ in range(3):
        new = s.strip(chars)
        if "." in new:  # (most phrases have none: the pattern would scan them for nothing)
            new = _EDGE_DOTS.sub("", new)
        if new == s:
            break
        s = new
    return s


# The words _TRAILING_HEDGE can end with: a phrase ending otherwise (after whitespace and
# sentence marks) cannot match it, and most phrases do (the pattern tries every position).
# Case-folded, with the two dotless / dotted i's that re's IGNORECASE also equates with "i".
_HEDGE_LAST_WORDS = (
    "think",
    "believe",
    "guess",
    "suppose",
    "mistaken",
    "sure",
    "etc",
    "on",
    "others",
    "more",
    "far",
    "too",
    "well",
)


def _drop_trailing_hedge(s: str) -> str:
    tail = s.rstrip()
    while tail and tail[-1] in ".!?":
        tail = tail[:-1].rstrip()
    if not tail.casefold().replace("\u0131", "i").replace("\u0307", "").endswith(_HEDGE_LAST_WORDS):
        return s
    return _TRAILING_HEDGE.sub("", s)


def _noun_phrase(chunk: str, q: _Question) -> tuple[str, str]:
    """(answer named by a conjunct in surface form or "", what cut it: "", "direction" or "other")."""
    s = _trim(_restore(chunk), " \t,;:!?-\u2013\u2014*_")
    s = _trim(_drop_trailing_hedge(s), " ,;:!?")
    s = _strip_lead(s)
    words, had_det = _after_determiners(s.split())
    if not words or _opens_no_noun_phrase(words):
        return "", ""
    kept, cut, contained = _up_to_cut(words)
    if contained is not None:  # "the tiny state of Andorra" -> Andorra
        return _noun_phrase(" ".join(contained), q)
    phrase = _trim(" ".join(kept), " ,;:!?\"'*_")
    words = phrase.split()
    if not words:
        return "", cut
    words, lowered = _named_part(words, q)
    phrase = _trim(" ".join(words), " ,;:!?\"'*_")
    if _names_nothing(phrase, words, lowered, had_det, q):
        return "", cut
    return phrase, cut


def _after_determiners(words: list[str]) -> tuple[list[str], bool]:
    """(the words after the leading words, determiners and counts; whether a determiner was
    among them). No words where a possessive opens a description with no name after it."""
    had_det = False
    while words:
        w = _core(words[0])
        if w in _LEADING_WORDS:
            words = words[1:]
        elif w in _POSSESSIVE_DETERMINERS and len(words) > 1 and not _is_capitalised(words[1]):
            named = next((k for k, x in enumerate(words[1:4], 1) if _is_capitalised(x)), None)
            if named is None:
                return [], had_det  # "their autonomous territories", "its drainage basin"
            words = words[named:]  # "its predecessor B": the name after the description
            break
        elif words[0] == "A" and (len(words) == 1 or not words[1][:1].islower()):
            break  # the letter A (a blood type, a vitamin, a grade), not the article
        elif (
            w in _NUMBER_WORDS
            and len(words) > 1
            and _is_capitalised(words[0])
            and _is_capitalised(words[1])
        ):
            break  # "The Two Towers": a number word inside a title
        elif (
            w in _DETERMINERS
            or (w in _NUMBER_WORDS and len(words) > 1)
            or (w.isdigit() and len(words) > 1 and not _is_capitalised(words[1]))
        ):
            had_det = had_det or w in _DETERMINERS
            words = words[1:]
        else:
            break
    return words, had_det


def _opens_no_noun_phrase(words: list[str]) -> bool:
    """The words open a clause, a part of a whole or a participle, not a name."""
    first = _core(words[0])
    if (
        (first in _SELF and not words[0].strip(".,;:").isupper())
        or first in _PREPOSITIONS
        or first in _SUBORDINATORS
        or first in _AUX
    ):
        return True  # "I'm not sure ...", "under the Act of 1969", "which took over ..."
    if (
        len(words) > 1
        and _core(words[1]) == "of"
        and (
            first in _DESCRIPTORS
            or first.isdigit()
            or first in _NUMBER_WORDS
            or first in ("most", "some", "none")
        )
    ):
        return True  # "two of them", "four of the five Great Lakes", "51 of the essays"
    # ", spoken by a small community", ", writing under the pseudonym"
    return _is_participle(words[0])


def _up_to_cut(words: list[str]) -> tuple[list[str], str, list[str] | None]:
    """(the words before the first that ends the phrase, what cut it: "", "direction" or
    "other", the words after a container's "of" where the phrase names its content instead)."""
    kept: list[str] = []
    cut = ""
    for k, raw in enumerate(words):
        w = _core(raw)
        if k > 0 and (
            w in _PREPOSITIONS
            or w in _SUBORDINATORS
            or w in _AUX
            or w in _ADVERBS
            or _is_verb_word(raw, k)
        ):
            cut = "direction" if _DIRECTION_TRAILER.match(" ".join(words[k:])) else "other"
            break
        if k > 0 and w == "of":
            # "the tiny state of Andorra" -> Andorra; "a drizzle of olive oil" -> olive oil; "Gulf of Mexico" stays.
            head = _core(kept[-1]) if kept else ""
            if head in _CONTAINERS and not _is_capitalised(kept[-1]) and words[k + 1 :]:
                return kept, cut, words[k + 1 :]
        kept.append(raw)
        if raw.rstrip().endswith((",", ";", ":")):
            break
    return kept, cut, None


def _named_part(words: list[str], q: _Question) -> tuple[list[str], list[str]]:
    """(the words naming the answer, their core forms): a possessor the question restates or a
    possessed place dropped, a category before the name dropped."""
    lowered = [_core(w) for w in words]
    # "Germany's Black Forest" -> Germany; "The Beatles' John Lennon" -> John Lennon.
    for k, raw in enumerate(words[:-1]):
        if raw.endswith(("'s", "\u2019s", "'", "\u2019")) and _is_capitalised(raw):
            possessor, possessed = " ".join(words[: k + 1]), words[k + 1 :]
            if q.restates(_core(possessor)):
                words, lowered = possessed, lowered[k + 1 :]
            elif any(_core(w) in _PLACE_HEADS for w in possessed):
                words, lowered = words[:k] + [re.sub(r"['\u2019]s?$", "", raw)], lowered[: k + 1]
            break
    # "the synthetic element oganesson" -> oganesson
    for k in range(len(words) - 2, -1, -1):
        if lowered[k] in _CATEGORIES and not _is_capitalised(words[k]) and k + 1 < len(words):
            words, lowered = words[k + 1 :], lowered[k + 1 :]
            break
    return words, lowered


def _names_nothing(
    phrase: str, words: list[str], lowered: list[str], had_det: bool, q: _Question
) -> bool:
    """The phrase describes rather than names: a determined description, the question's own
    words, directions."""
    if (
        had_det
        and len(words) > 1
        and any(w in _DESCRIPTORS for w in lowered)
        and not any(_is_capitalised(w) for w in words)
    ):
        return True  # "the most common noble gases", "the best-known one"
    if (
        had_det
        and not any(_is_capitalised(w) for w in words)
        and any(w in _DESCRIPTORS for w in lowered)
    ):
        return True  # "the other"
    if q.restates(phrase) and not any(_is_capitalised(w) for w in words):
        return True  # "ring systems", "official languages": the question's own words
    return all(w in _DIRECTIONS for w in lowered)  # "... to the west and north"


def _is_participle(word: str) -> bool:
    w = _core(word)
    if not w or _is_capitalised(word) or w in _NOT_VERBS:
        return False
    return (
        (w.endswith("ing") and len(w) > 5)
        or (w.endswith("ed") and len(w) > 4)
        or w
        in (
            "spoken",
            "written",
            "known",
            "taken",
            "given",
            "born",
            "located",
            "situated",
            "used",
            "called",
            "named",
        )
    )


def _is_verb_word(word: str, position: int) -> bool:
    """A word that reads as a verb here (capitalised words after the first are names)."""
    w = _core(word)
    if not w or w in _NOT_VERBS:
        return False
    if position > 0 and _is_capitalised(word):
        return False
    if w in _AUX or w in _VERBS:
        return True
    return _is_participle(word) and position > 0


def _starts_with_article(part: str) -> bool:
    words = part.split()
    return bool(words) and _core(words[0]) in _ARTICLES


def _side_labels(span: str, q: _Question, *, subject: bool) -> list[str]:
    """The answers named in one side of a clause (or in a list item)."""
    span = span.strip()
    if not span:
        return []
    parts = _conjuncts(span)
    found: list[tuple[str, str]] = []  # (phrase, separator before it)
    after_final = False  # a conjunct introduced by "and"/"or" was seen: the list has ended
    for k, (sep, part) in enumerate(parts):
        coordinated = bool(_COORDINATING.search(sep))
        words = part.split()
        if (
            after_final
            and not coordinated
            and not any(_is_capitalised(w) for w in words[1:])
            and not (
                words
                and _is_capitalised(words[0])
                and _core(words[0]) not in _NUMBER_WORDS | _DETERMINERS
            )
        ):
            continue  # ", four capitals on its banks": about the list, not in it
        if (
            k > 0
            and not coordinated
            and _starts_with_article(part)
            and len(words) > 1
            and not _is_capitalised(words[1])
            and not _starts_with_article(parts[k - 1][1])
            and (k + 1 == len(parts) or not _starts_with_article(parts[k + 1][1]))
        ):
            continue  # an appositive: "mercury, a metal, and bromine"
        phrase, cut = _noun_phrase(part, q)
        if phrase:
            found.append((phrase, sep))
        if _ADDING.search(sep):
            after_final = False  # "... and Luxembourg plus France, Italy and West Germany"
        elif coordinated and sep and phrase:
            after_final = True
        if cut == "other" and k + 1 < len(parts) and not _is_capitalised(parts[k + 1][1]):
            break  # "Jay between 1787 and 1788", "... to provide checks and balances"; but
            # "Andrew Johnson in 1868, Bill Clinton in 1998": the next part names another
    for k in range(1, len(found)):
        phrase, sep = found[k]
        words = phrase.split()
        if (
            len(words) >= 2
            and _core(words[-1]) in _SHARED_HEADS
            and _core(words[-1]).endswith("s")
            and _AND_OR_WORD.search(sep)
            and len(found[k - 1][0].split()) == 1
        ):
            found[k] = (" ".join(words[:-1]), sep)
    phrases = _distribute_head(_drop_shared_head([p for p, _ in found]))
    return [p for p in phrases if not (subject and q.restates(p))]


_CODE = re.compile(r"^(?:[A-Z]{1,2}\d{0,2}|\d{1,3}|[IVX]{1,4})$")


def _distribute_head(phrases: list[str]) -> list[str]:
    """ "Vitamins D", "E" -> "Vitamin D", "Vitamin E"; "World Wars I", "II" -> "World War I",
    "World War II": a head before letter or number codes belongs to every code (the code alone
    names nothing)."""
    if len(phrases) < 2:
        return phrases
    first = phrases[0].split()
    if len(first) < 2 or not _CODE.match(first[-1]) or not all(_CODE.match(p) for p in phrases[1:]):
        return phrases
    head = first[:-1]
    if (
        len(head[-1]) > 3
        and head[-1].lower().endswith("s")
        and not head[-1].lower().endswith(("ss", "is", "us"))
    ):
        head = head[:-1] + [head[-1][:-1]]  # "Vitamins" -> "Vitamin"
    return [" ".join(head + [p.split()[-1]]) for p in phrases]


def _drop_shared_head(phrases: list[str]) -> list[str]:
    """ "Atlantic", "Pacific Oceans" -> "Atlantic", "Pacific"; "Lakes Superior", "Michigan" -> "Superior", ...

    Only when the other parts are bare names without that head ("Atlantic Ocean, Pacific Ocean"
    and "Lake Huron and Lake Erie" keep theirs)."""
    if len(phrases) < 2:
        return phrases

    def bare(others: list[str], head: str) -> bool:
        return all(len(p.split()) == 1 and _stem(p) != _stem(head) for p in others)

    last = phrases[-1].split()
    if len(last) >= 2 and _core(last[-1]) in _SHARED_HEADS and bare(phrases[:-1], last[-1]):
        phrases = phrases[:-1] + [" ".join(last[:-1])]
    first = phrases[0].split()
    if (
        len(first) >= 2
        and _core(first[0]) in _SHARED_HEADS
        and _core(first[0]).endswith("s")
        and bare(phrases[1:], first[0])
    ):
        phrases = [" ".join(first[1:])] + phrases[1:]
    return phrases


# --------------------------------------------------------------------------- clauses

_ATTACH = re.compile(
    r",\s*(?:along\s+with|together\s+with|as\s+well\s+as|followed\s+by|plus|with|and\s+also|but\s+also|"
    r"in\s+addition\s+to)\s+",
    re.IGNORECASE,
)
_CONTRAST = ("while", "whereas", "although", "though", "but", "yet")
_CLAUSE_BREAK = re.compile(
    r"\s*;\s*|,\s*(?=(?:while|whereas|although|though|but|yet|as\s+do|as\s+does|as\s+did)\b)"
    r"|\s+(?=(?:while|whereas)\s)",
    re.IGNORECASE,
)


def _main_verb(words: list[str], q: _Question) -> int | None:
    """Index of the clause's main verb (the first verb-like word), None when it has none."""
    for k, raw in enumerate(words):
        w = _core(raw)
        if w in _NOT_VERBS:
            continue
        if k == 0 and (
            w not in _AUX
            and w not in _VERBS
            or (
                len(words) > 1
                and _is_capitalised(raw)
                and _is_capitalised(words[1])
                and w not in _AUX
            )
        ):
            continue  # "United Kingdom; ...": a capitalised word before a name is part of it
        if k > 0 and _is_capitalised(raw):
            continue
        if w.endswith("ing") and w not in _AUX:
            continue  # "before reaching", "signing the pact": participles, not the main verb
        if k > 0 and _core(words[k - 1]) in _PREPOSITIONS | _SUBORDINATORS:
            continue
        if k > 0 and _core(words[k - 1]) in _ARTICLES | _POSSESSIVE_DETERMINERS and w not in _AUX:
            continue  # "the play ...": a noun after an article
        if w in _AUX or w in _VERBS:
            return k
        if k > 0 and _is_participle(raw) and w.endswith("ed"):
            return k
    return None


def _split_clauses(sentence: str, q: _Question) -> list[str]:
    """Clauses of a sentence. After a part with its own verb, a new clause starts at ", and X
    verb", ", X verb" or "and verb ..." (a verb phrase sharing the subject); verbless parts
    just before it are its subject ("London has ..., and Paris and Los Angeles will ...")."""
    out: list[str] = []
    for part in _CLAUSE_BREAK.split(sentence):
        if not part or not part.strip():
            continue
        pieces = _CLAUSE_JOINT.split(part)
        texts = pieces[0::2]
        seps = [""] + pieces[1::2]
        clause_start = 0
        clause_has_verb = _main_verb(texts[0].split(), q) is not None
        pending = None  # index of the first verbless piece since the last piece with a verb
        for k in range(1, len(texts)):
            words = texts[k].split()
            v = _main_verb(words, q) if words else None
            if v is None:
                if pending is None:
                    pending = k
                continue
            vp = v == 0 or _core(words[0]) in _ADVERBS
            subject_like = vp or any(
                _is_capitalised(w) or _core(w) in _PRONOUNS | _DETERMINERS for w in words[:v]
            )
            if clause_has_verb and (vp or v <= 6) and (subject_like or "and" in seps[k]):
                start = k
                if not vp:  # "..., and Paris and Los Angeles will ...": the subject is "Paris and Los Angeles"
                    while pending is not None and start > pending and "," not in seps[start]:
                        start -= 1
                out.append(
                    "".join(
                        s + t for s, t in zip(seps[clause_start:start], texts[clause_start:start])
                    ).strip(" ,")
                )
                clause_start = start
                seps[start] = ""
            clause_has_verb = True
            pending = None
        out.append(
            "".join(s + t for s, t in zip(seps[clause_start:], texts[clause_start:])).strip(" ,")
        )
    return [c.strip() for c in out if c.strip()]


def _split_at_verb(
    words: list[str], v: int, q: _Question
) -> tuple[list[str], list[str], list[str]]:
    """(subject, verb group incl. adverbs and a linking preposition, rest)."""
    j = v + 1
    while j < len(words) and (
        _core(words[j]) in _AUX
        or _core(words[j]) in _ADVERBS
        or (_is_verb_word(words[j], j) and not _is_capitalised(words[j]))
    ):
        j += 1
    # "shares land borders with", "has two official languages," : restated words, then a link
    k = j
    while (
        k < len(words)
        and k - j < 4
        and not _is_capitalised(words[k])
        and not words[k].endswith(",")
        and (_core(words[k]) not in _PREPOSITIONS | _SUBORDINATORS)
        and (not _is_verb_word(words[k], k) or (q.echoes(words[k]) and _core(words[k]) not in _AUX))
    ):
        k += 1
    if (
        k > j
        and k + 1 < len(words)
        and _core(words[k]) in ("with", "by", "through", "of", "into", "across", "between")
        and (words[k + 1][:1].isupper() or _core(words[k + 1]) in _ARTICLES | _NUMBER_WORDS)
    ):
        j = k
    if j + 1 < len(words) and _core(words[j]) in ("us", "me", "them", "him", "her", "you"):
        j += 1  # "gave us C, C++ ...": the pronoun is who received, the rest is the answer
    # "consists of", "is made up of", "is bordered by", "flows through"
    while j < len(words) and _core(words[j]) in (
        "of",
        "by",
        "with",
        "through",
        "into",
        "up",
        "between",
        "across",
        "among",
        "from",
        "in",
        "to",
        "as",
        "for",
        "behind",
    ):
        j += 1
    return words[:v], words[v:j], words[j:]


def _descriptive(words: list[str]) -> bool:
    """A phrase that describes rather than names: "the most famous", "two of them", "rarer"."""
    if not words:
        return False
    lowered = [_core(w) for w in words]
    if lowered[0] in _PRONOUNS and len(lowered) <= 2:
        return True
    if any(w in _DESCRIPTORS for w in lowered[:4]) and not any(
        _is_capitalised(w) for w in words[1:3]
    ):
        return True
    if lowered[0] in _ARTICLES and lowered[-1] in ("ones", "others", "examples", "kinds", "types"):
        return True  # "The Spanish-speaking ones"
    if (
        lowered[0] in _ARTICLES | _NUMBER_WORDS
        and not any(_is_capitalised(w) for w in words[1:])
        and not _COMMA_OR_AND.search(" ".join(words))
    ):
        return True
    if (
        len(words) <= 2
        and not any(_is_capitalised(w) for w in words[1:])
        and not _is_capitalised(words[0])
    ):
        return lowered[-1].endswith(("er", "est")) or lowered[0] in (
            "first",
            "last",
            "best",
            "largest",
        )
    return False


class _Reading:
    """How the answer sentence's first clause was read, for judging the clauses after it."""

    def __init__(self) -> None:
        self.side: str | None = None  # "subject" or "object"
        self.predicate_echo = 0.0
        self.predicate_stems: set[str] = set()  # content words of the first clause's predicate


def _clause_labels(clause: str, q: _Question, index: int, reading: _Reading) -> list[str]:
    """Answers of one clause (index 0: the answer sentence's first clause)."""
    lead_cut = _LEAD_CONJUNCTION.match(clause)
    contrast = bool(lead_cut) and lead_cut.group(0).strip().lower() in _CONTRAST
    clause = clause[lead_cut.end() :] if lead_cut else clause
    inverted = _INVERTED.match(clause)
    if inverted:  # ", as do Canada and the United States": the subject follows
        return _side_labels(clause[inverted.end() :], q, subject=True)
    clause = _strip_lead(clause)
    words = clause.split()
    if not words or _core(words[0]) in _SELF:
        return []
    cue = bool(_ADDITIVE_CUES.search(clause)) or bool({_core(w) for w in words} & _ORDINAL_CUES)
    if (
        _core(words[0]) == "there" and len(words) > 1 and _core(words[1]) in _AUX
    ):  # "There are five ..."
        return _side_labels(" ".join(words[2:]), q, subject=False)
    v = _main_verb(words, q)
    if v is None:
        if index > 0 and contrast and not cue:
            return []
        return _side_labels(clause, q, subject=False)
    left, verb_group, right = _split_at_verb(words, v, q)
    if _NEGATION.search(" ".join(verb_group)):
        return []
    left_words, echo_left = _subject_words(left, q)
    echo_right = q.echo_ratio(verb_group + right)
    side = _answer_side(left_words, verb_group, right, echo_left, echo_right)
    if side is None:
        return []
    predicate = _predicate_stems(verb_group, right)
    if index == 0:
        reading.side, reading.predicate_echo = side, echo_right
        reading.predicate_stems = predicate
    else:
        if contrast and not cue and reading.predicate_echo > 0:
            return []  # "..., while Michael Collins stayed in orbit": contrasted with the answer
        if side == "object" and left_words and echo_left < 1.0 and not cue:
            return []  # "the Constitution recognises ...": about something else
        if side == "subject" and not (cue or echo_right > 0 or reading.side == "subject"):
            return []
        if (
            q.options
            and side == "subject"
            and not cue
            and reading.side == "subject"
            and predicate - reading.predicate_stems - q.stems
        ):
            # the question lists options, and a response goes through them: "Jupiter and Saturn
            # are gas giants; Neptune is an ice giant" only answers in the clause that restates
            return []
    if side == "subject":
        return _side_labels(" ".join(left_words), q, subject=True)
    return _side_labels(" ".join(right), q, subject=False)


def _subject_words(left: list[str], q: _Question) -> tuple[list[str], float]:
    """(the subject's words, how much they echo the question: 1.0 for none, a pronoun or what
    the question's place has). A possessor restating the question is not part of the subject
    ("The Beatles' John Lennon ...")."""
    left_words = [w for w in left]
    restated_place = False
    for k, raw in enumerate(left_words[:-1]):
        if raw.endswith(("'s", "'", "\u2019s", "\u2019")) and q.restates(
            " ".join(left_words[: k + 1])
        ):
            left_words = left_words[k + 1 :]
            # "The USA's coastline includes ...", "Germany's neighbours include ...": what the
            # question's place has, so the subject restates the question
            restated_place = all(_core(w) in _PLACE_HEADS | _NEIGHBOURS for w in left_words)
            break
    pronoun_subject = (
        bool(left_words) and _core(left_words[0]) in _PRONOUNS and len(left_words) <= 2
    )
    echo_left = (
        1.0 if (not left_words or pronoun_subject or restated_place) else q.echo_ratio(left_words)
    )
    return left_words, echo_left


def _predicate_stems(verb_group: list[str], right: list[str]) -> set[str]:
    """The stems of the predicate's content words (the verb group after its first word, the
    object)."""
    return {
        _stem(_core(w))
        for w in verb_group[1:] + right
        if _core(w) and _core(w) not in _STOP and _WORD_CHARS.search(_core(w))
    }


def _answer_side(
    left_words: list[str],
    verb_group: list[str],
    right: list[str],
    echo_left: float,
    echo_right: float,
) -> str | None:
    """Which side of the verb names the answers, "subject" or "object": the one that does not
    echo the question, or None where that is the object and the object is a description."""
    copula = _core(verb_group[0]) in ("is", "are", "was", "were")
    passive_by = bool(verb_group) and _core(verb_group[-1]) == "by"
    if (
        copula
        and right
        and _core(right[0]) in ("a", "an")
        and not _COMMA_OR_AND.search(" ".join(right))
    ):
        object_ok = False  # "Switzerland is a multilingual country": a description, not answers
    else:
        object_ok = True
    if not left_words:
        side = "object"
    elif not object_ok or not right or (_descriptive(right) and not _descriptive(left_words)):
        side = "subject"
    elif _descriptive(left_words):
        side = "object"
    elif echo_left > echo_right:
        side = "object"
    elif echo_right > echo_left:
        side = "subject"
    else:
        side = "object" if passive_by else "subject"
    return None if side == "object" and not object_ok else side


# --------------------------------------------------------------------------- items and sentences


def _item_labels(item: str, q: _Question) -> list[str]:
    """A list entry: its name, without the note after ":", " - ", "(" or ", which ..."."""
    if "?" in item:
        return []  # an echoed question
    s = _protect(_strip_markup(item))
    s = _strip_lead(s)
    s = _ANSWER_TAG.sub("", s)
    s = _OPEN_PAREN_TAIL.sub("", _PARENS.sub(" ", s)).strip()
    s = _RELATIVE.sub("", s)
    # "Canada - Canada is ...", "German: 20% of ...", "India - Pakistan" (the question's topic first)
    m = _ITEM_NOTE.match(s)
    if m:
        head, rest = m.group("head").strip(), m.group("rest").strip()
        s = rest if (q.restates(head) and rest and len(rest.split()) <= 4) else head
    words = s.split()
    if len(words) > 3 and _main_verb(words, q) is not None:
        # "Red is the most abundant color ..." / "Mars, Earth's closest neighbour, orbits ..."
        first_sentence = _sentences(s)[0]
        if _SHORT_HEAD.match(first_sentence):
            head = first_sentence.split(",", 1)[0]
            if len(head.split()) <= 4:
                return _side_labels(head, q, subject=False)
        return _sentence_labels(first_sentence, q)
    return _side_labels(s, q, subject=False)


_ROLE = re.compile(
    r",\s+as\s+(?!well\b|do\b|does\b|did\b|of\b|such\b|in\b|a\s+result\b)"
    r"(?:an?\s+|the\s+)?[A-Z][^,;]*(?=[,;]|$)"
)


def _normalise_sentence(sentence: str) -> str:
    s = _ROLE.sub("", _protect(sentence))  # ", as Prime Minister": a role, not an answer
    s = _list_parenthetical(s)
    s = _OPEN_PAREN_TAIL.sub("", _PARENS.sub(" ", s))
    s = _SPACE_BEFORE_MARK.sub(r"\1", _SPACES.sub(" ", s)).strip().rstrip(".!?")
    s = _TRAILING_SELF.sub("", s)
    s = _RELATIVE.sub("", s)
    return _strip_lead(s)


_VALUE = re.compile(
    r"^[-+\u2212]?[\d.,/%\s]*\d[\d.,/%\s]*$|^(?:[-+]?(?:nan|inf|infinity)|high|low|medium|yes|no|none|n/?a)$",
    re.IGNORECASE,
)


def _drop_restated_options(s: str, q: _Question) -> str:
    """ "Of C, C++, Java, C# and Rust, only Java and C# are ...": the options restated before the
    answer are not the answer; the sentence goes on after them."""
    m = _AMONG.match(s)
    if not q.options or m is None:
        return s
    options = {canonical_label(o) for o in q.options}
    rest = s
    for comma in re.finditer(r",\s*", s):  # the longest run of options before a comma
        pieces = [
            canonical_label(p)
            for p in re.split(r"\s*,\s*|\s+(?:and|or)\s+", _restore(s[m.end() : comma.start()]))
        ]
        if not all(p in options for p in pieces if p):
            break
        rest = s[comma.end() :]
    return rest


_SO_DO = re.compile(r",?\s+and\s+so\s+(?:do|does|did)\s+(?P<more>[^;]+)$", re.IGNORECASE)


def _so_do(s: str, q: _Question) -> str:
    """ "Texas and California border Mexico, and so do Arizona and New Mexico" -> "Texas and
    California and Arizona and New Mexico border Mexico": the inverted subjects join the
    first."""
    m = _SO_DO.search(s) if " so " in s else None
    if m is None:
        return s
    words = s[: m.start()].split()
    v = _main_verb(words, q)
    if not v:
        return s
    return " ".join(words[:v] + ["and", m.group("more").strip()] + words[v:])


def _drop_trailing_agent(s: str, q: _Question) -> str:
    """ ", managed by Brian Epstein" names nobody the question asks for, unless the question
    asks about that very act ("Who invented the light bulb?": ", invented by Humphry Davy")."""
    if " by " not in s and " with the " not in s:  # the regex's cost only where it can match
        return s
    m = _TRAILING_AGENT.search(s)
    if m is None or q.echoes(m.group(0).strip(" ,").split()[0]):
        return s
    return s[: m.start()]


def _sentence_labels(sentence: str, q: _Question) -> list[str]:
    s = _so_do(_drop_trailing_agent(_drop_restated_options(_normalise_sentence(sentence), q), q), q)
    if not s:
        return []
    # "Three oceans border the U.S.: the Pacific, ..." -> the part after the colon; but in
    # "Atlantic: 55%" the part after it is a value and the answer comes first
    colon = _COLON_BEFORE.search(s)
    if colon and _VALUE.match(s[colon.end() :]):
        return _side_labels(s[: colon.start()], q, subject=False)
    if colon:
        got = _span_labels(s[colon.end() :], q)
        if got:
            return got
    return _span_labels(s, q)


_PAIR = re.compile(r"\b([A-Z][\w.'\-]*(?:\s+[A-Z][\w.'\-]*){0,3})\s+[-\u2013\u2014]+\s+(?=[A-Z])")


def _span_labels(s: str, q: _Question) -> list[str]:
    # "India - Pakistan, India - China": pairs led by the question's topic name its partners
    s = _PAIR.sub(lambda m: "" if q.restates(m.group(1)) else m.group(0), s)
    s = _cut_dashes(s)
    attached = _ATTACH.split(s)
    head, extras = attached[0], attached[1:]
    labels: list[str] = []
    reading = _Reading()
    for k, clause in enumerate(_split_clauses(head, q)):
        labels.extend(_clause_labels(clause, q, k, reading))
    if labels or not head.strip():
        for extra in extras:
            labels.extend(_side_labels(extra, q, subject=False))
    return labels


def _prose_labels(lines: list[str], q: _Question) -> list[str]:
    text = " ".join(x.strip() for x in lines if x.strip())
    labels: list[str] = []
    answered = False
    for sentence in _sentences(text)[:40]:
        if "?" in sentence or _WH_START.match(sentence):
            continue  # a (restated or echoed) question answers nothing
        if not answered:
            if _PREAMBLE.match(sentence) and not _COLON_THEN.search(sentence):
                continue
            got = _sentence_labels(sentence, q)
            if got:
                labels.extend(got)
                answered = True
            continue
        # After the answer: only sentences that add answers ("X also ...", "the fourth state").
        words = {_core(w) for w in sentence.split()}
        if _NEGATION.search(sentence):
            continue
        if (_ADDITIVE_CUES.search(sentence) or words & _ORDINAL_CUES) and _restates_predicate(
            sentence, q
        ):
            labels.extend(_sentence_labels(sentence, q))
    return labels


def _restates_predicate(sentence: str, q: _Question) -> bool:
    words = sentence.split()
    v = _main_verb(words, q)
    if v is None:
        return False
    return any(q.echoes(w) and _core(w) not in _PRONOUNS for w in words[v:])


# --------------------------------------------------------------------------- entry point


def _dedupe(labels: list[str]) -> list[str]:
    """Canonical labels, each answer once: a label whose words all occur in an earlier label is
    that answer again ("pacific" after "pacific ocean"); so is an earlier label extended by a
    possessive ("earth s" after "earth")."""
    out: list[str] = []
    for raw in labels:
        label = canonical_label(raw)
        if (
            not label
            or not any(c.isalnum() for c in label)
            or len(label.split()) > MAX_ITEM_WORDS
            or len(label) > MAX_ITEM_CHARS
        ):
            continue
        words = set(label.split())
        if any(
            words <= set(prev.split()) and not (set(prev.split()) - words) & QUALIFIERS
            for prev in out
        ):
            continue
        if any(set(prev.split()) < words and words - set(prev.split()) <= {"s"} for prev in out):
            continue
        out.append(label)
    return out


_REFUSAL_START = re.compile(
    r"^\W*(?:i\s+(?:am\s+)?(?:sorry|afraid)|sorry|as\s+an\s+(?:ai|language\s+model)|i\s+(?:do\s+not|don't|cannot|can\s*not|"
    r"can't|am\s+unable|am\s+not\s+able|have\s+no|am\s+not\s+(?:sure|certain))|unfortunately|i\s+have\s+no\s+idea|no\s+idea|"
    r"unknown|n/?a\b|none\b|not\s+sure)",
    re.IGNORECASE,
)


def read_answers(text: str, question: str | None = None) -> list[str]:
    """Canonical answer labels stated in `text`, in order of first mention (see module doc)."""
    q = _question(question)
    # Control characters would collide with the separator stand-ins and are never part of an answer.
    text = protect_and_names(q.protect_titles(_CONTROL.sub(" ", text)))
    fenced = _FENCE.findall(text)
    if fenced:
        text = "\n".join(fenced)
    stripped = text.strip()
    for opener in ("{", "["):
        pos = stripped.find(opener)
        if pos == 0 or (pos > 0 and stripped[:pos].rstrip().endswith(":")):
            strings = json_answer_strings(stripped[pos:])
            if strings is not None:
                labels: list[str] = []
                for s in strings:
                    labels.extend(_item_labels(s, q))
                return _dedupe(labels)
    for pattern, repl in _CONTRACTIONS:
        text = pattern.sub(repl, text)
    first = _sentences(" ".join(text.split()[:60]))[:1]
    if first and _REFUSAL_START.match(first[0]) and not _BUT.search(first[0]):
        return []  # "I'm sorry, I cannot ...", "As an AI, I don't have ..."
    items, prose = _units(text)
    labels = []
    if items:
        for item in items:
            labels.extend(_item_labels(item, q))
    else:
        labels = _prose_labels(prose, q)
    return _dedupe(labels)
