"""The answer-set task's metric maths (paper appendix "Evaluation Metrics", DESIGN s6): the
normalised Hamming distance and F1 of a predicted set against the reference set, and the
alignment that puts predicted labels and the reference's alias lists in one label space.

Pure functions of plain Python values. The metrics compare elements as given: callers pass
canonical labels (the latents already are; `align_to_aliases` maps predicted labels onto
alias-list references by the rules of `pipeline.evaluation.matching`). A graph is a set of
edges: the graphs task scores with these too (pipeline/tasks/graphs/metrics.py).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from typing import Literal

from pipeline.evaluation.matching import Judge, align_labels

__all__ = ["align_to_aliases", "f1_score", "normalized_hamming"]


def _as_set(items: Iterable[Hashable] | None, name: str) -> frozenset:
    if items is None:
        return frozenset()
    if isinstance(items, str | bytes):
        # A bare string would silently become a set of characters.
        raise TypeError(
            f"{name} must be a set of labels, got the string {items!r}; wrap it: {{...}}"
        )
    try:
        return frozenset(items)
    except TypeError as err:
        raise TypeError(f"{name} must be an iterable of hashable labels: {err}") from err


def normalized_hamming(pred: Iterable[Hashable], ref: Iterable[Hashable]) -> float:
    """``|pred xor ref| / |ref|``: the Hamming distance over the union of labels, per true label.

    Lower is better; 0 iff the sets are equal; it can exceed 1 (many wrong labels).
    A bare string raises TypeError (it would otherwise become a set of characters).
    Empty reference: the denominator is ``max(|ref|, 1)``, so the value is the number of
    predicted labels (0 when both are empty) instead of a division by zero.
    """
    p, r = _as_set(pred, "pred"), _as_set(ref, "ref")
    return len(p ^ r) / max(len(r), 1)


def f1_score(
    pred: Iterable[Hashable],
    ref: Iterable[Hashable],
    mean: Literal["harmonic", "geometric"] = "harmonic",
) -> float:
    """F1 of a predicted set against the reference set (higher is better, in [0, 1]).

    precision = |pred & ref| / |pred|, recall = |pred & ref| / |ref|, combined by their
    ``"harmonic"`` mean (the usual F1, default) or ``"geometric"`` mean (the paper's wording).
    Empty sets: F(empty, empty) = 1 (nothing to find, nothing claimed); if exactly one side is
    empty, F = 0 (precision or recall is 0 and the other is undefined).
    """
    if mean not in ("harmonic", "geometric"):
        raise ValueError(f"mean must be 'harmonic' or 'geometric', got {mean!r}")
    p, r = _as_set(pred, "pred"), _as_set(ref, "ref")
    if not p and not r:
        return 1.0
    hits = len(p & r)
    if hits == 0:  # also covers exactly one empty side
        return 0.0
    precision, recall = hits / len(p), hits / len(r)
    if mean == "harmonic":
        return 2.0 * precision * recall / (precision + recall)
    return math.sqrt(precision * recall)


def align_to_aliases(
    pred_labels: Iterable[object],
    answers: Sequence[Sequence[object]],
    question: str = "",
    judge: Judge | None = None,
) -> tuple[frozenset[str], frozenset[str]]:
    """Predicted set and reference set in one label space, for the set metrics above.

    ``answers`` holds one alias list per correct answer (the dataset's ``answers`` column). Each
    answer is represented by its first alias (``canonical_label``); a predicted label that names
    an answer (``pipeline.evaluation.matching``: an alias, a generic head noun, a plural, a
    surname in a who-question, or the optional judge) becomes that answer's label, other
    predicted labels are kept canonical. Empty labels are dropped. Returns ``(pred_set, ref_set)``.
    """
    aligned = align_labels(pred_labels, answers, question, judge)
    return aligned.pred, aligned.ref
