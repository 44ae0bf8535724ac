"""Samples that could not be read count as the outcome "no answer" (reading.unreadable=
no_answer, issue 51.1): checked against brute force over every candidate action, with the
unread samples given the space's no-answer latent, and through pipeline.score."""

from __future__ import annotations

import itertools
import random

import pytest

from pipeline.latent import get_space
from pipeline.stages.decide import decide_many
from pipeline.tasks.classes.space import NO_ANSWER_CLASS


def _brute(space, latents, candidates):
    """The first candidate of least empirical risk, its risk and its expected agreement."""
    risks = [sum(space.distance(x, a) for x in latents) / len(latents) for a in candidates]
    best = next(i for i, r in enumerate(risks) if r <= min(risks) + 1e-12)
    agreement = sum(space.agreement(candidates[best], x) for x in latents) / len(latents)
    return candidates[best], risks[best], agreement


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("name", ["sets", "classes"])
def test_bayes_with_no_answer_matches_brute_force(name, seed):
    rng = random.Random(seed)
    space = get_space(name)
    labels = ["a", "b", "c"]
    m = rng.randint(1, 9)
    read = []
    for _ in range(m):
        if name == "sets":
            read.append(frozenset(x for x in labels if rng.random() < 0.5))
        else:
            read.append(rng.choice(labels))
    unread = rng.randint(0, 12)
    latents = read + [space.no_answer()] * unread  # what the map stage writes for them
    if name == "sets":
        candidates = [frozenset(c) for r in range(4) for c in itertools.combinations(labels, r)]
    else:
        candidates = list(dict.fromkeys(latents))  # the mode is among the samples
    want_action, want_risk, want_conf = _brute(space, latents, candidates)
    res = space.bayes(latents)
    assert res.risk == pytest.approx(want_risk, abs=1e-12)
    assert space.risk(res.action, latents) == pytest.approx(want_risk, abs=1e-12)
    assert space.confidence(latents) == pytest.approx(
        sum(space.agreement(res.action, x) for x in latents) / len(latents), abs=1e-12
    )
    if name == "classes":
        assert res.action == want_action
    # decided in the decide stage's batch form: the same action and risk
    rows = decide_many(space, [([(x, "") for x in latents], {})])[0]
    bayes = next(r for r in rows if r["method"] == "bayes")
    assert bayes["risk"] == pytest.approx(want_risk, abs=1e-12)


def test_two_read_samples_of_twenty_abstain_through_score():
    import pipeline

    rows = [
        {
            "id": "rings",
            "question": "Which planets of the solar system have rings?",
            "responses": ["Saturn, Jupiter"] * 2 + ["##"] * 18,
        }
    ]
    sets = pipeline.score(rows, task="sets").iloc[0]
    assert (sets["n_parsed"], sets["n_no_answer"], sets["n_discarded"]) == (2, 18, 0)
    assert sets["bayes_text"] == "" and sets["abstention"].startswith("abstains")
    assert "18 of 20 samples could not be read" in sets["abstention"]
    # p(saturn) = p(jupiter) = 2/20: risk 2 x 0.1; an unread sample agrees with no answer, the
    # abstention included, and the 2 read ones F1(empty, {saturn, jupiter}) = 0: confidence 0
    assert sets["bayes_risk"] == pytest.approx(0.2) and sets["confidence"] == 0.0
    classes = pipeline.score(rows, task="classes").iloc[0]
    assert classes["bayes_action"] == NO_ANSWER_CLASS and classes["bayes_text"] == ""
    assert classes["bayes_risk"] == pytest.approx(0.1) and classes["confidence"] == 0.0
    # 17 read "Saturn, Jupiter" and 3 unread: the answer, at 17/20
    more = pipeline.score(
        [{**rows[0], "responses": ["Saturn, Jupiter"] * 17 + ["##"] * 3}], task="classes"
    ).iloc[0]
    assert more["bayes_text"] != "" and more["confidence"] == pytest.approx(17 / 20)
    # the paper's rule decides over the 2 read samples: a confident answer
    paper = pipeline.score(rows, task="classes", overrides=["reading.unreadable=discard"]).iloc[0]
    assert paper["bayes_risk"] == 0.0 and paper["n_discarded"] == 18 and paper["abstention"] == ""


def test_a_truncated_sample_is_not_an_answer():
    import pipeline

    rows = [
        {
            "id": "fr",
            "question": "What is the capital of France?",
            "responses": ["Paris", "Paris", "The capital of", "The capital of", "The capital of"],
            "finish_reasons": ["stop", "stop", "length", "length", "length"],
        }
    ]
    got = pipeline.score(rows, task="classes").iloc[0]
    assert (got["n_truncated"], got["n_parsed"], got["n_no_answer"]) == (3, 2, 3)
    assert got["abstention"] and "3 cut by the token limit" in got["abstention"]
    read = pipeline.score(
        rows, task="classes", overrides=["reading.truncated=read", "reading.unreadable=discard"]
    ).iloc[0]
    assert read["n_parsed"] == 5  # the paper's rule reads them


@pytest.mark.parametrize("seed", range(20))
def test_read_confidence_against_brute_force(seed):
    """confidence = sum over read samples of agreement(action, l) / (read + no-answer samples),
    by hand from the space's agreement, for sets and classes."""
    from pipeline.scorer.run import read_confidence

    rng = random.Random(seed)
    for name in ("sets", "classes"):
        space = get_space(name)
        read = [
            frozenset(rng.sample("abc", rng.randint(0, 2))) if name == "sets" else rng.choice("abc")
            for _ in range(rng.randint(0, 6))
        ]
        items = read + [space.no_answer()] * rng.randint(0, 6)
        if not items:
            continue
        action = space.bayes(items).action
        want = sum(space.agreement(action, x) for x in read) / len(items)
        assert read_confidence(space, items, action, read) == pytest.approx(want, abs=1e-12)
