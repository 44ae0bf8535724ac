"""Pieces the task mappers (pipeline/tasks/) share: the local extractor backend, how labels are merged across a prompt's responses, and the offline answer readers.
Built from the cell's settings and MapContext, so they sit above the components they build."""

from __future__ import annotations

from pipeline.mapping import extract_answers
from pipeline.mapping.labels import LabelMerger
from pipeline.runtime.errors import ConfigError
from pipeline.text.normal_forms import canonical_label


def local_backend(context):
    """The generation model itself as an extractor (task.extractor.kind=local)."""
    if context.local_backend is None:
        raise ConfigError(
            "task.extractor.kind=local needs the cell's generation model, which "
            "this run does not have; use kind=rule or kind=llm"
        )
    return context.local_backend()


def label_clusterer(equivalence, context):
    """How labels are merged across a prompt's responses: NLI in the paper configuration;
    offline, a deterministic label rule (pipeline/mapping/labels.py explains why not MiniLM)."""
    if equivalence.backend == "nli":
        from pipeline.aux_models.factories import equivalence_judge

        return equivalence_judge(equivalence, context.device, context.cache_dir)

    return LabelMerger()


def label_merge(settings, context):
    """The `cluster(question, labels)` used to merge labels across a prompt's responses (the
    mapper's `merge_by`), or None: labels are one when their canonical forms are equal."""
    if not settings.extractor.merge_labels or settings.merge_by == "canonical":
        return None
    if settings.merge_by == "rule":
        return LabelMerger().cluster
    return label_clusterer(settings.equivalence, context).cluster


def core_answer(text: str, question: str) -> str:
    """The answer a response gives, in canonical form ("The capital is Windhoek." -> "windhoek");
    the whole canonical response when no answer can be extracted (e.g. a refusal)."""
    answers = extract_answers(text, question)
    return " / ".join(sorted(answers)) if answers else canonical_label(text)


_CLAUSE_STARTS = frozenset(
    "with which who whose that where when while in at on for from by as "
    "approximately about around because since although".split()
)


def answers_as_distribution(text: str, question: str) -> dict[str, float] | None:
    """Fallback simplex g_T: the answers a response states, with equal belief (None if none)."""
    # "Sydney, with a population of ..." : a clause after the answer is not another answer
    answers = sorted(
        a for a in extract_answers(text, question) if a.split()[0] not in _CLAUSE_STARTS
    )
    return {a: 1.0 / len(answers) for a in answers} if answers else None
