"""Set g_T (multi-answer QA): each response -> frozenset of canonical answer labels.

Three extractors (docs/design.md s6, s7; paper appendix "Mapping Language Outputs to Latent
Structures"):
- ``"llm"``: the paper's set-extraction prompt through an OpenAI-compatible server
  (`LLMClient`; gpt-4.1-mini in the paper configuration);
- ``"local"``: the same prompt through a local generation backend (greedy decoding);
- ``"rule"``: the rule-based `extract_answers` (the embedded default).

Labels are then merged across the samples of one prompt: canonical form first, then, when an
equivalence callable `(question, labels) -> cluster ids` is given (e.g.
`pipeline.mapping.equivalence.EmbeddingEquivalence(...).cluster`), every cluster becomes one element represented by its
most frequent label (ties: first seen; `pipeline.mapping.labels.representatives`, shared with
the other readers). A response that cannot be parsed maps to None and is counted, never raised. Responses are read as `pipeline.text.normal_forms.clean_text` gives them (the
extractors' prompts too): "Paris\u200b" is "Paris".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.mapping.extractor import EquivalenceFn, LocalModelExtractor, extraction_prompt
from pipeline.mapping.labels import representatives
from pipeline.mapping.parsing import _BULLET, MAX_CHARS, extract_answers
from pipeline.mapping.response_text import (
    has_alnum,
    is_refusal,
    json_answer_strings,
    strip_prompt_echo,
)
from pipeline.text.normal_forms import canonical_label, clean_text, to_text

__all__ = [
    "EquivalenceFn",
    "SetExtractor",
    "clean_item",
    "extraction_prompt",
    "extract_answer_set",
    "parse_extractor_output",
    "representatives",
    "merge_sets",
]

METHODS = ("rule", "llm", "local")

# --------------------------------------------------------------------------- one extracted item

# Items with more words than this are explanations, not answers (set extraction).
MAX_ITEM_WORDS = 8
MAX_ITEM_CHARS = 120

_LEAD_PHRASES = re.compile(
    r"^(?:"
    r"(?:so\s*,?\s*|well\s*,?\s*|ok(?:ay)?\s*,?\s*|yes\s*,?\s*|sure\s*[,!]?\s*)"
    r"|(?:the\s+)?(?:correct\s+|final\s+|right\s+|possible\s+|short\s+|best\s+)?answers?\s*(?:is|are|would\s+be|:|-)\s*:?"
    r"|(?:my\s+)?(?:final\s+)?answers?\s*:"
    r"|output\s*:|a\s*:|response\s*:|here\s+(?:is|are)\s+(?:the\s+)?(?:answers?|items?|list)\s*:?"
    r"|(?:i\s+(?:think|believe|guess|would\s+say|'d\s+say|am\s+fairly\s+sure|am\s+pretty\s+sure)|i'm\s+(?:fairly|pretty)\s+sure)\s*(?:that\s+)?(?:it\s+is\s+|it's\s+|they\s+are\s+)?"
    r"|(?:i'm\s+not\s+(?:sure|certain)|i\s+am\s+not\s+(?:sure|certain)|not\s+sure)\s*,?\s*but\s+(?:i\s+think\s+|maybe\s+|probably\s+)?"
    r"|(?:it\s+is|it's|it\s+was|they\s+are|they're|these\s+are|those\s+are|that\s+is|that\s+would\s+be)\s+"
    r"|(?:probably|possibly|perhaps|maybe|likely|most\s+likely|definitely|certainly|presumably|i\s+guess|both|either|only|just|namely)\b\s*,?\s*"
    r")",
    flags=re.IGNORECASE,
)
_TRAILING_CLAUSE = re.compile(
    r"(?:,?\s+(?:because|since|as\s+(?:it|they|this)|which|who|where|due\s+to|according\s+to|but\s+i|i\s+think|i\s+believe)\b.*$"
    r"|\s*(?:,\s*)?\b(?:etc|and\s+so\s+on|among\s+others|and\s+others)\b\.?\s*$)",
    flags=re.IGNORECASE,
)
_DANGLING_CONNECTIVE = re.compile(r"^(?:and|or|&)\s+|\s+(?:and|or|&)$", flags=re.IGNORECASE)
_PARENS = re.compile(r"\([^()]{0,200}\)|\[[^\[\]]{0,200}\]")


def clean_item(item: str) -> str:
    """One candidate answer in canonical form ("" when nothing answer-like is left)."""
    s = item.strip()
    s = _BULLET.sub("", s)
    s = _PARENS.sub(" ", s)
    for _ in range(3):  # hedges can stack: "I think probably the Pacific"
        new = _LEAD_PHRASES.sub("", s.strip(" \t\"'`*_-")).strip(" \t\"'`*_:-")
        if new == s:
            break
        s = new
    s = _TRAILING_CLAUSE.sub("", s)
    s = _DANGLING_CONNECTIVE.sub("", s.strip().rstrip(".!?;:,"))
    if is_refusal(s):
        return ""
    canon = canonical_label(s)
    if not has_alnum(canon) or len(canon) > MAX_ITEM_CHARS or len(canon.split()) > MAX_ITEM_WORDS:
        return ""
    return canon


def _read_once(questions: Sequence[object], texts: Sequence[object]) -> list[frozenset[str] | None]:
    """`extract_answer_set` of each pair, a repeated (question, text) read once (samples of a
    prompt repeat often)."""
    read: dict[tuple[str, str], frozenset[str] | None] = {}
    out = []
    for q, t in zip(questions, texts):
        if not (isinstance(q, str) and isinstance(t, str)):
            out.append(extract_answer_set(t, q))
        elif (q, t) in read:
            out.append(read[q, t])
        else:
            out.append(read.setdefault((q, t), extract_answer_set(t, q)))
    return out


def extract_answer_set(text: object, question: object = None) -> frozenset[str] | None:
    """Rule-based set g_T with failure reporting: None when the response states nothing.

    "I don't know" and refusals are a valid empty set; empty output or output from which no
    answer-like item can be read (e.g. "{{{") is a parse failure (None).
    """
    s = clean_text(to_text(text)[:MAX_CHARS])
    labels = extract_answers(s, question)
    if labels:
        return labels
    return frozenset() if is_refusal(_first_content_line(s)) else None


def _first_content_line(text: str) -> str:
    for line in text.splitlines():
        line = re.sub(r"^\s*(?:output|answer|a)\s*:\s*", "", line.strip(), flags=re.IGNORECASE)
        if line.strip(" -*\u2022`\"'"):
            return line.strip(" -*\u2022`\"'")
    return ""


_ECHO = re.compile(r"^\s*(?:q|question|task|rules?|example\s*\d*)\s*:", re.IGNORECASE)
_HEADER = re.compile(
    r"^\s*(?:output|answers?|items?|extracted(?:\s+answers?)?|here\s+(?:is|are)\b[^:]*)\s*:\s*",
    re.IGNORECASE,
)


def parse_extractor_output(text: object) -> frozenset[str] | None:
    """Parse the extractor's "one item per line" answer into canonical labels.

    Tolerates bullets, numbering, an "Output:" header, quotes and comma-joined items on one
    line; stops at an echoed "Q:" (the model continuing the few-shot pattern). "I don't know"
    alone gives the empty set; None when no line holds an item (or the call failed: None in).
    """
    if text is None:
        return None
    s = strip_prompt_echo(clean_text(to_text(text)[:20_000]))
    structured = json_answer_strings(s)
    if structured is not None:  # a JSON list of items instead of lines
        s = "\n".join(structured)
    items: list[str] = []
    saw_idk = False
    started = False
    for raw in s.splitlines():
        if _ECHO.match(raw):
            if started:
                break  # the model began another few-shot example
            continue
        line = _HEADER.sub("", raw).strip()
        if not line or len(line) > 300 or line.startswith(("```", "{", "[", "<")):
            continue  # fences, JSON or markup fragments are not items
        if re.match(r"^\s*a\s*:", line, re.IGNORECASE):
            continue  # an echoed "A: <model answer>" line is input, not output
        started = True
        if is_refusal(line):
            saw_idk = True
            continue
        for piece in re.split(r"[,;]\s*", line):
            label = clean_item(piece)
            if label and label not in items:
                items.append(label)
    if items:
        return frozenset(items)
    return frozenset() if saw_idk else None


def merge_sets(
    question: str, sets: Sequence[frozenset[str] | None], equivalence: EquivalenceFn | None = None
) -> list[frozenset[str] | None]:
    """Merge equivalent labels across the samples of one prompt (failures stay None)."""
    canon_sets = [
        None if s is None else frozenset(c for c in (canonical_label(x) for x in s) if c)
        for s in sets
    ]
    occurrences = [label for s in canon_sets if s is not None for label in sorted(s)]
    # sorted() only fixes the order within one sample; first-seen across samples is preserved
    rep = representatives(question, occurrences, equivalence)
    return [None if s is None else frozenset(rep[x] for x in s) for s in canon_sets]


@dataclass
class SetExtractor(LocalModelExtractor):
    """Set g_T over many responses, with counts of parse failures (`LocalModelExtractor`).

    Args:
        method: "rule", "llm" (OpenAI-compatible `client`) or "local" (generation `backend`).
        client: an `LLMClient` (method "llm").
        backend: a built generation backend (method "local").
        max_new_tokens: decode budget of the local extractor.
        equivalence: optional `(question, labels) -> cluster ids` for merging across samples.
        fallback_to_rules: when the LLM/local extractor's output is unparseable, use the rules
            (the 135M local model often is; off by default so failures are visible).
    """

    METHODS = METHODS

    fallback_to_rules: bool = False

    def extract(
        self, questions: Sequence[object], texts: Sequence[object]
    ) -> list[frozenset[str] | None]:
        """One label set per (question, response) pair, or None for a parse failure."""
        self._check_pairs(questions, texts)
        if self.method == "rule":
            out = _read_once(questions, texts)
        else:
            raw = self._complete(
                [extraction_prompt("answer_set", q, t) for q, t in zip(questions, texts)]
            )
            out = [parse_extractor_output(r) for r in raw]
            if self.fallback_to_rules:
                out = [
                    o if o is not None else extract_answer_set(t, q)
                    for o, q, t in zip(out, questions, texts)
                ]
        return self._counted(out)

    def map_prompt(self, question: object, texts: Sequence[object]) -> list[frozenset[str] | None]:
        """The samples of one prompt: extract, then merge equivalent labels across them."""
        q = to_text(question)
        return merge_sets(q, self.extract([q] * len(texts), texts), self.equivalence)

    def map_prompts(
        self, questions: Sequence[object], texts_per_prompt: Sequence[Sequence[object]]
    ) -> list[list[frozenset[str] | None]]:
        """Many prompts at once (one batched extractor call), merged per prompt."""
        flat_q = [to_text(q) for q, texts in zip(questions, texts_per_prompt) for _ in texts]
        flat_t = [t for texts in texts_per_prompt for t in texts]
        flat = self.extract(flat_q, flat_t)
        out, i = [], 0
        for q, texts in zip(questions, texts_per_prompt):
            out.append(merge_sets(to_text(q), flat[i : i + len(texts)], self.equivalence))
            i += len(texts)
        return out
