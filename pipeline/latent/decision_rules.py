"""How each `latent` decision method of pipeline/components/methods.py decides from a cell's samples:
registered by the method's name, so the decide stage loops over the declared methods and names
none. A rule gets the task's `LatentBatch` (every decidable prompt's parsed samples) and each
prompt's sample texts, and returns per prompt (actions, their empirical risks, their texts or
None = the space writes them)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from pipeline.components.registry import Registry
from pipeline.text.normal_forms import canonical_label

from .base import LatentBatch

Decisions = tuple[list[Any], np.ndarray, "list[str] | None"]
Rule = Callable[[LatentBatch, list[list[str]]], Decisions]
DECISION_RULES: Registry[Rule] = Registry("decision rule")


def chosen_samples(batch: LatentBatch, idx: np.ndarray) -> Decisions:
    """Sample idx[p] of every prompt p, with its empirical risk."""
    risks = batch.sample_risks()
    return (
        [items[i] for items, i in zip(batch.items, idx)],
        np.array([r[i] for r, i in zip(risks, idx)], dtype=np.float64),
        None,
    )


@DECISION_RULES.register("bayes")
def bayes(batch, texts):
    """The closed-form Bayes action and its Bayes risk (the paper's uncertainty)."""
    actions, risks = batch.bayes()
    return actions, risks, None


@DECISION_RULES.register("map")
def latent_map(batch, texts):
    """l_MAP: the most frequent sampled latent."""
    return chosen_samples(batch, batch.map())


@DECISION_RULES.register("sample_mbr")
def sample_mbr(batch, texts):
    """l_Sample: the sample of least empirical risk (MBR restricted to the samples)."""
    return chosen_samples(batch, batch.sample_mbr()[0])


@DECISION_RULES.register("self_consistency")
def self_consistency(batch, texts):
    """Self-consistency (Wang et al. 2023): majority vote over normalised raw answers; the first
    sample of the winning answer, with its own text."""
    winners = []
    for prompt_texts in texts:
        answers = [canonical_label(t) for t in prompt_texts]
        votes = Counter(answers)
        top = max(votes.values())
        winners.append(next(i for i, a in enumerate(answers) if votes[a] == top))
    actions, risks, _ = chosen_samples(batch, np.array(winners, dtype=np.int64))
    return actions, risks, [t[i] for t, i in zip(texts, winners)]
