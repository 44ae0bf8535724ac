"""Knowledge graphs as edge sets with the structural Hamming distance (paper Section 3.4).

A graph is a ``frozenset`` of (head, relation, tail) string triples; the maths is that of
``SetSpace`` over edges: E_Bayes = {e : P(e) >= 1/2}, risk sum_e min(P(e), 1 - P(e)), and the
action's vertices are the endpoints of its edges.

The paper's graphs are undirected ("we represent summaries as undirected knowledge graphs
(V, E)"), so by default an edge's endpoints are stored in sorted order: (a, r, b) and (b, r, a)
are one edge. ``directed=True`` keeps the extracted direction; ``relation_labels=False`` drops
the relation from an edge's identity (an edge is its two endpoints, the plain (V, E) reading).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pipeline.latent.base import LatentTypeError, register, reject_none
from pipeline.tasks.sets.space import SetSpace

Triple = tuple[str, str, str]


@register("graphs")
class GraphSpace(SetSpace):
    """frozenset of (head, relation, tail) string triples; Hamming over edges.  O(M E).

    Stored as a sorted list of [head, relation, tail]; written as text by g_T^-1 (the relations
    as sentences joined on full stops, the paper's appendix), for every decision alike. An
    undirected edge is written in the direction the prompt's samples state it.
    """

    canonical_options = ("directed", "relation_labels")

    def __init__(self, directed: bool = False, relation_labels: bool = True) -> None:
        if not isinstance(directed, bool) or not isinstance(relation_labels, bool):
            raise ValueError(
                "graphs: directed and relation_labels must be true or false, got "
                f"{directed!r}, {relation_labels!r}"
            )
        self.directed = directed
        self.relation_labels = relation_labels

    def __repr__(self) -> str:
        return f"GraphSpace(directed={self.directed}, relation_labels={self.relation_labels})"

    def edge(self, head: str, relation: str, tail: str) -> Triple:
        """An edge in this space's canonical form (endpoints sorted unless directed)."""
        relation = relation if self.relation_labels else ""
        if not self.directed and tail < head:
            head, tail = tail, head
        return head, relation, tail

    def encode(self, latent: frozenset) -> list:
        return [list(e) for e in sorted(self.canonical(latent))]

    def decode(self, payload: Any) -> frozenset[Triple]:
        if not isinstance(payload, list) or not all(
            isinstance(e, list) and len(e) == 3 for e in payload
        ):
            raise ValueError(
                f"graphs: expected a list of [head, relation, tail], got {payload!r:.200}"
            )
        return self.canonical(payload)

    def labels(self, latent: Any) -> list[str] | None:
        return None if latent is None else [" | ".join(e) for e in sorted(self.canonical(latent))]

    def describe(self, latent: Any, texts: Sequence[str] = ()) -> str:
        if latent is None:
            return ""
        return graph_to_text(latent if self.directed else {oriented(e, texts) for e in latent})

    # an edge set is canonical only once its edges are checked (and oriented when undirected)
    frozensets_are_canonical = False

    def canonical(self, latent: Any) -> frozenset[Triple]:
        reject_none(latent, "graphs")
        if isinstance(latent, (str, bytes, dict)) or not isinstance(latent, Iterable):
            raise LatentTypeError(
                f"graphs: a latent must be a frozenset of (head, relation, tail) triples, got {type(latent).__name__}"
            )
        edges = []
        for edge in latent:
            if (
                isinstance(edge, (str, bytes))
                or not isinstance(edge, (tuple, list))
                or len(edge) != 3
                or not all(isinstance(part, str) for part in edge)
            ):
                raise ValueError(
                    f"graphs: every edge must be a (head, relation, tail) tuple of 3 strings, got {edge!r}"
                )
            edges.append(self.edge(*edge))
        return frozenset(edges)

    @staticmethod
    def vertices(action: Iterable[Triple]) -> frozenset[str]:
        """V = the heads and tails of the graph's edges."""
        out: set[str] = set()
        for head, _relation, tail in action:
            out.add(head)
            out.add(tail)
        return frozenset(out)


def oriented(edge: Triple, texts: Sequence[str]) -> Triple:
    """An undirected edge in the direction the texts state it: tail first when a text names the
    tail before the head and none names the head first (the stored order otherwise)."""
    head, relation, tail = edge
    head_first = tail_first = False
    for text in texts:
        low = text.lower()
        h, t = low.find(head.lower()), low.find(tail.lower())
        if h >= 0 and t >= 0 and h != t:
            head_first |= h < t
            tail_first |= t < h
    return (tail, relation, head) if tail_first and not head_first else edge


def graph_to_text(triples: object) -> str:
    """The paper's g_T^-1: every relation as a sentence "head relation tail.", joined by spaces.

    Triples are sorted so the text of a graph is deterministic.
    """
    if not triples:
        return ""
    sentences = []
    for h, r, t in sorted(tuple(map(str, x)) for x in triples):  # type: ignore[union-attr]
        sentence = " ".join(p for p in (h, r, t) if p).strip()
        if sentence:
            sentences.append(sentence[0].upper() + sentence[1:] + ".")
    return " ".join(sentences)
