"""Shared readers of raw model output (stdlib only): refusals, an echoed extraction prompt,
code fences, tolerant JSON decoding and the one reader of JSON answer lists. Every g_T parser
(sets, simplex, graphs, the extractor's output) reads its input through these, as
`pipeline.text.normal_forms.clean_text` gives it (a string decoded from JSON is cleaned again: its escapes may
write invisible characters).
"""

from __future__ import annotations

import ast
import json
import math
import re
from typing import Any

from pipeline.text.normal_forms import clean_text, to_text

# Scan budget for an echoed prompt: the echo is at the start, a 1 MB response is not rescanned.
_MAX_ECHO_SCAN = 50_000

_REFUSAL = re.compile(
    r"^\s*(?:"
    r"i\s+(?:do\s*n[o']?t|don\W?t|dont|cannot|can\W?t|am\s+not|m\s+not|have\s+no|really\s+don\W?t)\s+"
    r"(?:know|sure|certain|able|answer|help|provide|determine|say|tell|find|have)"
    r"|i\s+(?:am|m)\s+(?:not\s+sure|unsure|uncertain|unable)"
    r"|i\s*'?\s*m\s+(?:not\s+sure|unsure|uncertain|unable)"
    r"|(?:i\s+)?(?:don\W?t|do\s+not)\s+know"
    r"|not\s+sure|unsure|unknown|no\s+idea|no\s+answer|none|n\s*/?\s*a|idk|nothing"
    r"|no\s+(?:explicit\s+)?(?:items?|answers?)(?:\s+found|\s+given|\s+provided)?"
    r"|(?:i\s+am\s+)?sorry|as\s+an\s+ai|unable\s+to\s+(?:answer|determine)"
    r"|cannot\s+(?:be\s+)?(?:answer|determine)"
    r")\b",
    flags=re.IGNORECASE,
)


def has_alnum(text: str) -> bool:
    return any(c.isalnum() for c in text)


# The last line of the paper's extraction prompts: an echoed prompt is cut there so the few-shot
# example inside it is not read as the model's answer.
_ECHO_END = re.compile(
    r"Task:\s*(?:Extract answer probability pairs|List all explicit, distinct answers from the model answer, one per line)\.?",
    flags=re.IGNORECASE,
)


def strip_prompt_echo(text: str) -> str:
    """The part of `text` after an echoed extraction prompt (all of it when there is no echo)."""
    if "task:" not in text[:_MAX_ECHO_SCAN].lower():
        return text
    last = None
    for last in _ECHO_END.finditer(text[:_MAX_ECHO_SCAN]):  # noqa: B007 - the last match
        pass
    return text if last is None else text[last.end() :]


def is_refusal(text: object) -> bool:
    """True when `text` starts with "I don't know" or a similar refusal/no-answer phrase."""
    s = clean_text(to_text(text).lstrip()[:1_000]).strip().strip("\"'`*_ ").replace("\u2019", "'")
    return bool(s) and _REFUSAL.match(s[:200]) is not None


_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_+-]*[ \t]*\n?(.*?)```", flags=re.DOTALL)


def fenced_blocks(text: str) -> list[str]:
    """Contents of ``` code fences (the common way chat models wrap JSON)."""
    return [m.group(1) for m in _FENCE.finditer(text)]


def json_candidates(text: str) -> list[str]:
    """Substrings worth handing to a JSON decoder, most specific first."""
    out = [text]
    out.extend(fenced_blocks(text))
    for opener, closer in (("{", "}"), ("[", "]")):
        i, j = text.find(opener), text.rfind(closer)
        if 0 <= i < j:
            out.append(text[i : j + 1])
    seen: set[str] = set()
    return [c for c in out if c.strip() and not (c in seen or seen.add(c))]


_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def decode_json(candidate: str) -> Any:
    """json, then json without trailing commas, then a Python literal (single quotes); or raise."""
    candidate = candidate.strip()
    try:
        return json.loads(candidate)
    except (ValueError, RecursionError):
        pass
    fixed = _TRAILING_COMMA.sub(r"\1", candidate)
    try:
        return json.loads(fixed)
    except (ValueError, RecursionError):
        pass
    if len(candidate) <= 20_000:  # literal_eval builds an AST: bounded input only
        pyish = re.sub(
            r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", re.sub(r"\bnull\b", "None", fixed))
        )
        try:
            return ast.literal_eval(pyish)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
    raise ValueError("not JSON")


# Broken JSON items such as the paper's own example `{"answer":"Atlantic,"p":0.55}`.


_JSON_ANSWER_KEYS = (
    "answers",
    "answer",
    "items",
    "labels",
    "results",
    "list",
    "output",
    "response",
)
_JSON_ITEM_KEYS = ("name", "answer", "label", "item", "value", "country", "text")


def json_answer_strings(text: str) -> list[str] | None:
    """The answer strings of a JSON (or Python-literal) response; None when it is not JSON.

    Accepts a list of strings, {"answers": [...]} under any key that holds a list of strings,
    and lists of objects with a name/answer field. A JSON document without strings gives [].
    """
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return None
    try:
        obj = decode_json(stripped)
    except ValueError:
        return []  # broken JSON or a schema: structure, not answers
    return _strings_in(obj, 0)


def _strings_in(obj: object, depth: int) -> list[str]:
    if depth > 4:
        return []
    if isinstance(obj, str):
        return [clean_text(obj).replace("\n", " ")]
    if isinstance(obj, dict):
        lowered = {str(k).strip().lower(): v for k, v in obj.items()}
        for key in _JSON_ANSWER_KEYS + _JSON_ITEM_KEYS:
            if key in lowered:
                got = _strings_in(lowered[key], depth + 1)
                if got:
                    return got
        for value in lowered.values():  # {"official_languages": ["English", "French"]}
            if isinstance(value, list):
                got = _strings_in(value, depth + 1)
                if got:
                    return got
        return []
    if isinstance(obj, list | tuple):
        out: list[str] = []
        for item in obj[:200]:
            if isinstance(item, str | dict):
                out.extend(_strings_in(item, depth + 1))
            elif (
                isinstance(item, int | float) and not isinstance(item, bool) and math.isfinite(item)
            ):
                out.append(str(int(item)) if float(item).is_integer() else repr(item))  # [23, 29]
        return out
    return []
