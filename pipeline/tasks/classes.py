"""Single-answer QA (TriviaQA): responses clustered into classes, the 0-1 loss."""

from __future__ import annotations

from typing import Any

from pipeline.tasks import MAPPERS, METRICS, REFERENCES, Mapper, Metric, Reference, ReferenceKind
from pipeline.text import canonical_label


def build_classes(cfg) -> Any:
    """NLI (the paper, as Kuhn et al.): whole responses clustered by bidirectional entailment.
    Offline: each response's core answer, clustered by the label rule."""
    from pipeline.mapping.builders import core_answer, label_clusterer

    nli = cfg.task.equivalence.backend == "nli"
    clusterer = label_clusterer(cfg)

    def classes(question: str, texts: list[str]) -> list[Any]:
        keys = [canonical_label(t) if nli else core_answer(t, question) for t in texts]
        keep = [i for i, k in enumerate(keys) if k]
        ids = clusterer.cluster(question, [texts[i] if nli else keys[i] for i in keep]) if keep else []
        rep: dict[int, str] = {}
        for i, c in zip(keep, ids):
            rep.setdefault(c, keys[i])  # a class is named by its first member
        out: list[Any] = [None] * len(texts)
        for i, c in zip(keep, ids):
            out[i] = rep[c]
        return out

    def prefetch(items: list[tuple[str, list[str]]]) -> None:
        if nli and hasattr(clusterer, "prefetch"):  # every prompt's NLI pairs, batched
            clusterer.prefetch([(q, [t for t in texts if canonical_label(t)]) for q, texts in items])

    classes.prefetch = prefetch  # type: ignore[attr-defined]
    return classes


MAPPERS.add("classes", Mapper(build_classes, config_keys=("task.equivalence",), clusters_responses=True,
                              description="clusters of whole responses (NLI) or of core answers"))


def _aliases(value: Any) -> list[str]:
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if v is not None and str(v).strip()]
    return [str(value).strip()] if value is not None and str(value).strip() else []


def one_answer_from_user(raw: Any) -> dict[str, Any]:
    """"Paris" | ["Paris", "City of Paris"] (aliases of one answer) | [[...]]."""
    if isinstance(raw, (list, tuple)) and any(isinstance(r, (list, tuple)) for r in raw):
        answers = [a for a in (_aliases(r) for r in raw) if a]
    else:
        answers = [a for a in [_aliases(raw)] if a]
    return {"answers": answers, "probabilities": [], "reference_text": ""}


REFERENCES.add("one_answer", ReferenceKind(
    check=lambda r: None if len(r["answers"]) == 1 else "needs exactly one answer (with its aliases)",
    from_user=one_answer_from_user,
    present=lambda r: bool(r["answers"]),
    description="one correct answer with its aliases"))


def exact_match_loss(action: Any, ref: Reference, settings: Any) -> float:
    """The paper's "Exact Match (lower is better)": 0 when the class label matches an alias."""
    from pipeline.evaluation import exact_match

    aliases = [a for answer in ref.answers for a in answer]
    return 1.0 if action is None else 1.0 - float(exact_match(str(action), aliases))


METRICS.add("exact_match", Metric("Exact Match", higher_is_better=False, fn=exact_match_loss))
