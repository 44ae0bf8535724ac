"""Quality of one decision against its reference (paper appendix "Evaluation Metrics", DESIGN s6).

Pure functions of plain Python / numpy values. Set and graph metrics compare elements as given:
callers pass canonical labels (the latents already are; :func:`align_to_aliases` maps predicted
labels onto alias-list references by the rules of ``pipeline.evaluation.matching``). Text metrics (COMET, AlignScore) live elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Literal

import numpy as np

from pipeline.evaluation.matching import Judge, align_labels


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


def hamming_graph(pred_edges: Iterable[Hashable], ref_edges: Iterable[Hashable]) -> float:
    """Normalised structural Hamming distance of two graphs given as edge sets.

    The same as :func:`normalized_hamming` over the sets of edges (e.g. (head, relation, tail)
    triples), as in the paper: ``|E_pred xor E_ref| / max(|E_ref|, 1)``.
    """
    return normalized_hamming(pred_edges, ref_edges)


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
    pred_labels: Iterable[object], answers: Sequence[Sequence[object]], question: str = "",
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


def cosine_distance(a: object, b: object) -> float:
    """``1 - <a, b> / (|a| |b|)`` of two vectors, in [0, 2] (lower is better).

    Raises ValueError for vectors of different shapes, non-finite entries or zero norm (the
    direction of a zero vector is undefined).
    """
    x = np.asarray(a, dtype=float).reshape(-1)
    y = np.asarray(b, dtype=float).reshape(-1)
    if x.shape != y.shape:
        raise ValueError(f"vectors must have the same length, got {x.shape[0]} and {y.shape[0]}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("vectors must be finite (found NaN or inf)")
    nx, ny = np.linalg.norm(x), np.linalg.norm(y)
    if nx == 0 or ny == 0:
        raise ValueError("cosine distance is undefined for a zero vector")
    cos = float(np.dot(x, y) / (nx * ny))
    return 1.0 - min(1.0, max(-1.0, cos))  # clip rounding just outside [-1, 1]


def _distribution(d: Mapping[Hashable, float], name: str) -> dict[Hashable, float]:
    if not isinstance(d, Mapping):
        raise TypeError(f"{name} must be a dict label -> probability, got {type(d).__name__}")
    out: dict[Hashable, float] = {}
    for label, value in d.items():
        v = float(value)
        if not math.isfinite(v) or v < 0:
            raise ValueError(
                f"{name}[{label!r}] = {value!r}: probabilities must be finite and >= 0"
            )
        out[label] = v
    total = sum(out.values())
    if total <= 0:
        raise ValueError(f"{name} has no probability mass (empty or all zero); nothing to compare")
    return {label: v / total for label, v in out.items()}


def kl_divergence(
    p_star: Mapping[Hashable, float], pred: Mapping[Hashable, float], eps: float = 1e-6
) -> float:
    """``KL(p* || pred)`` in nats, with pred smoothed over the union support (lower is better).

    Both dicts are aligned on the union of their labels (K labels, missing = 0) and renormalised
    to sum to 1 (MAQA* probabilities may not). The prediction is smoothed as
    ``pred <- (pred + eps) / (1 + K eps)`` so labels it misses cost ``log(p*/eps')`` instead of
    infinity; terms with ``p* = 0`` contribute 0.

    Raises ValueError for negative / non-finite probabilities, no mass, or ``eps <= 0``;
    TypeError if either side is not a mapping.
    """
    if not (isinstance(eps, int | float) and math.isfinite(eps) and eps > 0):
        raise ValueError(f"eps must be a positive number, got {eps!r}")
    p = _distribution(p_star, "p_star")
    a = _distribution(pred, "pred")
    support = list(dict.fromkeys([*p, *a]))  # union, in a deterministic order
    k = len(support)
    p_vec = np.array([p.get(label, 0.0) for label in support])
    a_vec = (np.array([a.get(label, 0.0) for label in support]) + eps) / (1.0 + k * eps)
    mask = p_vec > 0
    return float(np.sum(p_vec[mask] * np.log(p_vec[mask] / a_vec[mask])))
