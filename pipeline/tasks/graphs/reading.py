"""Graph g_T (summarisation): each response -> frozenset of (head, relation, tail) triples.

Extractors (paper appendix "Mapping Language Outputs to Latent Structures"):
- ``"kggen"``: KGGen (`kg-gen` on PyPI; Mo et al. 2025), the paper's choice, model configurable
  (any LiteLLM model string, e.g. "openai/gpt-4.1-mini", or an OpenAI-compatible `api_base`).
  `kg-gen` 0.4.0 conflicts with the main environment (it downgrades openai, filelock and
  python-dateutil through dspy/litellm), so it lives in `.venv-kggen` (scripts/setup_kggen_venv.sh)
  and `pipeline.tasks.graphs.kggen.KGGenRunner` calls it there through a worker process, with an
  on-disk cache. KGGen's own clustering of each prompt's aggregated graph is on by default, as
  in the paper.
- ``"local"`` / ``"llm"``: a triple-extraction prompt through a local generation backend or an
  `LLMClient`, output parsed line by line ("head | relation | tail").
- ``"rule"``: a rule-based subject-verb-object extractor (the embedded default): sentence split,
  a verb lexicon plus "-ed" forms, pronouns resolved to the previous subject, entities in
  canonical form and relations reduced to crude verb stems so paraphrased summaries share edges.

Entities and relations are aggregated over the samples of one prompt before comparison
(canonical form, then an optional equivalence clustering of entities and of relations, as
KGGen's `aggregate` + `cluster`). `graph_to_text` is the paper's g_T^-1.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.mapping.extractor import LocalModelExtractor
from pipeline.mapping.labels import EquivalenceFn, attach_labels, representatives
from pipeline.mapping.response_text import strip_prompt_echo
from pipeline.tasks.graphs.space import graph_to_text as _graph_to_text
from pipeline.text.normal_forms import canonical_label, to_text

__all__ = [
    "Triple",
    "GraphExtractor",
    "TRIPLE_EXTRACTION_PROMPT",
    "extract_triples",
    "parse_triples_output",
    "merge_graphs",
    "graph_to_text",
]

Triple = tuple[str, str, str]
METHODS = ("rule", "kggen", "local", "llm")
_MAX_CHARS = 100_000

# Our own prompt for the local/LLM triple extractor (the paper used KGGen, which has its own).
TRIPLE_EXTRACTION_PROMPT = (
    "Extract the facts stated in the text as knowledge-graph triples.\n"
    "Output one triple per line as: subject | relation | object\n"
    "No numbering, no extra text. If the text states no fact, output: none\n\n"
    "Example\n"
    "Text: Marie Curie won the Nobel Prize in 1903. She was born in Warsaw.\n"
    "Output:\n"
    "Marie Curie | won | Nobel Prize\n"
    "Marie Curie | born in | Warsaw\n\n"
    "Text: {text}\n"
    "Output:\n"
)

# ----------------------------------------------------------------------------- rule-based SVO

_AUX = {
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "am",
    "has",
    "have",
    "had",
    "having",
    "will",
    "would",
    "can",
    "could",
    "may",
    "might",
    "shall",
    "should",
    "must",
    "do",
    "does",
    "did",
}
_NEG_ADV = {
    "not",
    "also",
    "now",
    "still",
    "already",
    "reportedly",
    "recently",
    "finally",
    "never",
    "just",
    "only",
}
# Common verbs of news summaries, in stem form (see `_stem`).
_VERBS = {
    "say",
    "said",
    "announc",
    "win",
    "won",
    "lose",
    "lost",
    "kill",
    "arrest",
    "charg",
    "find",
    "found",
    "make",
    "made",
    "take",
    "took",
    "give",
    "gave",
    "lead",
    "led",
    "become",
    "became",
    "hold",
    "held",
    "meet",
    "met",
    "tell",
    "told",
    "show",
    "reveal",
    "claim",
    "accus",
    "deni",
    "sign",
    "join",
    "leave",
    "left",
    "launch",
    "release",
    "report",
    "warn",
    "call",
    "plan",
    "die",
    "died",
    "injur",
    "attack",
    "visit",
    "buy",
    "bought",
    "sell",
    "sold",
    "own",
    "hit",
    "beat",
    "score",
    "defeat",
    "elect",
    "appoint",
    "name",
    "includ",
    "contain",
    "cause",
    "caus",
    "help",
    "want",
    "need",
    "face",
    "receive",
    "receiv",
    "pay",
    "paid",
    "raise",
    "rais",
    "ban",
    "approve",
    "approv",
    "reject",
    "support",
    "oppos",
    "discover",
    "creat",
    "build",
    "built",
    "start",
    "begin",
    "began",
    "end",
    "close",
    "open",
    "move",
    "return",
    "play",
    "live",
    "work",
    "write",
    "wrote",
    "born",
    "marri",
    "divorc",
    "sue",
    "sued",
    "fire",
    "hire",
    "rescu",
    "save",
    "destroy",
    "damag",
    "flee",
    "fled",
    "invad",
    "capture",
    "captur",
    "seiz",
    "convict",
    "sentenc",
    "jail",
    "releas",
    "border",
    "locat",
    "paint",
    "invent",
    "establish",
    "compris",
    "consist",
    "orbit",
    "produc",
    "develop",
    "design",
    "discovered",
    "host",
    "serve",
    "serv",
    "represent",
    "describ",
    "believ",
    "expect",
    "increas",
    "decreas",
    "grow",
    "grew",
    "fall",
    "fell",
    "rise",
    "rose",
    "drop",
    "cut",
    "post",
    "earn",
    "spend",
    "spent",
}
_NOT_VERBS_ED = {
    "united",
    "red",
    "bed",
    "need",
    "based",
    "armed",
    "aged",
    "related",
    "detailed",
    "advanced",
    "limited",
    "unnamed",
}
_PREPS = {
    "in",
    "on",
    "at",
    "to",
    "for",
    "with",
    "by",
    "from",
    "of",
    "into",
    "over",
    "against",
    "about",
    "as",
    "after",
    "during",
}
_PRONOUNS = {"he", "she", "it", "they", "him", "her", "them", "this", "these", "those", "who"}
_LEADING = re.compile(
    r"^(?:however|meanwhile|also|moreover|furthermore|additionally|in addition|but|and|so|then|later|earlier|"
    r"on \w+day|last \w+|this \w+|in \d{4}|about|around|nearly|almost|over|some|roughly|approximately)\s*,?\s+",
    re.IGNORECASE,
)
_DETERMINERS = re.compile(
    r"^(?:his|her|its|their|our|my|your|this|that|these|those|some|several)\s+", re.IGNORECASE
)
_POSSESSIVES = re.compile(r"\b(?:his|her|its|their|our|my|your)\s+", re.IGNORECASE)
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+|;\s+")
# Clause boundaries: coordinated clauses, subordinate clauses (each is read on its own) and
# "that"-complements of reporting verbs ("found that the drug reduced symptoms").
_CLAUSES = re.compile(
    r",\s+(?:and|but|while|whereas)\s+|\s+and\s+(?=(?:he|she|it|they|the|its|his|her|their)\s)"
    r"|,?\s+\b(?:after|when|because|as|while|before|since|although|though|until|whereas|once)\s+(?=\S+\s+\S)"
    r"|\s+that\s+(?=(?:the|a|an|its|his|her|their|he|she|it|they)\s)",
    re.IGNORECASE,
)
# Participle clauses and reporting tails say nothing new: ", delaying trains", ", the head teacher said".
_PARTICIPLE_CLAUSE = re.compile(r",\s+\w+ing\b[^,;]*", re.IGNORECASE)
_REPORTING_TAIL = re.compile(
    r",\s+(?:[\w'\- ]{1,40}?\s)?(?:said|says|told|added|reported|announced)\s*\.?\s*$",
    re.IGNORECASE,
)
_RELATIVE = re.compile(
    r"(?P<head>\b[A-Z][\w'\-]*(?:\s+[A-Z][\w'\-]*)*|\b\w+),\s+(?:which|who)\s+(?P<body>[^,]+),",
    re.UNICODE,
)
_TOKEN = re.compile(
    r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|[A-Za-z0-9][A-Za-z0-9'\-.]*[A-Za-z0-9]|[A-Za-z0-9]"
)
MAX_OBJECT_WORDS = 6
_TIME = re.compile(
    r"^(?:(?:on|in|at|by|during|since|until|for|last|next|this|early|late)\s+)?(?:the\s+)?"
    r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april|may|june|july|"
    r"august|september|october|november|december|spring|summer|autumn|fall|winter|today|yesterday|tomorrow|"
    r"tonight|morning|evening|night|week|month|year|decade|weekend|\d{4}s?|\d+\s+(?:years?|months?|weeks?|days?|hours?))\b",
    re.IGNORECASE,
)
_TIME_WORDS = {
    "last",
    "next",
    "yesterday",
    "today",
    "tomorrow",
    "tonight",
    "earlier",
    "later",
    "ago",
}
_PARTICLES = {"out", "up", "off", "down", "away", "back", "over"}
_MODALS = {
    "will",
    "would",
    "can",
    "could",
    "may",
    "might",
    "shall",
    "should",
    "must",
    "do",
    "does",
    "did",
    "cannot",
}
_REPORTING = {
    "said",
    "say",
    "told",
    "tell",
    "claim",
    "believ",
    "think",
    "thought",
    "suggest",
    "warn",
}
_ADVERB_OBJECTS = {
    "twice",
    "once",
    "again",
    "too",
    "also",
    "here",
    "there",
    "home",
    "abroad",
    "early",
    "late",
}
_OBJECT_PRONOUNS = {"him", "her", "them", "it"}
_NOT_VERB_AFTER = {
    "the",
    "a",
    "an",
    "his",
    "her",
    "its",
    "their",
    "our",
    "my",
    "your",
    "this",
    "that",
    "these",
    "those",
    "some",
    "several",
    "new",
    "former",
    "local",
    "heavy",
    "private",
    "first",
}
_EXTRA_VERBS = {
    "live",
    "go",
    "spread",
    "stop",
    "weigh",
    "treat",
    "vote",
    "hire",
    "bring",
    "keep",
    "analyse",
    "analyze",
    "replace",
    "steal",
    "stole",
    "stolen",
    "spend",
    "welcome",
    "oppose",
    "promise",
    "add",
    "blame",
    "collect",
    "organise",
    "organize",
    "rescue",
    "elect",
    "defeat",
    "injure",
    "flood",
    "destroy",
    "criticise",
    "criticize",
    "reduce",
    "thank",
    "start",
    "close",
    "open",
    "ran",
    "run",
    "give",
    "gave",
    "lose",
    "lost",
    "save",
    "cancel",
    "sentence",
    "convict",
    "receive",
    "build",
    "identify",
    "knock",
    "hit",
    "score",
    "beat",
    "lead",
    "leads",
    "make",
    "makes",
    "report",
    "uncover",
    "strike",
    "fine",
    "order",
    "perform",
    "sign",
    "meet",
    "warn",
    "burst",
    "break",
    "take",
    # irregular past forms (the "-ed" rule cannot see them)
    "struck",
    "broke",
    "took",
    "brought",
    "caught",
    "taught",
    "fought",
    "sought",
    "built",
    "sent",
    "spent",
    "lent",
    "kept",
    "left",
    "felt",
    "dealt",
    "held",
    "told",
    "sold",
    "found",
    "stood",
    "understood",
    "shot",
    "cut",
    "put",
    "shut",
    "threw",
    "drew",
    "grew",
    "knew",
    "flew",
    "blew",
    "wore",
    "tore",
    "rode",
    "wrote",
    "drove",
    "rose",
    "chose",
    "froze",
    "spoke",
    "woke",
    "sang",
    "rang",
    "sank",
    "drank",
    "swam",
    "began",
    "came",
    "became",
    "overcame",
    "forgave",
    "ate",
    "fell",
    "hid",
    "bit",
    "lit",
    "fled",
    "led",
    "fed",
    "met",
    "won",
    "dug",
    "hung",
    "stuck",
    "swept",
    "paid",
    "laid",
    "said",
    "made",
    "did",
    "went",
    "saw",
    "got",
    "sat",
    "seized",
    "shook",
    "withdrew",
    "undertook",
}


def _stem(word: str) -> str:
    """Crude English verb stem: "announced"/"announces"/"announcing" -> "announc"."""
    w = word.lower()
    for suffix in ("ing", "ied", "ies", "ed", "es", "s", "e"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            return w[: -len(suffix)] + ("i" if suffix in ("ied", "ies") else "")
    return w


def _is_verb(word: str, position: int, previous: str = "") -> bool:
    w = word.lower()
    if w in _AUX or w == "cannot":
        return True
    if position == 0 or previous.lower() in _NOT_VERB_AFTER or previous[:1].isdigit():
        return False  # a sentence-initial word, or one after a determiner or number, is a noun's
    if (
        previous.lower() in _MODALS
        and w.isalpha()
        and w.islower()
        and w not in _NEG_ADV
        and w not in _NOT_VERB_AFTER
        and w not in _OBJECT_PREPS
    ):
        return True  # "will replace", "can treat": a modal governs a verb in its base form
    if (
        w in _VERBS
        or _stem(w) in _VERBS
        or w in _EXTRA_VERBS
        or _stem(w) in {_stem(v) for v in _EXTRA_VERBS}
    ):
        return True
    return len(w) > 4 and w.endswith("ed") and w not in _NOT_VERBS_ED


def _entity(text: str) -> str:
    """An entity in canonical form: no leading determiner, no possessive determiners ("half of
    their harvest" -> "half of harvest"), and a common-noun title before a name dropped ("its
    rival Voltex" -> "voltex"; capitalised titles stay: "Mayor Ellen Marsh")."""
    s = _POSSESSIVES.sub("", _DETERMINERS.sub("", text.strip()))
    words = s.split()
    first_name = next((i for i, w in enumerate(words) if w[:1].isupper()), None)
    if (
        first_name
        and all(w[:1].islower() and w.isalpha() for w in words[:first_name])
        and not any(w.lower() in _OBJECT_PREPS | {"of"} for w in words[:first_name])
    ):
        s = " ".join(words[first_name:])
    return canonical_label(s)


def _relation(words: list[str]) -> str:
    """Verb group -> relation: auxiliaries/adverbs dropped, verbs stemmed, prepositions kept."""
    content = [w.lower() for w in words if w.lower() not in _AUX and w.lower() not in _NEG_ADV]
    negated = any(w.lower() in {"not", "never"} for w in words)
    if not content:
        return "not be" if negated else "be"  # a bare copula: "X is Y"
    rel = " ".join(w if w in _PREPS else _stem(w) for w in content)
    return f"not {rel}" if negated else rel


_OBJECT_PREPS = {
    "in",
    "on",
    "at",
    "to",
    "for",
    "with",
    "by",
    "from",
    "into",
    "over",
    "against",
    "during",
    "as",
    "near",
    "across",
    "between",
    "through",
    "after",
    "before",
    "under",
    "off",
    "onto",
    "around",
    "about",
    "beneath",
    "below",
    "above",
    "inside",
    "outside",
    "behind",
    "beyond",
    "despite",
    "amid",
    "among",
    "along",
    "via",
    "within",
    "without",
    "toward",
    "towards",
    "throughout",
    "underneath",
    "alongside",
}


def _noun_phrases(words: list[str]) -> tuple[list[str], list[str]]:
    """The object noun phrase(s) at the start of `words` (coordinated: "two children and a dog"
    -> two), and the words after them. A phrase ends at a preposition ("of" stays inside), a
    time word, a second determiner ("the club its first trophy") or MAX_OBJECT_WORDS."""
    phrases: list[str] = []
    current: list[str] = []
    k = 0
    while k < len(words):
        word, low = words[k], words[k].lower()
        if low == ",":
            break
        if current and (
            low in _OBJECT_PREPS
            or low in _TIME_WORDS
            or _TIME.match(" ".join(words[k:]))
            or (low in _AUX and low not in ("have", "has", "had"))
            or len(current) >= MAX_OBJECT_WORDS
            or (
                low in ("the", "a", "an", "its", "his", "her", "their")
                and current[-1].lower() != "of"
            )
        ):
            break
        if not current and low in ("and", "or"):
            break  # "stopped and called ...": no object, a second verb phrase follows
        if re.fullmatch(r"\d+-\d+", low) or (not current and low in _ADVERB_OBJECTS):
            break  # a score ("beat Harlow 3-1"), an adverb ("scored twice")
        if current and low in ("and", "or"):
            nxt = words[k + 1] if k + 1 < len(words) else ""
            if not nxt or _is_verb(nxt, 1):
                break  # "... and called an ambulance": a new verb phrase
            phrases.append(" ".join(current))
            current = []
            k += 1
            continue
        if not current and low in ("the", "a", "an"):
            k += 1
            continue
        current.append(word)
        k += 1
    if current:
        phrases.append(" ".join(current))
    return phrases, words[k:]


def _clause_triples(clause: str, last_subject: str | None, depth: int = 0) -> list[Triple]:
    """Triples of one clause: subject, verb group, object noun phrase(s). Passives with an agent
    are read actively; intransitive verbs take their first non-time prepositional object ("born
    in Warsaw"); coordinated objects and verb phrases ("killed 12 people and destroyed homes")
    give one triple each with the shared subject."""
    clause = _LEADING.sub("", clause.strip().strip("\"'"))
    tokens = [(m.group(0), m.start(), m.end()) for m in _TOKEN.finditer(clause)]
    if len(tokens) < 2:
        return []
    span = _verb_span(tokens)
    if span is None:
        return []
    vi, vj = span
    subject = _entity(_LEADING.sub("", _subject_text(clause[: tokens[vi][1]]).strip()))
    if subject in {"i", "you", "we", "me", "us"}:
        return []  # the model talking about itself ("I do not know the answer"), not a fact
    if subject in _PRONOUNS:
        if last_subject is None:
            return []
        subject = last_subject
    verb_words = [w for w, _, _ in tokens[vi:vj]]
    rest = _words_after(clause[tokens[vj - 1][2] :])
    passive = any(w.lower() in ("was", "were", "is", "are", "been", "be") for w in verb_words) and (
        verb_words[-1].lower().endswith(("ed", "en", "wn")) or verb_words[-1].lower() in _VERBS
    )
    if (
        passive and rest and rest[0].lower() == "by"
    ):  # "was arrested by police" -> police arrested X
        agents, _ = _noun_phrases(rest[1:])
        relation = _relation([w for w in verb_words if w.lower() not in _AUX])
        return [(_entity(a), relation, subject) for a in agents if _entity(a) and subject]
    verb_words, rest, objects, remainder = _verb_objects(verb_words, rest)
    relation = _relation(verb_words)
    if _stem(verb_words[-1]) in _REPORTING and depth < 3:
        # "said the first buses would arrive": the reported clause is the fact, if it states one
        return _clause_triples(" ".join(rest), last_subject, depth + 1)
    out: list[Triple] = []
    if subject and relation and len(subject.split()) <= 8:
        out += _object_triples(subject, relation, objects, last_subject)
    if depth < 3 and subject:  # "... and destroyed hundreds of homes": same subject, next verb
        tail_text = " ".join(remainder)
        m = re.search(r"\band\s+(?=(\w+))", tail_text)
        if m is not None and _is_verb(m.group(1), 1):
            out.extend(_clause_triples(f"{subject} {tail_text[m.end() :]}", subject, depth + 1))
    return out


def _verb_span(tokens: list[tuple[str, int, int]]) -> tuple[int, int] | None:
    """(the first verb's token, the token after its verb group, negations included); None
    where no token after the first is a verb."""
    vi = next(
        (i for i, (w, _, _) in enumerate(tokens) if _is_verb(w, i, tokens[i - 1][0] if i else "")),
        None,
    )
    if vi is None or vi == 0:
        return None
    vj = vi + 1
    while vj < len(tokens) and (
        _is_verb(tokens[vj][0], vj, tokens[vj - 1][0]) or tokens[vj][0].lower() in _NEG_ADV
    ):
        vj += 1
    return vi, vj


def _subject_text(text: str) -> str:
    """The text before the verb from its last comma on: "On Monday, the police said" -> "the
    police" (a comma inside a number, "4,000", is no break)."""
    if re.search(r",\s", text):
        text = re.split(r",\s", text)[-1]
    return text


def _words_after(text: str) -> list[str]:
    """The words after the verb group, without their punctuation; a word ending a phrase with a
    comma, semicolon or colon is followed by "," ("Warsaw, Poland": the phrase ends there)."""
    rest = []
    for raw in text.split():
        word = raw.strip(".,;:!?\"'")
        if word:
            rest.append(word)
        if raw.rstrip("\"'").endswith((",", ";", ":")):
            rest.append(",")
    return rest


def _verb_objects(verb_words: list[str], rest: list[str]):
    """(the verb group with a particle or preposition it takes, the words after it, the object
    noun phrases, the words after them). A time phrase is no object."""
    if (
        rest
        and rest[0].lower() in _PARTICLES
        and len(rest) > 1
        and rest[1].lower() not in _OBJECT_PREPS
    ):
        verb_words, rest = verb_words + [rest[0]], rest[1:]  # "knocked out power"
    if rest and rest[0].lower() in _OBJECT_PREPS | {"of"}:
        if _TIME.match(" ".join(rest)):
            objects, remainder = [], rest
        else:
            verb_words, rest = (
                verb_words + [rest[0]],
                rest[1:],
            )  # "born in", "convicted of", "spread to"
            objects, remainder = _noun_phrases(rest)
    elif rest and _TIME.match(" ".join(rest)):
        objects, remainder = [], rest
    else:
        objects, remainder = _noun_phrases(rest)
    return verb_words, rest, objects, remainder


def _object_triples(
    subject: str, relation: str, objects: list[str], last_subject: str | None
) -> list[Triple]:
    """(subject, relation, object) for each object that is not a bare time phrase."""
    out: list[Triple] = []
    for obj in objects:
        tail = _entity(obj)
        if tail in _OBJECT_PRONOUNS and last_subject is not None:
            tail = last_subject  # "when a van hit him": the cyclist of the main clause
        if (
            tail
            and not _TIME.match(obj + " ")
            or (_TIME.match(obj) and len(_TIME.match(obj).group(0)) < len(obj))
        ):
            out.append((subject, relation, tail))
    return out


def _clause_subject(clause: str) -> str | None:
    clause = _LEADING.sub("", clause.strip().strip("\"'"))
    tokens = [m.group(0) for m in _TOKEN.finditer(clause)]
    vi = next((i for i, w in enumerate(tokens) if _is_verb(w, i, tokens[i - 1] if i else "")), None)
    if not vi:
        return None
    subject = _entity(" ".join(tokens[:vi]))
    return subject if subject and subject not in _PRONOUNS and len(subject.split()) <= 6 else None


def _clauses_of(sentence: str) -> list[str]:
    """The clauses of a sentence, relative clauses ("Greenway Foods, which makes frozen meals,")
    read as clauses of their own about the noun they follow."""
    sentence = _REPORTING_TAIL.sub("", sentence.strip().rstrip(".!?"))
    extra: list[str] = []

    def relative(m: re.Match) -> str:
        extra.append(f"{m.group('head')} {m.group('body')}")
        return m.group("head")

    sentence = _RELATIVE.sub(relative, sentence)
    sentence = _PARTICIPLE_CLAUSE.sub("", sentence)
    return [c for c in _CLAUSES.split(sentence) if c and c.strip()] + extra


def extract_triples(text: object) -> frozenset[Triple] | None:
    """Rule-based graph g_T: subject-verb-object triples of every sentence; None if none found."""
    try:
        s = to_text(text)[:_MAX_CHARS]
        triples: list[Triple] = []
        last_subject: str | None = None
        for sentence in _SENTENCES.split(s):
            if (
                len(sentence) > 2_000
                or "{" in sentence
                or "}" in sentence
                or sentence.rstrip().endswith("?")
            ):
                continue  # not a statement: junk, JSON, a table or a question
            for clause in _clauses_of(sentence):
                found = _clause_triples(clause, last_subject)
                if found:
                    triples.extend(found)
                    last_subject = found[0][0]
                else:  # "A cyclist was injured when ...": still the entity pronouns refer to
                    last_subject = _clause_subject(clause) or last_subject
        return frozenset(triples) if triples else None
    except (
        ValueError,
        TypeError,
        IndexError,
        RecursionError,
        MemoryError,
    ):  # pragma: no cover - defence in depth
        return None


_TRIPLE_LINE = re.compile(
    r"^\s*(?:[-*\u2022]|\d{1,3}[.)])?\s*\(?\s*(?P<h>[^|()]+?)\s*\|\s*(?P<r>[^|()]+?)\s*\|\s*(?P<t>[^|()]+?)\s*\)?\s*[.;]?\s*$"
)
_TRIPLE_TUPLE = re.compile(
    r"\(\s*[\"']?(?P<h>[^,()\"']+)[\"']?\s*,\s*[\"']?(?P<r>[^,()\"']+)[\"']?\s*,\s*[\"']?(?P<t>[^,()\"']+)[\"']?\s*\)"
)


def _canonical_triple(h: object, r: object, t: object) -> Triple | None:
    head, rel, tail = _entity(to_text(h)), _relation(to_text(r).split()), _entity(to_text(t))
    return (head, rel, tail) if head and tail and rel else None


def parse_triples_output(text: object) -> frozenset[Triple] | None:
    """Parse an LLM's triples: "h | r | t" lines, "(h, r, t)" tuples or a JSON list of triples."""
    if text is None:
        return None
    s = strip_prompt_echo(to_text(text)[:_MAX_CHARS])
    found: list[Triple] = []
    try:
        obj = json.loads(s.strip())
        if isinstance(obj, dict):
            obj = obj.get("relations") or obj.get("triples")
        if isinstance(obj, list):
            for item in obj:
                if isinstance(item, list | tuple) and len(item) == 3:
                    t = _canonical_triple(*item)
                    if t is not None:
                        found.append(t)
    except (ValueError, RecursionError):
        pass
    for line in s.splitlines()[:2_000]:
        if len(line) > 1_000 or re.match(r"^\s*(?:text|example)\s*:", line, re.IGNORECASE):
            continue
        m = _TRIPLE_LINE.match(line)
        matches = [m] if m else list(_TRIPLE_TUPLE.finditer(line))
        for mm in matches:
            t = _canonical_triple(mm.group("h"), mm.group("r"), mm.group("t"))
            if t is not None:
                found.append(t)
    return frozenset(found) if found else None


def merge_graphs(
    graphs: Sequence[frozenset[Triple] | None],
    equivalence: EquivalenceFn | None = None,
    context: str = "",
    n_attached: int = 0,
) -> list[frozenset[Triple] | None]:
    """Aggregate the graphs of one prompt's samples: canonical entities/relations, then clusters.

    Entities (heads and tails together) and relations are clustered separately with
    `equivalence(context, labels)`; each cluster is represented by its most frequent member
    (ties: first seen), as KGGen's aggregate + cluster. Failures (None) stay None. The last
    `n_attached` graphs (the reference's) take the samples' clusters without shaping them.
    """
    canon: list[frozenset[Triple] | None] = []
    for g in graphs:
        if g is None:
            canon.append(None)
            continue
        triples = {_canonical_triple(h, r, t) for h, r, t in g}
        canon.append(frozenset(t for t in triples if t is not None))
    split = len(canon) - n_attached
    own = [sorted(g) for g in canon[:split] if g is not None]
    attached = [sorted(g) for g in canon[split:] if g is not None]
    ent = representatives(
        context,
        [x for g in own for h, _, t in g for x in (h, t)],
        equivalence,
        attached=[x for g in attached for h, _, t in g for x in (h, t)],
    )
    rel = representatives(
        context,
        [r for g in own for _, r, _ in g],
        equivalence,
        attached=[r for g in attached for _, r, _ in g],
    )
    return [
        None if g is None else frozenset((ent[h], rel[r], ent[t]) for h, r, t in g) for g in canon
    ]


# g_T^-1 lives with the graph space, which writes decisions as text.
graph_to_text = _graph_to_text


def _clustering_inputs(
    graphs: Sequence[Sequence[Triple] | None], n_attached: int
) -> tuple[list[Triple], list[Triple]]:
    """What KGGen clusters for one prompt: the responses' relations, and (when the last
    `n_attached` graphs, the reference's, have any) the responses' and the reference's together
    (empty otherwise)."""
    split = len(graphs) - n_attached
    own = [r for g in graphs[:split] if g for r in g]
    attached = [r for g in graphs[split:] if g for r in g]
    return own, (own + attached if attached else [])


@dataclass
class GraphExtractor(LocalModelExtractor):
    """Graph g_T over many responses, with counts of parse failures (`LocalModelExtractor`).

    Args:
        method: "rule", "kggen", "local" (generation backend) or "llm" (an `LLMClient`).
        model: KGGen's LiteLLM model string (e.g. "openai/gpt-4.1-mini").
        api_base: KGGen's endpoint (an OpenAI-compatible server), None for the provider default.
        api_key_env: environment variable holding KGGen's API key.
        kggen_cluster: run KGGen's own LLM clustering on the aggregated graph of each prompt (paper).
        kggen_python: interpreter of the KGGen venv (scripts/setup_kggen_venv.sh) running the
            worker; None imports kg_gen in this process.
        cache_dir: where KGGen's answers are cached (None: no cache).
        max_concurrency: texts KGGen extracts at once (each is two chat requests in sequence).
        equivalence: optional `(context, labels) -> cluster ids` for entity/relation merging.
    """

    METHODS = METHODS

    model: str = "openai/gpt-4.1-mini"
    api_base: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    kggen_cluster: bool = True
    kggen_python: str | None = None
    cache_dir: str | None = None
    max_concurrency: int = 4
    kggen: Any = None
    max_new_tokens: int = 128

    def _runner(self):
        if self.kggen is None:
            from pipeline.tasks.graphs.kggen import KGGenRunner

            self.kggen = KGGenRunner(
                model=self.model,
                api_base=self.api_base,
                api_key_env=self.api_key_env,
                python=self.kggen_python,
                cache_dir=self.cache_dir,
                max_workers=self.max_concurrency,
            )
        return self.kggen

    def prefetch(self, items: Sequence[tuple[object, Sequence[object], Sequence[object]]]) -> None:
        """Every prompt's (question, responses, attached references) of a cell through one pool
        (KGGen's worker or the LLM client, `max_concurrency` in flight across prompts): KGGen's
        extractions, then its clusterings of every prompt's aggregated graph; `map_prompt` then
        reads the cache. Rule and local extraction have nothing to queue."""
        texts = [to_text(t) for _, responses, attached in items for t in (*responses, *attached)]
        if self.method == "kggen":
            runner = self._runner()
            runner.prefetch(texts)
            if self.kggen_cluster:
                graphs = []
                for _, responses, attached in items:
                    own, joint = _clustering_inputs(
                        runner.cached_relations([to_text(t) for t in (*responses, *attached)]),
                        len(attached),
                    )
                    graphs += [own, joint] if joint else [own]
                runner.prefetch_clusters(graphs)
        elif self.method == "llm":
            self.client.complete(
                list(dict.fromkeys(TRIPLE_EXTRACTION_PROMPT.format(text=t.strip()) for t in texts))
            )

    def _kggen_graphs(
        self, texts: Sequence[object], n_attached: int = 0
    ) -> list[frozenset[Triple] | None]:
        # KGGen gets no context: its extraction ignores it, and for clustering it would be the
        # whole source article in every call. `context` still keys our own equivalence merging.
        graphs = self._runner().extract([to_text(t) for t in texts])
        entity_of: dict[str, str] = {}
        edge_of: dict[str, str] = {}
        if self.kggen_cluster:  # KGGen's aggregate + cluster over this prompt's samples (paper)
            own, joint = _clustering_inputs(graphs, n_attached)
            entity_of, edge_of = self.kggen.cluster(own)
            if joint:  # the reference joins the samples' clusters, never shapes them
                attached = joint[len(own) :]
                joint_entity, joint_edge = self.kggen.cluster(joint)
                entities = lambda rs: [x for h, _, t in rs for x in (h, t)]  # noqa: E731
                entity_of = attach_labels(
                    entity_of, joint_entity, entities(own), entities(attached)
                )
                edge_of = attach_labels(
                    edge_of, joint_edge, [r for _, r, _ in own], [r for _, r, _ in attached]
                )
        out: list[frozenset[Triple] | None] = []
        for g in graphs:
            triples = {
                _canonical_triple(entity_of.get(h, h), edge_of.get(r, r), entity_of.get(t, t))
                for h, r, t in g or ()
            }
            kept = frozenset(t for t in triples if t is not None)
            out.append(kept or None)
        return out

    def extract(
        self, texts: Sequence[object], context: str = "", n_attached: int = 0
    ) -> list[frozenset[Triple] | None]:
        """One triple set per response (None = parse failure); not yet merged across samples.
        KGGen clusters over all but the last `n_attached` texts (see `map_prompt`)."""
        if self.method == "rule":
            out = [extract_triples(t) for t in texts]
        elif self.method == "kggen":
            out = self._kggen_graphs(texts, n_attached)
        else:
            raw = self._complete(
                [TRIPLE_EXTRACTION_PROMPT.format(text=to_text(t).strip()) for t in texts]
            )
            out = [parse_triples_output(r) for r in raw]
        return self._counted(out)

    def close(self) -> None:
        """Stop the KGGen worker, if one was started."""
        if self.kggen is not None:
            self.kggen.close()

    def map_prompt(
        self, texts: Sequence[object], context: str = "", attached: Sequence[object] = ()
    ) -> list[frozenset[Triple] | None]:
        """The responses of one prompt: extract, then aggregate entities and relations across
        them. `attached` texts (the reference) are mapped into the responses' clusters without
        changing them; their graphs come last in the result."""
        texts = [*texts, *attached]
        return merge_graphs(
            self.extract(texts, context, len(attached)), self.equivalence, context, len(attached)
        )
