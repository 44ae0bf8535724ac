"""Does a predicted answer label name a reference answer? One rule for every task that compares
labels with a dataset's alias lists (sets: Hamming and F1; simplex: KL), stdlib only.

Both sides are read as names: `pipeline.text.normal_forms.canonical_label` (case, accents, a leading article,
acronym dots and punctuation do not matter; letters and symbols inside a name do: "Vitamin A"
!= "Vitamin D", "C" != "C++"), then a spelling form for comparison only: "&" is "and", "#" is
"sharp", "+" is "plus", number words and Roman numerals after a name are digits ("World War
II" ~ "World War 2" ~ "Second World War", "seven" ~ "7"), "Mt"/"St"/"Ft" are "Mount"/"Saint"/
"Fort". A label names an
answer when, against one of its aliases, it is

1. the same name (rule "alias");
2. the same words but one plural "s" (rule "plural": "violins" ~ "violin") or one letter typed
   differently inside a long word (rule "spelling": "Luxemburg" ~ "Luxembourg", "Proctor" ~
   "Procter"; never at a word's end, where names differ: "Dominica" / "Dominican");
3. the same name with or without a generic head noun that says what kind of thing it is (rule
   "head_noun": "Atlantic Ocean" ~ "Atlantic", "Lake Superior" ~ "Superior", "German
   language" ~ "German"), or a head the question itself names ("Which vitamins ...?": "A" ~
   "Vitamin A"; "What are the blood types ...?": "type O" ~ "O"); a qualifier is never such a
   head ("North Korea" !~ "Korea", "New Mexico" !~ "Mexico", "Saturn V" !~ "Saturn");
4. in a question about people (who, presidents, monarchs, members, writers, ...), a surname
   or the name without a title or regnal number (rule "person": "Lennon" ~ "John Lennon",
   "Dr. King" ~ "Martin Luther King Jr.", "Elizabeth" ~ "Elizabeth I"; never a first name
   alone: "John" !~ "John Lennon").

Everything else is no match ("none"): names only world knowledge connects ("DPRK" ~ "North
Korea", "Great War" ~ "World War I") need the optional judge (`evaluation.match_judge`: the
cell's NLI / similarity model or an LLM), which then decides (rule "judge"). When a label could
name two answers, the strictest rule wins (alias, then plural and spelling, head noun, person).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from pipeline.text.normal_forms import canonical_label, to_text

__all__ = [
    "GENERIC_HEADS",
    "QUALIFIERS",
    "Match",
    "Alignment",
    "asks_for_people",
    "names_match",
    "match_label",
    "align_labels",
    "answer_names",
    "reference_labels",
    "remap_distribution",
    "Judge",
]

# Nouns that say what kind of thing a name is (singular; plurals are folded).
GENERIC_HEADS = frozenset(
    "ocean sea river lake mount mountain island isle desert canal strait bay peninsula volcano "
    "glacier falls waterfall valley forest city town language dialect planet dwarf element gas "
    "metal dynasty empire band group company corporation corp inc ltd plc university college "
    "state republic".split()
)
# Words that make a different thing of a name, never a head: "North Korea", "New Mexico".
QUALIFIERS = frozenset(
    "north south east west northern southern eastern western northeast northwest southeast "
    "southwest new old upper lower central greater little inner outer equatorial united great "
    "first second third".split()
)
_PEOPLE = re.compile(
    r"\b(?:who(?:m|se)?|persons?|people|presidents?|monarchs?|kings?|queens?|emperors?|popes?|"
    r"members?|leaders?|writers?|authors?|painters?|artists?|composers?|scientists?|actors?|"
    r"actresses?|singers?|musicians?|players?|athletes?|astronauts?|founders?|inventors?|"
    r"explorers?|poets?|philosophers?|ministers?|chancellors?|children|sons?|daughters?|wives|"
    r"wife|husbands?|brothers?|sisters?|rulers?|pharaohs?|generals?|prophets?|apostles?|saints?)\b",
    re.IGNORECASE,
)
_TITLES = frozenset(
    "dr doctor mr mrs ms miss sir dame lord lady president king queen prince "
    "princess saint st general captain professor prof pope".split()
)
_SUFFIXES = frozenset(
    "jr junior sr senior i ii iii iv v vi vii viii ix x 1 2 3 4 5 6 7 8 9 10".split()
)
_ABBREVIATED = {"mt": "mount", "st": "saint", "ft": "fort"}
_UNITS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen".split()
    )
}
_TENS = {
    w: 10 * (i + 2)
    for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())
}
_ROMAN = re.compile(r"^(?=[ivx]+$)x{0,3}(?:ix|iv|v?i{0,3})$")
_ROMAN_VALUE = {"i": 1, "v": 5, "x": 10}

# judge(question, label, aliases) -> whether the label names that answer
Judge = Callable[[str, str, Sequence[str]], bool]

_RULE_ORDER = ("alias", "plural", "spelling", "head_noun", "abbreviation", "person", "judge")


@dataclass(frozen=True)
class Match:
    """How one predicted label was matched: the index of the reference answer it names (None:
    it names none) and the rule that decided (see the module doc; "none" when none did)."""

    label: str
    answer: int | None
    rule: str

    def as_dict(self) -> dict:
        return {"label": self.label, "answer": self.answer, "rule": self.rule}


def _singular(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-3] + "y" if word.endswith("ies") else word[:-1]
    return word


def _roman(word: str) -> int:
    total, prev = 0, 0
    for ch in reversed(word):
        value = _ROMAN_VALUE[ch]
        total, prev = (total - value, prev) if value < prev else (total + value, value)
    return total


_ORDINALS = {"first": "1", "second": "2", "third": "3", "fourth": "4", "fifth": "5", "sixth": "6"}


def spelling_form(key: str) -> list[str]:
    """The words of a canonical label in the form names are compared in (module doc)."""
    first, _, rest = key.partition(" ")
    if first in _ORDINALS and len(rest.split()) >= 2:
        key = f"{rest} {_ORDINALS[first]}"  # "second world war" is "world war 2"
    s = key.replace("++", " plus plus ").replace("+", " plus ").replace("#", " sharp ")
    s = s.replace("&", " and ")
    words: list[str] = []
    for i, w in enumerate(s.split()):
        w = _ABBREVIATED.get(w, w)
        numbered = _NUMBERED_ABBREVIATION.match(w)
        if numbered and _ROMAN.match(numbered.group(2)):
            w = numbered.group(1) + str(_roman(numbered.group(2)))  # "wwii" is "ww2"
        if w in _UNITS:
            w = str(_UNITS[w])
        elif w in _TENS:
            w = str(_TENS[w])
        elif i > 0 and _ROMAN.match(w) and words and not words[-1].isdigit():
            w = str(_roman(w))  # "world war ii": a numeral after a name
        if words and w.isdigit() and len(w) == 1 and words[-1] in {str(v) for v in _TENS.values()}:
            words[-1] = str(int(words[-1]) + int(w))  # "twenty nine" -> 29
            continue
        words.append(w)
    return words


def _one_inner_edit(a: str, b: str) -> bool:
    """`a` and `b` (long words) differ by one substitution, insertion, deletion or swap of
    neighbours, and not in their last letter (where names differ: "Dominica" / "Dominican")."""
    if min(len(a), len(b)) < 7 or abs(len(a) - len(b)) > 1 or a[-1] != b[-1]:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (
            len(diff) == 2
            and diff[1] == diff[0] + 1
            and a[diff[0]] == b[diff[1]]
            and a[diff[1]] == b[diff[0]]
        )
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:i] + long_[i + 1 :] == short for i in range(len(long_)))


# The kind a head names, so "Mount Everest" fits "Which mountains ...?" but "New York City"
# does not fit "Which states ...?".
_KIND = {
    "mount": "mountain",
    "mt": "mountain",
    "isle": "island",
    "town": "city",
    "corp": "company",
    "corporation": "company",
    "inc": "company",
    "ltd": "company",
    "plc": "company",
}
# "Republic of Ireland" ~ "Ireland", "Kingdom of the Netherlands" ~ "Netherlands"
_STATE_TITLE = frozenset(
    "republic kingdom state commonwealth principality grand duchy federal of the".split()
)
_NAME_STOP = frozenset("and of the".split())


def _kind(word: str) -> str:
    return _KIND.get(word, word)


# a consonant abbreviation with a Roman numeral attached: "wwii", "wwi" (never "hawaii")
_NUMBERED_ABBREVIATION = re.compile(r"^([b-df-hj-np-tw-z]{2,3}?)([ivx]+)$")


def _initials(short: list[str], long_: list[str]) -> bool:
    """ "us" / "usa" / "car" / "nyc" / "mlk" are the initials of the long name's words (function
    words skipped); "j and j" / "r and b" are "johnson and johnson" / "rhythm and blues" word by
    word. Two letters at least, a long name of two words at least."""
    content = [w for w in long_ if w not in _NAME_STOP]
    numbered = re.match(r"^([a-z]{2,5})(\d+)$", short[0]) if len(short) == 1 else None
    if numbered and content and content[-1] == numbered.group(2):
        return _initials([numbered.group(1)], long_[:-1])  # "ww2" ~ "world war 2"
    if len(content) < 2:
        return False
    if len(short) == 1 and 2 <= len(short[0]) <= 6 and short[0].isalpha():
        return short[0] == "".join(w[0] for w in content) or short[0] == "".join(
            w[0] for w in long_
        )
    return (
        len(short) == len(long_)
        and sum(len(w) == 1 for w in short) >= 2
        and all(
            a == b or (len(a) == 1 and len(b) >= 3 and b.isalpha() and b.startswith(a))
            for a, b in zip(short, long_)
        )
    )


def _rule(
    label: list[str],
    alias: list[str],
    question_words: frozenset[str],
    people: bool,
    abbreviated: frozenset[str] = frozenset(),
) -> str | None:
    """The rule by which two names (spelling forms) are one answer, or None. `abbreviated`:
    the label's words written with a dot ("Calif.", "Vit."), which may stand for longer words."""
    if label == alias:
        return "alias"
    if len(label) == len(alias):
        if [_singular(w) for w in label] == [_singular(w) for w in alias]:
            return "plural"
        diff = [i for i in range(len(label)) if label[i] != alias[i]]
        if len(diff) == 1 and _one_inner_edit(label[diff[0]], alias[diff[0]]):
            return "spelling"
        if abbreviated and all(
            a == b or (a in abbreviated and len(a) >= 3 and b.startswith(a))
            for a, b in zip(label, alias)
        ):
            return "abbreviation"  # "Calif." ~ "California", "Vit. D" ~ "Vitamin D"
    shorter, longer = sorted((label, alias), key=lambda w: (len(w), len(" ".join(w))))
    if _initials(shorter, longer):
        return "abbreviation"
    if people and _person_match(label, alias):
        return "person"
    if len(shorter) == len(longer):
        return None
    asked_kinds = {_kind(w) for w in question_words & GENERIC_HEADS}
    for start in range(len(longer) - len(shorter) + 1):
        if longer[start : start + len(shorter)] != shorter:
            continue
        extra_words = longer[:start] + longer[start + len(shorter) :]
        extra = {_singular(w) for w in extra_words}
        if extra & QUALIFIERS:
            continue
        kinds = {_kind(w) for w in extra}
        if extra <= GENERIC_HEADS | question_words and not (
            asked_kinds and kinds - asked_kinds - question_words
        ):
            return "head_noun"  # not when the question asks for another kind: "states" / "city"
        if (
            start > 0
            and "of" in extra_words
            and set(extra_words) <= _STATE_TITLE
            and start + len(shorter) == len(longer)
        ):
            return "head_noun"  # "Republic of Ireland" ~ "Ireland"
    return None


