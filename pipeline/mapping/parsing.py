"""Rule-based parsers of free-form model output (stdlib only): the two public g_T parsers, which
the tasks' readers (pipeline/tasks/<task>/reading.py) build on.

- `parse_distribution(text)`: the answers and probabilities a response states. Reads the paper's
  JSON answer/probability format (`{"items":[{"answer":..., "p":...}]}`, appendix "Prompts") and
  the looser forms small models write instead (plain JSON objects/lists, code fences, single
  quotes, "Atlantic: 55%" lines).
- `extract_answers(text)`: the answers a response states (`answer_rules`), a stand-in for the
  paper's gpt-4.1-mini set extractor following the same rules (split lists, drop
  hedges/articles/parentheticals, "I don't know" -> no item).

Both accept anything (bytes are decoded with replacement, None is empty), read it as
`pipeline.text.normal_forms.clean_text` gives it (invisible characters dropped, NFKC), and never raise on model
output: every regex here is linear or applied to bounded-length pieces only, so a 1 MB response
costs milliseconds, not minutes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from pipeline.mapping.answer_rules import read_answers
from pipeline.mapping.response_text import (
    decode_json,
    has_alnum,
    is_refusal,
    json_candidates,
    strip_prompt_echo,
)
from pipeline.text.normal_forms import canonical_label, clean_text, to_text

__all__ = [
    "IDK_LABEL",
    "MAX_CHARS",
    "parse_distribution",
    "extract_answers",
    "is_refusal",
    "strip_prompt_echo",
    "parse_probability",
]

IDK_LABEL = "I don't know"
# Longer responses are parsed on their first MAX_CHARS characters: no real answer list or
# distribution is that long, and the cap bounds the cost of the fallbacks.
MAX_CHARS = 100_000
# Lines longer than this are not matched by the "label: value" line patterns (cost bound).
_MAX_LINE = 1_000
# Broken-JSON item scanning looks at this many leading characters (cost bound).
_MAX_KEYED_SCAN = 20_000

# --------------------------------------------------------------------------- probabilities

_NUM = r"[-+]?(?:\d+(?:[.,]\d+)?|[.,]\d+)(?:[eE][-+]?\d+)?"
_VALUE_TEXT = re.compile(
    rf"^\s*(?P<num>{_NUM}|nan|-?inf(?:inity)?)\s*(?:/\s*(?P<den>{_NUM}))?\s*(?P<pct>%|percent\b|pct\b)?\s*$",
    flags=re.IGNORECASE,
)


def _to_float(token: str) -> float:
    """A numeric token as float; a decimal comma ("0,55") is read as a point."""
    return float(token.replace(",", "."))


def parse_probability(value: object) -> tuple[float, bool] | None:
    """A stated probability as (number, was_percent); None when `value` is not one.

    Accepts numbers, numeric strings, "55%", "55 percent" and ratios "11/20". NaN/inf/negatives
    are returned as they are so the caller can reject the whole response.
    """
    if isinstance(value, bool):  # bool is an int subclass; True is not a probability
        return None
    if isinstance(value, int | float):
        return float(value), False
    if not isinstance(value, str) or len(value) > 64:
        return None
    m = _VALUE_TEXT.match(clean_text(value))  # JSON escapes may write invisible characters
    if m is None:
        return None
    try:
        num = _to_float(m.group("num"))
        if m.group("den") is not None:
            den = _to_float(m.group("den"))
            num = num / den if den != 0 else math.nan
    except ValueError:
        return None
    return num, m.group("pct") is not None


class _Reject(Exception):
    """A stated probability is negative, NaN or infinite: the whole response is invalid."""


def _finalise(pairs: list[tuple[str, float, bool]]) -> dict[str, float] | None:
    """Validate, scale percentages, merge duplicates by canonical label (probabilities summed).

    Not renormalised (the paper's prompt: "Do NOT renormalize"). Rules where the paper is silent:
    - a negative, NaN or infinite value rejects the whole response (None);
    - "55%" is 0.55; bare numbers are read as percentages when one of them exceeds 1 and none
      exceeds 100 (a model writing {"Atlantic": 55, "Pacific": 45}); a bare number > 100 rejects;
    - items whose label is empty after canonicalisation are dropped;
    - a total of 0 is not a point on the simplex and gives None.
    The key of a merged answer is its first surface form (stripped), e.g. "Atlantic Ocean".
    """
    if not pairs:
        return None
    for _, p, _ in pairs:
        if not math.isfinite(p) or p < 0:
            raise _Reject
    bare = [p for _, p, pct in pairs if not pct]
    if bare and max(bare) > 1:
        if max(bare) > 100:
            raise _Reject
        scale_bare = True
    else:
        scale_bare = False
    merged: dict[str, float] = {}
    key_of: dict[str, str] = {}
    for label, p, pct in pairs:
        value = p / 100.0 if (pct or scale_bare) else p
        canon = canonical_label(label)
        if not has_alnum(canon):
            continue  # "", "...", U+FFFD from undecodable bytes: no answer there
        if canon not in key_of:
            key_of[canon] = label
            merged[label] = 0.0
        merged[key_of[canon]] += value
    if not merged or sum(merged.values()) <= 0:
        return None
    return merged


# Answer / probability field names seen in model output (the paper's are "answer" and "p").
_ANSWER_KEYS = (
    "answer",
    "label",
    "name",
    "item",
    "option",
    "text",
    "response",
    "candidate",
    "value",
)
_PROB_KEYS = (
    "p",
    "prob",
    "probability",
    "confidence",
    "likelihood",
    "score",
    "weight",
    "percentage",
    "percent",
)
_LIST_KEYS = (
    "items",
    "answers",
    "distribution",
    "predictions",
    "results",
    "probabilities",
    "options",
    "data",
    "candidates",
)


_STRUCTURAL_KEYS = frozenset(_ANSWER_KEYS + _PROB_KEYS + _LIST_KEYS)


def _clean_label(label: str) -> str:
    """A distribution key: whitespace collapsed, wrapping quotes/bullets/markdown removed (and
    invisible characters a JSON escape wrote: `clean_text`)."""
    s = re.sub(r"\s+", " ", clean_text(label)).strip()
    s = re.sub(r"^(?:[-*\u2022+>]+|\d{1,2}[.)](?=\s))\s*", "", s)
    return s.strip("\"'`*_ \t:").strip()


def _lookup(d: dict, keys: Iterable[str]) -> Any:
    lowered = {str(k).strip().lower(): v for k, v in d.items()}
    for k in keys:
        if k in lowered:
            return lowered[k]
    return None


def _pairs_from_item(item: Any) -> list[tuple[str, float, bool]] | None:
    """One list element: {"answer": a, "p": x} or [a, x]; None when it is not an answer/prob pair."""
    if isinstance(item, dict):
        answer = _lookup(item, _ANSWER_KEYS)
        prob = _lookup(item, _PROB_KEYS)
        if (
            isinstance(answer, str | int | float)
            and not isinstance(answer, bool)
            and prob is not None
        ):
            parsed = parse_probability(prob)
            if parsed is not None:
                return [(_clean_label(str(answer)), parsed[0], parsed[1])]
        if len(item) == 1:  # [{"Atlantic": 0.55}, {"Pacific": 0.45}]
            return _pairs_from_mapping(item)
        return None
    if isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[0], str):
        parsed = parse_probability(item[1])
        if parsed is not None:
            return [(_clean_label(item[0]), parsed[0], parsed[1])]
    return None


def _pairs_from_mapping(obj: dict) -> list[tuple[str, float, bool]] | None:
    """{"Atlantic": 0.55, "Pacific": "45%"}: every value must be a probability."""
    pairs = []
    for key, value in obj.items():
        parsed = parse_probability(value)
        if parsed is None or not isinstance(key, str) or key.strip().lower() in _STRUCTURAL_KEYS:
            return None  # {"p": 0.5} or {"items": 7} is a broken item, not an answer named "p"
        pairs.append((_clean_label(key), parsed[0], parsed[1]))
    return pairs or None


def _pairs_from_json(obj: Any, depth: int = 0) -> list[tuple[str, float, bool]] | None:
    """Answer/probability pairs from a decoded JSON value; None when it holds no distribution."""
    if depth > 4:
        return None
    if isinstance(obj, list):
        pairs: list[tuple[str, float, bool]] = []
        for item in obj:
            got = _pairs_from_item(item)
            if got is None:
                return None
            pairs.extend(got)
        return pairs or None
    if isinstance(obj, dict):
        inner = _lookup(obj, _LIST_KEYS)
        if isinstance(inner, list | dict):
            got = _pairs_from_json(inner, depth + 1)
            if got is not None:
                return got
        single = _pairs_from_item(obj)  # {"answer": "Paris", "p": 0.9}
        if single is not None:
            return single
        return _pairs_from_mapping(obj)
    return None


_KEYED_ITEM = re.compile(
    r"[\"']?(?:answer|label|name|option)[\"']?\s*:\s*[\"'](?P<label>[^\"'{}\[\]\n]{1,200}?)[\"',\s]*"
    r"(?:p|prob|probability|confidence)[\"']?\s*:\s*[\"']?(?P<value>"
    + _NUM
    + r"|nan|-?inf(?:inity)?)\s*(?P<pct>%)?",
    flags=re.IGNORECASE,
)

# "Atlantic: 55%", "Atlantic - 0.55", "Atlantic (55%)", "Atlantic = 0.55", "Atlantic with probability 0.55".
_LINE = re.compile(
    r"^(?P<label>.{1,300}?)\s*(?:[:=\u2013\u2014|]|->|=>|\s-|\(|\bwith\s+(?:a\s+)?(?:probability|prob|p|confidence|likelihood|chance)(?:\s+of)?|"
    r"\b(?:probability|prob|p|confidence|likelihood|chance)(?:\s*(?:of|is|=|:))?)\s*"
    r"(?P<value>"
    + _NUM
    + r"|nan|-?inf(?:inity)?)\s*(?:/\s*(?P<den>"
    + _NUM
    + r"))?\s*(?P<pct>%|percent\b|pct\b)?\s*"
    r"(?:\)\s*)?(?:probability|chance|likely|confidence)?\s*[.,;]?\s*$",
    flags=re.IGNORECASE,
)
# "Atlantic 55%" (no separator: the percent sign marks the value)
_LINE_PERCENT = re.compile(
    r"^(?P<label>[^\d\s].{0,300}?)\s+(?P<value>" + _NUM + r")\s*(?P<pct>%|percent\b)\s*[.,;]?\s*$",
    flags=re.IGNORECASE,
)
# "55% Atlantic", "0.55 - Atlantic"
_LINE_VALUE_FIRST = re.compile(
    r"^(?P<value>"
    + _NUM
    + r")\s*(?P<pct>%|percent\b)?\s*(?:[:=\-\u2013\u2014]|\bfor\b|\bon\b)?\s*(?P<label>[^\d\s].{0,300}?)\s*[.,;]?\s*$",
    flags=re.IGNORECASE,
)
_BULLET = re.compile(
    r"^\s*(?:[-*\u2022+>]+|\(?\d{1,2}[.)](?=\s|$)|[a-z][.)](?=\s)|answer\s*\d*\s*[:.)-]|option\s*\d*\s*[:.)-])\s*",
    re.I,
)
_LABEL_PREFIX = re.compile(
    r"^(?:(?:answer|option|candidate)\s*\d*\s*[:.)-]|(?:the\s+)?(?:final\s+|correct\s+)?answers?\s+(?:is|are)\b:?)\s*",
    re.IGNORECASE,
)


def _pairs_from_lines(text: str) -> list[tuple[str, float, bool]]:
    """ "label <sep> value" pairs, one per line (or per ';'/','-separated chunk of a line)."""
    pairs: list[tuple[str, float, bool]] = []
    for raw_line in text.splitlines():
        line = raw_line.strip().strip("*_`")
        if not line or len(line) > _MAX_LINE:
            continue
        chunks = [line]
        if (line.count("%") + len(re.findall(r"\d\.\d", line))) > 1:  # "Atlantic 55%, Pacific 45%"
            chunks = [c for c in re.split(r"[;,]\s+|\s+and\s+(?=\D*\d)", line) if c.strip()]
        for chunk in chunks:
            chunk = _BULLET.sub("", chunk.strip()).strip().strip("*_`")
            m = _LINE.match(chunk) or _LINE_PERCENT.match(chunk)
            if m is not None:
                try:
                    num = _to_float(m.group("value"))
                    if m.groupdict().get("den"):
                        den = _to_float(m.group("den"))
                        num = num / den if den else math.nan
                except ValueError:
                    continue
                label = _LABEL_PREFIX.sub("", _clean_label(m.group("label"))).rstrip(" ([{:-")
                label = re.sub(
                    r"\s*(?:probability|prob|p|confidence)\s*$", "", label, flags=re.I
                ).strip(" :-")
                pairs.append((label, num, m.group("pct") is not None))
                continue
            m = _LINE_VALUE_FIRST.match(chunk)
            if m is not None and (m.group("pct") or "." in m.group("value")):
                pairs.append(
                    (
                        _clean_label(m.group("label")),
                        _to_float(m.group("value")),
                        m.group("pct") is not None,
                    )
                )
    return pairs


def parse_distribution(text: object) -> dict[str, float] | None:
    """Simplex g_T: a model's stated answers and probabilities as {answer: p}; None if unparseable.

    Order of attempts: JSON (whole text, code fences, outermost braces/brackets; trailing commas
    and single quotes tolerated), keyed items in broken JSON, "label: value" lines. A response
    that states no probability but says "I don't know" gives {"I don't know": 1.0}, as the paper's
    extraction prompt prescribes. Probabilities are not renormalised; duplicate answers (same
    canonical label) are summed; any negative/NaN/infinite probability gives None.
    """
    try:
        s = strip_prompt_echo(clean_text(to_text(text)[:MAX_CHARS]))
        if not s.strip():
            return None
        return _parse_distribution(s)
    except _Reject:
        return None
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError):  # pragma: no cover
        # Defence in depth: model output must never crash the map stage.
        return None


def _parse_distribution(s: str) -> dict[str, float] | None:
    for candidate in json_candidates(s):
        try:
            obj = decode_json(candidate)
        except ValueError:
            continue
        pairs = _pairs_from_json(obj)
        if pairs is not None:
            result = _finalise(pairs)
            if result is not None:
                return result
    keyed: list[tuple[str, float, bool]] = []
    for m in _KEYED_ITEM.finditer(s[:_MAX_KEYED_SCAN]):
        parsed = parse_probability(m.group("value") + (m.group("pct") or ""))
        if parsed is not None:
            keyed.append((_clean_label(m.group("label")), parsed[0], parsed[1]))
    if keyed:
        result = _finalise(keyed)
        if result is not None:
            return result
    lines = _pairs_from_lines(s)
    if lines:
        result = _finalise(lines)
        if result is not None:
            return result
    if is_refusal(s) or is_refusal(
        s.split(":", 1)[-1] if s.lower().startswith(("answer", "output")) else ""
    ):
        return {IDK_LABEL: 1.0}
    return None


# --------------------------------------------------------------------------- answers


def extract_answers(text: object, question: object = None) -> frozenset[str]:
    """Rule-based set g_T: the distinct answers stated in `text`, as canonical labels.

    Reads a response as a careful person would (`pipeline.mapping.answer_rules`): list items or
    the sentence that answers, coordinations split ("A, B and C", "both A and B", "A as well as
    B"), each part cut to the name it gives ("Germany to the north" -> "germany"); preambles,
    explanations, hedges, parentheticals and restatements of the question are not answers;
    "I don't know" and refusals give the empty set. `question` (optional) helps recognise
    restatements. Every label is a span of the response in canonical form (docs/design.md s6).
    """
    try:
        s = strip_prompt_echo(clean_text(to_text(text)[:MAX_CHARS]))
        if not s.strip():
            return frozenset()
        q = clean_text(question) if question is not None else None
        return frozenset(read_answers(s, q))
    except (
        ValueError,
        TypeError,
        IndexError,
        KeyError,
        RecursionError,
        MemoryError,
    ):  # pragma: no cover
        return frozenset()  # defence in depth: model output must never crash the map stage
