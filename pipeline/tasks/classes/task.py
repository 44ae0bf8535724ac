"""Single-answer QA (TriviaQA): responses clustered into classes, the 0-1 loss."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pipeline.components.parts import one_of
from pipeline.data.references import answer_aliases
from pipeline.evaluation import match_label
from pipeline.mapping.numbers import parse_number
from pipeline.mapping.settings import EquivalenceConfig
from pipeline.tasks.classes.metrics import exact_match
from pipeline.tasks.classes.question_answer import YEAR_QUESTION as _YEAR_QUESTION
from pipeline.tasks.classes.reading import _NUMERIC_QUESTION, read_single_answer
from pipeline.tasks.contract import (
    MAPPERS,
    METRICS,
    REFERENCES,
    Mapper,
    Metric,
    Reference,
    ReferenceKind,
)
from pipeline.text.normal_forms import canonical_label


@dataclass
class ExactMatchSettings:
    # official: the official TriviaQA evaluation's normalised exact match against every alias;
    # careful: the names read as the set metrics read them (pipeline/evaluation/matching.py)
    reading: str = "official"

    def __post_init__(self) -> None:
        one_of(self, "reading", ("official", "careful"))


@dataclass
class ClassesSettings:
    equivalence: EquivalenceConfig = field(default_factory=EquivalenceConfig)  # task.equivalence


# an answer that is a number and nothing else: digits, number words, signs, separators
_NUMBER_ONLY = re.compile(
    r"[-+\u2212]?(?:[\d.,\s]|\b(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|"
    r"eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|"
    r"forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|million|billion|and|a)\b|-)+",
    re.IGNORECASE,
)


def class_key(text: str, question: str) -> str:
    """The label a response's answer is clustered by: its canonical answer, a number written as
    digits ("8", "eight", "Eight.", "A spider has eight legs." to a how-many question all read
    "8"); "" when the response states nothing."""
    answer = read_single_answer(text, question)
    if not answer:
        return ""
    if answer.isdigit() and len(answer) == 4 and _YEAR_QUESTION.match(question or ""):
        return answer  # the year the response states, not its first number ("26 April 1986")
    value = None
    if _NUMERIC_QUESTION.match(question or ""):  # the first number the response states
        value = parse_number(next((line for line in text.splitlines() if line.strip()), "")[:500])
    if value is None and _NUMBER_ONLY.fullmatch(answer):
        value = parse_number(answer)
    if value is not None and math.isfinite(value):
        return str(int(value)) if float(value).is_integer() else repr(float(value))
    return canonical_label(answer)


def build_classes(settings: ClassesSettings, context) -> Any:
    """NLI (the paper, as Kuhn et al.): whole responses clustered by bidirectional entailment.
    Offline: each response's answer (`read_single_answer`), clustered by the label rule.
    A class is named by its most frequent member's answer (canonical; ties: first seen), so the
    name is the answer most samples of the cluster give, not whichever came first."""
    from pipeline.tasks.builders import label_clusterer

    nli = settings.equivalence.backend == "nli"
    clusterer = label_clusterer(settings.equivalence, context)

    def classes(question: str, texts: list[str]) -> list[Any]:
        keys = [class_key(t, question) for t in texts]
        keep = [i for i, k in enumerate(keys) if k]
        ids = (
            clusterer.cluster(question, [texts[i] if nli else keys[i] for i in keep])
            if keep
            else []
        )
        members: dict[Any, Counter] = {}
        for i, c in zip(keep, ids):  # Counter keeps first-seen order: ties go to the first
            members.setdefault(c, Counter())[keys[i]] += 1
        name = {c: max(counts, key=counts.__getitem__) for c, counts in members.items()}
        out: list[Any] = [None] * len(texts)
        for i, c in zip(keep, ids):
            out[i] = name[c]
        return out

    def prefetch(items: list[tuple[str, list[str], list[str]]]) -> None:
        if nli and hasattr(clusterer, "cluster_many"):  # the pairs clustering reads, batched
            clusterer.cluster_many(
                [(q, [t for t in texts if class_key(t, q)]) for q, texts, _ in items]
            )

    classes.prefetch = prefetch  # type: ignore[attr-defined]
    return classes


MAPPERS.add(
    "classes",
    Mapper(
        build_classes,
        ClassesSettings,
        clusters_responses=True,
        description="clusters of whole responses (NLI) or of core answers",
    ),
)


def one_answer_from_user(raw: Any) -> dict[str, Any]:
    """ "Paris" | ["Paris", "City of Paris"] (aliases of one answer) | [[...]]."""
    if isinstance(raw, (list, tuple)) and any(isinstance(r, (list, tuple)) for r in raw):
        answers = [a for a in (answer_aliases(r) for r in raw) if a]
    else:
        answers = [a for a in [answer_aliases(raw)] if a]
    return {"answers": answers, "probabilities": [], "reference_text": ""}


REFERENCES.add(
    "one_answer",
    ReferenceKind(
        check=lambda r: (
            None if len(r["answers"]) == 1 else "needs exactly one answer (with its aliases)"
        ),
        from_user=one_answer_from_user,
        present=lambda r: len(r["answers"]) > 0,
        description="one correct answer with its aliases",
    ),
)


def exact_match_error(text: Any, ref: Reference, settings: ExactMatchSettings) -> float:
    """The paper's "Exact Match (lower is better)" as an error: 0 when the answer the decision's
    text gives (`read_single_answer`) names the reference, else 1. Every method is scored on the
    text it returns: a cluster decision on its most frequent member's text, greedy or beam on
    their own. `metrics.exact_match_error.reading`: official (default) = the official TriviaQA
    evaluation's normalised exact match against every alias; careful = the names read as the set
    metrics read them (pipeline/evaluation/matching.py: accents folded, symbols kept so "C" is not
    "C++", head nouns, surnames in who-questions, numbers as digits)."""

    aliases = [a for answer in ref.answers for a in answer]
    answer = read_single_answer(str(text or ""), ref.question)
    if settings.reading == "careful":
        right = match_label(answer, [aliases], ref.question).answer is not None
    else:
        right = exact_match(answer, aliases)
    return 1.0 - float(right)


METRICS.add(
    "exact_match_error",
    Metric(
        "Exact Match",
        higher_is_better=False,
        fn=exact_match_error,
        reads="text",
        Config=ExactMatchSettings,
    ),
)