def _person_match(label: list[str], alias: list[str]) -> bool:
    """ "lennon" ~ "john lennon", "dr king" ~ "martin luther king jr", "elizabeth" ~
    "elizabeth 1": a surname, or the name without titles and suffixes; never a first name."""
    if {"and", "of", "&"} & (set(label) | set(alias)) or max(len(label), len(alias)) > 5:
        return False

    def core(words: list[str]) -> tuple[list[str], list[str]]:
        while len(words) > 1 and words[0] in _TITLES:
            words = words[1:]
        end = len(words)
        while end > 1 and words[end - 1] in _SUFFIXES:
            end -= 1
        return words[:end], words[end:]

    (a, a_suffix), (b, b_suffix) = core(label), core(alias)
    if a_suffix and b_suffix and a_suffix != b_suffix:
        return False  # "Henry VIII" is not "Henry VII"
    if a == b:
        return True  # "elizabeth" ~ "elizabeth 1", "king" ~ "dr king"
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return len(short) == 1 and len(long_) > 1 and long_[-1] == short[0]  # the surname


_ASKS = re.compile(r"\b(?:which|what)\s+((?:[\w'-]+\s+){0,5})", re.IGNORECASE)
_VERBISH = re.compile(
    r"^(?:is|are|was|were|be|been|have|has|had|do|does|did|can|could|will|would|"
    r"shall|should|may|might|must|\w+ed)$",
    re.IGNORECASE,
)


