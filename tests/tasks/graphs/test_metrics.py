"""The graph task's metric maths on hand-computed values (pipeline/tasks/graphs/metrics.py)."""

from __future__ import annotations

from pipeline.tasks.graphs.metrics import hamming_graph


def test_hamming_graph_over_edges() -> None:
    pred = {("paris", "capital of", "france"), ("paris", "located in", "europe")}
    ref = {("paris", "capital of", "france"), ("france", "member of", "eu")}
    assert hamming_graph(pred, ref) == 1.0  # 2 differing edges / 2 true edges
    assert hamming_graph(pred, pred) == 0.0
    assert hamming_graph(frozenset(), ref) == 1.0
