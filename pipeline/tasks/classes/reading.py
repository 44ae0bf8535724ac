"""How a response to a single-answer question is read (classes g_T, the exact-match metric).

`read_single_answer(text, question)` gives the answer as written ("I think it's Canberra." ->
"Canberra"): the question-aware rules first (`question_answer`, beside this module: what the
question asks for, not what it already names), then the first line read as an answer, then the
first answer the general reader finds in the response (`pipeline.mapping.answer_rules`, shared
with the other tasks; its pieces are used here as they are).
"""

from __future__ import annotations

import re

from pipeline.mapping.answer_rules import (
    _BULLET,
    _BUT,
    _CONTRACTIONS,
    _CONTROL,
    _ECHO_LINE,
    _FENCE,
    _MAX_LINE,
    _MAX_LINES,
    _REFUSAL_START,
    _TRAILING_HEDGE,
    MAX_ITEM_WORDS,
    _main_verb,
    _question,
    _restore,
    _sentences,
    _strip_lead,
    _strip_markup,
    _trim,
    read_answers,
)
from pipeline.mapping.numbers import parse_number
from pipeline.mapping.response_text import is_refusal
from pipeline.tasks.classes.question_answer import SORRY_BUT_CANNOT, question_answer
from pipeline.text.normal_forms import canonical_label

__all__ = ["read_single_answer", "surface_span"]

_IT_IS = re.compile(
    r"^(?:it|that|this|he|she|they)\s+(?:is|was|are|were|would\s+be|'s|\u2019s)\s+", re.IGNORECASE
)
_ANSWER_LINE_END = re.compile(r"[.!;]+\s*$")


def surface_span(label: str, text: str) -> str:
    """The shortest run of whole words of `text` whose canonical form is `label` (the answer as
    written: "U.S." for "us"); `label` itself when the text holds no such run."""
    words = text.split()
    best = None
    for i in range(len(words)):
        for j in range(i + 1, min(len(words), i + MAX_ITEM_WORDS + 2) + 1):
            if canonical_label(" ".join(words[i:j])) == label:
                span = _trim(" ".join(words[i:j]), " \t,;:!?\"'*_()[]")
                if best is None or len(span) < len(best):
                    best = span
                break
    return best if best is not None else label


_NUMERIC_QUESTION = re.compile(
    r"^\W*(?:(?:at|in|to|by|for|on)\s+)?(?:how\s+(?:many|much|old|long|far|tall|high|deep|wide|heavy|big|fast)|"
    r"what\s+(?:year|percentage|number|age|temperature))\b",
    re.IGNORECASE,
)


_BY_NAME = re.compile(
    r"\bby\s+((?:[A-Z][\w'.-]*)(?:\s+(?:[A-Z][\w'.-]*|da|de|di|van|von|del|la|le)){0,4})"
)


def read_single_answer(text: str, question: str | None = None) -> str:
    """The answer a response to a single-answer question gives, as written: "Canberra." ->
    "Canberra", "I think it's Canberra." -> "Canberra", "The capital is Canberra." ->
    "Canberra", "Paris, France" -> "Paris, France" (a short answer is kept whole: the
    benchmark's scorer decides whether it matches). "" when the response states nothing."""
    text = _CONTROL.sub(" ", text)
    fenced = _FENCE.findall(text)
    if fenced:
        text = "\n".join(fenced)
    lines = [_strip_markup(x) for x in text.splitlines()[:_MAX_LINES] if _strip_markup(x)]
    lines = [x for x in lines if not _ECHO_LINE.match(x)]
    if not lines:
        return ""

    if is_refusal(lines[0]) and not _BUT.search(lines[0]):
        return ""
    raw_first = next(
        (
            x
            for x in text.splitlines()[:_MAX_LINES]
            if _strip_markup(x) and not _ECHO_LINE.match(_strip_markup(x))
        ),
        "",
    )
    if SORRY_BUT_CANNOT.match(_strip_markup(raw_first)):
        return ""
    if not _REFUSAL_START.match(_strip_markup(raw_first)):
        asked = question_answer(raw_first[:_MAX_LINE], question)  # what the question asks for
        if asked:
            return asked
    for pattern, repl in _CONTRACTIONS:
        lines[0] = pattern.sub(repl, lines[0])
    first = _sentences(lines[0][:_MAX_LINE])[0] if lines[0].strip() else ""
    if _REFUSAL_START.match(first) and not _BUT.search(first):
        return ""
    s = _strip_lead(_BULLET.sub("", first, count=1))
    s = _IT_IS.sub("", s).strip()
    s = _trim(_TRAILING_HEDGE.sub("", _ANSWER_LINE_END.sub("", s)), " \t,;:!?\"'*_")
    words = s.split()
    if _NUMERIC_QUESTION.match(question or "") and re.search(r"\d", s):
        value = parse_number(s)
        if value is not None:  # "approximately 100.0 degrees Celsius" answers "how many": 100
            return str(int(value)) if float(value).is_integer() else repr(value)
    if words and len(words) <= MAX_ITEM_WORDS and _main_verb(words, _question(question)) is None:
        return _restore(s)
    labels = read_answers(text, question)
    if labels:
        return surface_span(labels[0], text)
    agent = _BY_NAME.search(first)
    if agent and re.match(r"^\W*who\b", question or "", re.IGNORECASE):
        return _trim(
            agent.group(1), " ,;:"
        )  # "... is a classic story by William Shakespeare": who wrote it
    return _restore(s)