@lru_cache(maxsize=1024)  # every label of a prompt is matched against the same question
def asks_for_people(question: str) -> bool:
    """A who-question, or a which/what-question whose asked-for noun is a person ("Which US
    presidents ...", "Which English monarchs ..."; not "Which rockets carried astronauts")."""
    if re.search(r"\bwho(?:m|se)?\b", question, re.IGNORECASE):
        return True
    m = _ASKS.search(question)
    if m is None:
        return False
    for word in m.group(1).split():
        if _VERBISH.match(word):
            return False
        if _PEOPLE.fullmatch(word):
            return True
    return False


@lru_cache(maxsize=1024)
def _question_words(question: str) -> frozenset[str]:
    """Singular content words of the question, which may head an answer ("Which vitamins")."""
    return frozenset(
        _singular(w)
        for w in canonical_label(question).split()
        if len(w) > 2 and w not in QUALIFIERS
    )


def names_match(label: object, alias: object, question: str = "") -> bool:
    """Whether `label` names the same answer as `alias` by the rules of this module."""
    return match_label(label, [[alias]], question).answer is not None


def _aliases(answer: object) -> list[str]:
    if isinstance(answer, str | bytes | bytearray):
        answer = [answer]
    return [c for c in (canonical_label(to_text(a)) for a in answer) if c]


