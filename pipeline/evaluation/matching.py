"""Does a predicted answer label name a reference answer? One rule for every task that compares
labels with a dataset's alias lists (sets: Hamming and F1; simplex: KL), stdlib only.

A label names a reference answer when, after `pipeline.text.canonical_label` on both sides
(case, accents, a leading article, acronym dots and punctuation do not matter; letters and
symbols inside a name do: "Vitamin A" != "Vitamin D", "C" != "C++"), it

1. equals one of the answer's aliases (rule "alias"), or
2. differs from an alias only by a generic head noun that says what kind of thing it is, not
   which one (rule "head_noun": "Atlantic Ocean" ~ "Atlantic", "Lake Superior" ~ "Superior",
   "German language" ~ "German"); a qualifier is never generic ("North Korea" !~ "Korea",
   "New Mexico" !~ "Mexico", "Saturn V" !~ "Saturn"), or
3. differs from an alias only by a plural "s" of one word (rule "plural": "violins" ~ "violin"),
4. in a question asking *who*, is the surname of a multi-word alias (rule "surname":
   "Lennon" ~ "John Lennon"; never a first name alone).

Everything else is no match ("none"), unless a judge (an NLI model or an LLM, see
`evaluation.match` in the config and docs/fidelity.md) is given and says the two name the same
answer (rule "judge"). Exact and alias matches are preferred over the looser rules when a label
could name two answers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from pipeline.text import canonical_label, to_text

__all__ = ["GENERIC_HEADS", "Match", "Alignment", "names_match", "match_label", "align_labels",
           "answer_names", "reference_labels", "remap_distribution", "Judge"]

# Nouns that say what kind of thing a name is. Singular and plural; "mt" is "Mt." after the key.
GENERIC_HEADS = frozenset(
    "ocean oceans sea seas river rivers lake lakes mount mt mountain mountains island islands isle "
    "isles desert deserts canal strait straits bay peninsula volcano glacier falls waterfall "
    "valley forest city town language languages dialect planet dwarf element gas metal dynasty "
    "empire band group company corporation corp inc ltd plc university college state".split())

# judge(question, label, aliases) -> whether the label names that answer
Judge = Callable[[str, str, Sequence[str]], bool]

_RULE_ORDER = ("alias", "plural", "head_noun", "surname", "judge")


@dataclass(frozen=True)
class Match:
    """How one predicted label was matched: the index of the reference answer it names (None:
    it names none) and the rule that decided ("alias", "head_noun", "plural", "surname",
    "judge" or "none")."""

    label: str
    answer: int | None
    rule: str

    def as_dict(self) -> dict:
        return {"label": self.label, "answer": self.answer, "rule": self.rule}


def _singular(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-3] + "y" if word.endswith("ies") else word[:-1]
    return word


def _rule(label: str, alias: str, who: bool) -> str | None:
    """The rule by which two canonical names are one answer, or None."""
    if label == alias:
        return "alias"
    a, b = label.split(), alias.split()
    if len(a) == len(b) and [_singular(w) for w in a] == [_singular(w) for w in b]:
        return "plural"
    shorter, longer = (a, b) if len(a) < len(b) else (b, a)
    if not shorter or len(shorter) == len(longer):
        return None
    for start in range(len(longer) - len(shorter) + 1):
        if longer[start:start + len(shorter)] == shorter:
            extra = longer[:start] + longer[start + len(shorter):]
            if all(w in GENERIC_HEADS for w in extra):
                return "head_noun"
            if (who and len(shorter) == 1 and start + len(shorter) == len(longer)
                    and len(longer) <= 3 and not {"and", "of", "&"} & set(longer)):
                return "surname"  # "Lennon" ~ "John Lennon" in a who-question, never "John"
    return None


def _is_who(question: str) -> bool:
    return bool(re.search(r"\bwho(?:m|se)?\b", question, re.IGNORECASE))


def names_match(label: object, alias: object, question: str = "") -> bool:
    """Whether `label` names the same answer as `alias` by the rules of this module."""
    a, b = canonical_label(to_text(label)), canonical_label(to_text(alias))
    return bool(a and b) and _rule(a, b, _is_who(question)) is not None


def _aliases(answer: object) -> list[str]:
    if isinstance(answer, str | bytes | bytearray):
        answer = [answer]
    return [c for c in (canonical_label(to_text(a)) for a in answer) if c]


def match_label(label: object, answers: Sequence[Sequence[object]], question: str = "",
                judge: Judge | None = None) -> Match:
    """The reference answer `label` names: the first answer by the strictest rule that holds."""
    key = canonical_label(to_text(label))
    if not key:
        return Match(key, None, "none")
    who = _is_who(question)
    best: tuple[int, int] | None = None  # (rule rank, answer index)
    for i, answer in enumerate(answers):
        for alias in _aliases(answer):
            rule = _rule(key, alias, who)
            if rule is not None:
                rank = _RULE_ORDER.index(rule)
                if best is None or rank < best[0]:
                    best = (rank, i)
    if best is not None:
        return Match(key, best[1], _RULE_ORDER[best[0]])
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


def remap_distribution(dist: dict, answers: Sequence[Sequence[object]], question: str = "",
                       judge: Judge | None = None) -> dict[str, float]:
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


def align_labels(pred_labels: Iterable[object], answers: Sequence[Sequence[object]],
                 question: str = "", judge: Judge | None = None) -> Alignment:
    """`pred_labels` and `answers` (one alias list per reference answer) in one label space."""
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
