"""serve's per-request scoring without pandas (pipeline/serve/scoring.py) gives exactly the row
`pipeline.score` gives on the same responses: every column the served answer reads, for every
rule-read task, with unreadable and truncated samples, with and without log-probs."""

from __future__ import annotations

import math

import numpy as np
import pytest

import pipeline
from pipeline.serve.scoring import TaskScorer

CASES = {
    "sets": (
        "Which cities are in France?",
        ["Paris and Lyon", "Paris", "Paris, Lyon", "Nice", "##", "Paris and Nice"],
    ),
    "sets_fbeta": (
        "Which cities are in France?",
        ["Paris and Lyon", "Paris", "Lyon", "Nice", "Paris, Lyon and Nice"],
    ),
    "classes": (
        "What is the capital of France?",
        ["Paris", "paris", "Lyon", "The capital of France is Paris.", "??", "Marseille"],
    ),
    "reals": ("How many moons has Mars?", ["2", "two", "2.5", "I don't know", "3", "2"]),
    "simplex": (
        "Which city is the capital of Australia?",
        [
            "Canberra (80%), Sydney (20%)",
            "Canberra: 0.6, Sydney: 0.4",
            "Canberra",
            "no idea",
            "Sydney 100%",
        ],
    ),
    "graphs": (
        "Summarise: Anna founded Acme in Oslo.",
        [
            "Anna founded Acme. Acme is based in Oslo.",
            "Anna founded Acme.",
            "Acme is based in Oslo.",
            "",
            "Anna founded Acme in Oslo.",
        ],
    ),
}


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return (
            a is not None and b is not None and math.isnan(a) and math.isnan(b)
        ) or a == pytest.approx(b, abs=1e-12)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    return a == b


@pytest.mark.parametrize("with_logprobs", [False, True])
@pytest.mark.parametrize("cut", [False, True])
@pytest.mark.parametrize("task", sorted(CASES))
def test_the_row_equals_pipeline_score(task, cut, with_logprobs):
    question, responses = CASES[task]
    logprobs = [-0.5 - i for i in range(len(responses))] if with_logprobs else None
    reasons = ["length" if cut and i % 3 == 1 else "stop" for i in range(len(responses))]
    record = {"id": "0", "question": question, "responses": responses, "finish_reasons": reasons}
    if logprobs:
        record["logprobs"] = logprobs
    want = pipeline.score([record], task=task).iloc[0]
    got, latents = TaskScorer(task).score(question, responses, logprobs, reasons)
    assert len(latents) == len(responses)
    missing = [c for c in want.index if c not in got]
    assert not missing, missing  # every column of the scorer's row
    differ = {c: (got[c], want[c]) for c in want.index if not _same(got[c], want[c])}
    assert not differ, differ
    assert set(got) == set(want.index)
