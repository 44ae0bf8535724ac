"""The graph task's metric maths: a graph is the set of its (head, relation, tail) edges, so its
distances are the set task's over edges (pipeline/tasks/sets/metrics.py)."""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from pipeline.tasks.sets.metrics import normalized_hamming

__all__ = ["hamming_graph"]


def hamming_graph(pred_edges: Iterable[Hashable], ref_edges: Iterable[Hashable]) -> float:
    """Normalised structural Hamming distance of two graphs given as edge sets.

    The same as :func:`normalized_hamming` over the sets of edges (e.g. (head, relation, tail)
    triples), as in the paper: ``|E_pred xor E_ref| / max(|E_ref|, 1)``.
    """
    return normalized_hamming(pred_edges, ref_edges)
