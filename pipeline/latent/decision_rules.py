"""How each `latent` decision method of pipeline/methods.py decides from a prompt's samples:
registered by the method's name, so the decide stage loops over the declared methods and names
none. A rule gets the task's latent space and the parsed samples as (latent, text) pairs and
returns (action, its empirical risk, its text or None = the space writes it)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from typing import Any

from pipeline.registry import Registry
from pipeline.text import canonical_label

Rule = Callable[[Any, list[tuple[Any, str]]], tuple[Any, float, str | None]]
DECISION_RULES: Registry[Rule] = Registry("decision rule")


def empirical_risk(space, action, latents) -> float:
    if action is None or not latents:
        return math.nan
    return float(space.risk(action, latents))


def _decided(result) -> tuple[Any, float, None]:
    """A space's DecisionResult as a rule's (action, risk, text written by the space)."""
    return result.action, float(result.risk), None


@DECISION_RULES.register("bayes")
def bayes(space, valid):
    """The closed-form Bayes action and its Bayes risk (the paper's uncertainty)."""
    return _decided(space.bayes([lat for lat, _ in valid]))


@DECISION_RULES.register("map")
def latent_map(space, valid):
    """l_MAP: the most frequent sampled latent."""
    latents = [lat for lat, _ in valid]
    action = space.map(latents)
    return action, empirical_risk(space, action, latents), None


@DECISION_RULES.register("sample_mbr")
def sample_mbr(space, valid):
    """l_Sample: the sample of least empirical risk (MBR restricted to the samples)."""
    return _decided(space.sample_mbr([lat for lat, _ in valid]))


@DECISION_RULES.register("self_consistency")
def self_consistency(space, valid):
    """Self-consistency (Wang et al. 2023): majority vote over normalised raw answers; the first
    sample of the winning answer, with its own text."""
    votes = Counter(canonical_label(txt) for _, txt in valid)
    top = max(votes.values())
    winner = next(i for i, (_, txt) in enumerate(valid) if votes[canonical_label(txt)] == top)
    latents = [lat for lat, _ in valid]
    return latents[winner], empirical_risk(space, latents[winner], latents), valid[winner][1]