def match_label(
    label: object,
    answers: Sequence[Sequence[object]],
    question: str = "",
    judge: Judge | None = None,
) -> Match:
    """The reference answer `label` names: the first answer by the strictest rule that holds."""
    if judge is None and type(label) is str and type(question) is str:
        # a pure function of its arguments without a judge; the metrics of every method ask it
        # again for the same labels and answers (a Match is frozen, so sharing it is safe)
        try:
            return _match_label_cached(label, _frozen(answers), question)
        except TypeError:  # an unhashable alias: no memo
            pass
    return _match_label(label, answers, question, judge)


def _answer_forms(answer: object) -> tuple[list[str], list[list[str]], list[list[str]]]:
    """(canonical aliases, their spelling forms, those of the aliases of several words) of one
    reference answer: the same for every label a prompt's responses hold (read-only lists)."""
    if isinstance(answer, tuple):
        try:
            return _answer_forms_cached(answer)
        except TypeError:  # an unhashable alias
            pass
    return _answer_forms_uncached(answer)


def _answer_forms_uncached(answer: object):
    aliases = _aliases(answer)
    forms = [spelling_form(a) for a in aliases]
    return aliases, forms, [f for a, f in zip(aliases, forms) if len(a.split()) > 1]


_answer_forms_cached = lru_cache(maxsize=1 << 14)(_answer_forms_uncached)


def _frozen(answers: Sequence[Sequence[object]]) -> tuple:
    """`answers` as a memo key (TypeError: an alias is unhashable)."""
    return tuple(tuple(a) if not isinstance(a, str | bytes | bytearray) else (a,) for a in answers)


@lru_cache(maxsize=1 << 16)
def _match_label_cached(label: str, answers: tuple, question: str) -> Match:
    return _match_label(label, answers, question, None)


