"""The per-prompt table and the headline numbers on hand-made artifacts (no wandb, no model):
clusters with counts written by the task's space, decisions as text, the reference as text."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from pipeline.latent import get_space
from pipeline.stages.decide import decide_all
from pipeline.tasks.contract import describe_reference
from pipeline.tracking.headline import headline, is_baseline_estimator
from pipeline.tracking.prompt_table import prompts_frame


def artifacts(space, per_prompt: dict[str, list[tuple[object, str]]], beam: dict[str, tuple]):
    """dataset/samples/latents/decisions frames of prompts whose samples are (latent, text)."""
    dataset = pd.DataFrame(
        [
            {
                "prompt_id": p,
                "dataset": "d",
                "question": f"q {p}?",
                "answers": [["Pacific", "Pacific Ocean"], ["Atlantic"]],
                "probabilities": [],
                "reference_text": "",
            }
            for p in per_prompt
        ]
    )
    samples, latents, decodes = [], [], []
    for p, items in per_prompt.items():
        for i, (latent, text) in enumerate(items):
            samples.append({"prompt_id": p, "sample_idx": i, "text": text})
            latents.append(
                {
                    "prompt_id": p,
                    "source": "sample",
                    "sample_idx": i,
                    "latent": space.to_json(latent),
                    "parse_ok": latent is not None,
                }
            )
        latent, text = beam[p]
        decodes.append({"prompt_id": p, "strategy": "beam", "text": text})
        latents.append(
            {
                "prompt_id": p,
                "source": "beam",
                "sample_idx": -1,
                "latent": space.to_json(latent),
                "parse_ok": latent is not None,
            }
        )
    samples, latents, decodes = map(pd.DataFrame, (samples, latents, decodes))
    return {
        "dataset": dataset,
        "samples": samples,
        "latents": latents,
        "decisions": decide_all(space, latents, samples, decodes),
    }


def test_sets_table_rows():
    space, s = get_space("sets"), (lambda *xs: frozenset(xs))
    frames = artifacts(
        space,
        {
            "p0": [
                (s("pacific", "atlantic"), "Pacific and Atlantic"),
                (s("pacific"), "Pacific."),
                (s("atlantic", "pacific"), "atlantic, pacific"),
                (None, "???"),
            ],
            "p1": [(s("indian"), "Indian"), (s("indian"), "the Indian")],
        },
        beam={"p0": (s("pacific"), "Pacific"), "p1": (s("indian"), "Indian Ocean")},
    )
    frames["uncertainty"] = pd.DataFrame(
        {
            "prompt_id": ["p0", "p1"] * 2,
            "estimator": ["latent_entropy"] * 2 + ["msp"] * 2,
            "value": [0.6, 0.0, 1.5, 0.2],
        }
    )
    frames["quality"] = pd.DataFrame(
        {
            "prompt_id": ["p0", "p0", "p1"],
            "method": ["bayes", "beam", "bayes"],
            "metric": ["f1"] * 3,
            "value": [1.0, 0.5, 0.0],
            "higher_is_better": [True] * 3,
        }
    )
    table = prompts_frame(space, frames, describe_reference).set_index("prompt_id")
    p0, p1 = table.loc["p0"], table.loc["p1"]
    assert p0["reference"] == "Pacific / Pacific Ocean; Atlantic"
    assert p0["samples"] == "[0] Pacific and Atlantic\n[1] Pacific.\n[2] atlantic, pacific\n[3] ???"
    assert (p0["n_samples"], p0["n_parsed"]) == (4, 3)
    assert p0["latent_clusters"] == "2x Atlantic, Pacific\n1x Pacific"
    assert (p0["bayes"], p0["l_map"], p0["beam"]) == (
        "Atlantic, Pacific",
        "Atlantic, Pacific",
        "Pacific",
    )
    assert p0["bayes_risk"] == pytest.approx(1 / 3) and p0["latent_entropy"] == 0.6
    assert p0["bayes_differs_from_beam"] and not p1["bayes_differs_from_beam"]
    assert p1["latent_clusters"] == "2x Indian"
    assert p0["uncertainty/msp"] == 1.5
    assert p0["quality/f1/beam"] == 0.5 and math.isnan(p1["quality/f1/beam"])
    assert len(prompts_frame(space, frames, describe_reference, max_prompts=1)) == 1


def test_sphere_clusters_are_written_by_the_space():
    """A space without text of its own (an embedding): each cluster is its closest sample."""
    space = get_space("sphere")
    frames = artifacts(
        space,
        {"p0": [([1.0, 0.0], "Hello."), ([1.0, 0.0], "Hello!"), ([0.0, 1.0], "Goodbye.")]},
        beam={"p0": ([0.0, 1.0], "Goodbye.")},
    )
    row = prompts_frame(space, frames, describe_reference).iloc[0]
    assert row["latent_clusters"] == "2x Hello.\n1x Goodbye."
    assert row["bayes"] == "Hello." and row["bayes_differs_from_beam"]


def test_reference_with_probabilities_and_text():
    record = {"answers": [["Paris"], ["Lyon"]], "probabilities": [0.7, 0.3], "reference_text": ""}
    assert describe_reference(record) == "Paris (p=0.70); Lyon (p=0.30)"
    assert (
        describe_reference({"answers": [], "probabilities": [], "reference_text": "The cat sat."})
        == "The cat sat."
    )


def test_headline_numbers():
    scores = pd.DataFrame(
        {
            "estimator": ["bayes_risk", "msp", "semantic_entropy", "latent_entropy", "msp"],
            "target": ["bayes"] * 4 + ["beam"],
            "metric": ["hamming"] * 5,
            "prr": [0.6, 0.2, 0.4, 0.9, 0.99],
        }
    )
    quality = pd.DataFrame(
        {
            "prompt_id": ["a", "b", "a", "b"],
            "method": ["bayes", "bayes", "beam", "beam"],
            "metric": ["hamming"] * 4,
            "value": [0.0, 0.5, 0.5, 1.0],
        }
    )
    out = headline(scores, quality, ["hamming", "f1"], is_baseline_estimator)
    # latent entropy is task-aware (not a baseline); beam-target rows do not count
    assert out == {
        "headline/metric": "hamming",
        "headline/prr_bayes_risk": 0.6,
        "headline/prr_best_baseline": 0.4,
        "headline/best_baseline": "semantic_entropy",
        "headline/quality_bayes": 0.25,
        "headline/quality_beam": 0.75,
    }
    nan_scores = scores.assign(prr=math.nan)
    out = headline(nan_scores, quality, ["hamming"], is_baseline_estimator)
    assert out["headline/best_baseline"] == "" and math.isnan(out["headline/prr_bayes_risk"])
    assert json.dumps(sorted(out))  # stable keys, even when undefined
