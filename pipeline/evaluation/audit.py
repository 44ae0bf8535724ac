"""An audit of how answers and references were read, per prompt, for a person to check.

Every number rests on two readings: g_T turning responses into labels, and the match of those
labels to the reference. `audit_prompt` records both for one prompt (the reference's labels, and
for every label the responses and decisions hold, the reference answer it names and by which
rule) and raises warnings where a careful reader would look twice:

- ``reference_collapsed``: two reference answers read as one label (or one names the other);
- ``stop_word_label``: a label that is a function word ("the", "and", "it");
- ``single_letter_label``: a one-character label ("c", "a": right for blood types, wrong when a
  name lost its symbols);
- ``fragment_label``: a label whose words are part of a longer label of the same response
  ("kingdom" beside "united kingdom");
- ``mostly_empty``: most responses parse to the empty set (or not at all).

Stdlib only; the evaluate stage stores one row per prompt (`audit.parquet`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pipeline.evaluation.matching import Judge, answer_names, match_label

__all__ = [
    "WARNINGS",
    "STOP_WORDS",
    "PromptAudit",
    "audit_prompt",
    "label_warnings",
    "count_warnings",
]

WARNINGS = (
    "reference_collapsed",
    "stop_word_label",
    "single_letter_label",
    "fragment_label",
    "mostly_empty",
)

STOP_WORDS = frozenset(
    "the a an and or but nor of in on at to for by with from as is are was were be been it its "
    "this that these those they them he she we you i which who whom what there here not no yes "
    "also too so than then".split()
)


@dataclass
class PromptAudit:
    """The reading of one prompt: reference labels (one per answer), every label's match
    ({label: {"answer": index or None, "rule": ...}}) and the warnings (kind: detail)."""

    reference_labels: list[str] = field(default_factory=list)
    label_matches: dict[str, dict] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def label_warnings(labels: Iterable[str]) -> list[str]:
    """Warnings about the labels of one response (see the module doc)."""
    labels = sorted({str(x) for x in labels if str(x)})
    out = []
    for label in labels:
        if label in STOP_WORDS:
            out.append(f"stop_word_label: {label!r}")
        elif len(label) == 1:
            out.append(f"single_letter_label: {label!r}")
        words = label.split()
        for other in labels:
            longer = other.split()
            if (
                other != label
                and len(longer) > len(words)
                and any(
                    longer[i : i + len(words)] == words for i in range(len(longer) - len(words) + 1)
                )
            ):
                out.append(f"fragment_label: {label!r} beside {other!r}")
                break
    return out


def audit_prompt(
    response_labels: Sequence[list[str] | None],
    answers: Sequence[Sequence[object]],
    question: str = "",
    extra_labels: Iterable[str] = (),
    judge: Judge | None = None,
    empty_share: float = 0.5,
    reference_latent_labels: Sequence[str] | None = None,
) -> PromptAudit:
    """Audit one prompt. `response_labels`: each sample's labels (None: unparseable);
    `answers`: the reference's alias lists; `extra_labels`: labels of the decisions (Bayes,
    beam, ...) to match too; `reference_latent_labels`: a mapped reference's own labels (graphs),
    matched by equality instead of by alias."""
    audit = PromptAudit()
    if reference_latent_labels is not None:
        audit.reference_labels = list(reference_latent_labels)
    else:
        names = answer_names(answers)
        audit.reference_labels = [n for n in names if n is not None]
        seen: dict[str, int] = {}
        for i, name in enumerate(names):
            if name is None:
                continue
            other = match_label(name, [a for j, a in enumerate(answers) if j != i], question)
            if name in seen or (other.answer is not None and other.rule == "alias"):
                audit.warnings.append(
                    f"reference_collapsed: answer {i + 1} ({name!r}) reads as another answer"
                )
            seen.setdefault(name, i)
    everything = [x for labels in response_labels if labels for x in labels] + list(extra_labels)
    ref_set = set(audit.reference_labels)
    for label in dict.fromkeys(everything):
        if reference_latent_labels is not None:
            hit = label in ref_set
            audit.label_matches[label] = {
                "answer": audit.reference_labels.index(label) if hit else None,
                "rule": "same" if hit else "none",
            }
        else:
            m = match_label(label, answers, question, judge)
            audit.label_matches[label] = {"answer": m.answer, "rule": m.rule}
    warnings_of: dict[tuple, list[str]] = {}  # a prompt's responses repeat: each read once
    per_response: Counter = Counter()
    for labels in response_labels:
        if labels:
            key = tuple(map(str, labels))  # label_warnings reads them as text
            if key not in warnings_of:
                warnings_of[key] = label_warnings(labels)
            per_response.update(warnings_of[key])
    audit.warnings.extend(sorted(per_response))
    parsed_empty = sum(1 for labels in response_labels if not labels)
    if response_labels and parsed_empty / len(response_labels) > empty_share:
        audit.warnings.append(
            f"mostly_empty: {parsed_empty} of {len(response_labels)} responses "
            "give no answer or do not parse"
        )
    return audit


def count_warnings(warnings: Iterable[Iterable[str]]) -> dict[str, int]:
    """Prompts with each kind of warning (one count per prompt and kind), every kind listed."""
    counts = {kind: 0 for kind in WARNINGS}
    for prompt_warnings in warnings:
        for kind in {w.split(":", 1)[0] for w in prompt_warnings}:
            counts[kind] = counts.get(kind, 0) + 1
    return counts
