"""The single-answer task's metric maths on hand-computed values
(pipeline/tasks/classes/metrics.py)."""

from __future__ import annotations

from pipeline.tasks.classes.metrics import exact_match


def test_exact_match_uses_canonical_labels() -> None:
    aliases = ["Pacific Ocean", "the Pacific"]
    assert exact_match("The Pacific Ocean.", aliases) is True
    assert exact_match("pacific", aliases) is True
    assert exact_match("Atlantic Ocean", aliases) is False
    assert exact_match("Pacific Ocean", "PACIFIC OCEAN!") is True  # a single alias string
    assert exact_match(b"pacific ocean", aliases) is True  # bytes as model output
    assert exact_match("", ["", "the"]) is False  # empty prediction never matches
    assert exact_match(None, ["x"]) is False
    assert exact_match("x", []) is False