def _match_label(
    label: object, answers: Sequence[Sequence[object]], question: str, judge: Judge | None
) -> Match:
    key = canonical_label(to_text(label))
    if not key:
        return Match(key, None, "none")
    words = spelling_form(key)
    abbreviated = frozenset(
        canonical_label(w) for w in re.findall(r"([^\W\d_]{3,})\.", to_text(label))
    )
    question = to_text(question)
    asked = _question_words(question)
    people = asks_for_people(question)
    best: tuple[int, int] | None = None  # (rule rank, answer index)
    person_answers: set[int] = set()
    for i, answer in enumerate(answers):
        aliases, forms, full_names = _answer_forms(answer)
        for alias, form in zip(aliases, forms):
            rule = "alias" if alias == key else _rule(words, form, asked, people, abbreviated)
            if (
                rule == "person"
                and len(words) > len(alias.split())
                and full_names
                and not any(_person_match(words, f) for f in full_names)
            ):
                rule = None  # "Sofia Coppola" is not "Coppola" when the answer is Francis Ford
            if rule == "person":
                person_answers.add(i)
            if rule is not None:
                rank = _RULE_ORDER.index(rule)
                if best is None or rank < best[0]:
                    best = (rank, i)
    if best is not None and not (_RULE_ORDER[best[0]] == "person" and len(person_answers) > 1):
        return Match(key, best[1], _RULE_ORDER[best[0]])  # "Henry" names no answer of two Henrys
    if judge is not None:
        for i, answer in enumerate(answers):
            aliases = [to_text(a) for a in ([answer] if isinstance(answer, str) else answer)]
            if aliases and judge(question, to_text(label), aliases):
                return Match(key, i, "judge")
    return Match(key, None, "none")


@dataclass(frozen=True)
class Alignment:
    """A predicted label set and the reference in one label space: each reference answer is
    its first alias (canonical); a predicted label that names an answer becomes that answer's
    label, any other keeps its own. `matches` says how each predicted label was read."""

    pred: frozenset[str]
    ref: frozenset[str]
    matches: tuple[Match, ...]


def answer_names(answers: Sequence[Sequence[object]]) -> list[str | None]:
    """The label of each reference answer: its first usable alias, canonical (None when it has
    none), in the order of `answers`."""
    return [aliases[0] if aliases else None for aliases in map(_aliases, answers)]


def reference_labels(answers: Sequence[Sequence[object]]) -> list[str]:
    """One label per reference answer with a usable alias (see `answer_names`)."""
    return [name for name in answer_names(answers) if name is not None]


def remap_distribution(
    dist: dict, answers: Sequence[Sequence[object]], question: str = "", judge: Judge | None = None
) -> dict[str, float]:
    """A predicted distribution with each label renamed to the reference answer it names
    (probabilities of labels naming the same answer summed); other labels keep their own."""
    names = answer_names(answers)
    out: dict[str, float] = {}
    for label, p in dist.items():
        m = match_label(label, answers, question, judge)
        key = names[m.answer] if m.answer is not None else m.label
        if key:
            out[key] = out.get(key, 0.0) + float(p)
    return out


def align_labels(
    pred_labels: Iterable[object],
    answers: Sequence[Sequence[object]],
    question: str = "",
    judge: Judge | None = None,
) -> Alignment:
    """`pred_labels` and `answers` (one alias list per reference answer) in one label space."""
    pred_labels = tuple(pred_labels)
    if judge is None and type(question) is str and all(type(x) is str for x in pred_labels):
        # a pure function of its arguments without a judge: a prompt's methods often decide the
        # same set, and each set metric (Hamming, F1) aligns it again
        try:
            return _align_labels_cached(pred_labels, _frozen(answers), question)
        except TypeError:  # an unhashable alias: no memo
            pass
    return _align_labels(pred_labels, answers, question, judge)


@lru_cache(maxsize=1 << 14)
def _align_labels_cached(pred_labels: tuple, answers: tuple, question: str) -> Alignment:
    return _align_labels(pred_labels, answers, question, None)


def _align_labels(
    pred_labels: Sequence[object],
    answers: Sequence[Sequence[object]],
    question: str,
    judge: Judge | None,
) -> Alignment:
    names = answer_names(answers)
    matches = []
    pred: set[str] = set()
    for label in pred_labels:
        m = match_label(label, answers, question, judge)
        if not m.label:
            continue
        matches.append(m)
        pred.add(names[m.answer] if m.answer is not None else m.label)
    return Alignment(frozenset(pred), frozenset(n for n in names if n is not None), tuple(matches))
