"""The evaluate stage's COMET and AlignScore wiring, run on tiny randomly initialised
checkpoints built locally (the real ones are config values that need the hub)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from pipeline.config import metric_config, register_configs, resolve_cell
from pipeline.evaluation import text_metrics as tm
from pipeline.latent import get_space
from pipeline.stages.evaluate import QualityScoring, quality_rows
from pipeline.tasks.contract import METRICS, MetricContext

ROOT = Path(__file__).resolve().parents[2]
register_configs()


def _cfg(*overrides: str):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose("config", overrides=list(overrides))


def metric_settings(cfg) -> dict:
    """{metric: its typed settings} of the cell (what the evaluate stage hands the metrics)."""
    return dict(resolve_cell(cfg).task.metric_settings)


def _dataset(n: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "prompt_id": [f"p{i}" for i in range(n)],
            "dataset": "x",
            "question": ["Kissa istui matolla.", "Helsinki on Suomen pääkaupunki."][:n],
            "answers": [[]] * n,
            "probabilities": [[]] * n,
            "reference_text": ["The cat sat on the mat.", "Helsinki is the capital of Finland."][
                :n
            ],
        }
    )


def test_comet_scores_every_decision_of_a_sphere_cell(tiny_comet):
    cfg = _cfg("dataset=wmt19_fien_bundled", f"metrics.comet.model={tiny_comet}")
    settings = metric_settings(cfg)
    assert settings["comet"].model == str(tiny_comet)
    unit = [1.0, 0.0, 0.0]
    decisions = pd.DataFrame(
        {
            "prompt_id": ["p0", "p0", "p1", "p1"],
            "method": ["bayes", "beam", "bayes", "beam"],
            "action": [json.dumps(unit)] * 3 + ["null"],
            "risk": [0.1, 0.2, 0.3, np.nan],
            "text": ["A cat sat on a mat.", "The cat sits.", "Helsinki is the capital.", ""],
        }
    )
    latents = pd.DataFrame(
        {
            "prompt_id": ["p0", "p1"],
            "source": "reference",
            "sample_idx": -1,
            "latent": json.dumps([0.0, 1.0, 0.0]),
            "parse_ok": True,
        }
    )
    q = quality_rows(
        _dataset(2),
        decisions,
        latents,
        QualityScoring(
            get_space("sphere"), ["cosine_distance", "comet"], "text", settings=settings
        ),
    )
    comet = q[q["metric"] == "comet"]
    assert comet[["prompt_id", "method"]].values.tolist() == [
        ["p0", "bayes"],
        ["p0", "beam"],
        ["p1", "bayes"],
    ]
    expected = tm.comet_scores(
        sources=["Kissa istui matolla."] * 2 + ["Helsinki on Suomen pääkaupunki."],
        hypotheses=["A cat sat on a mat.", "The cat sits.", "Helsinki is the capital."],
        references=["The cat sat on the mat."] * 2 + ["Helsinki is the capital of Finland."],
        model=str(tiny_comet),
    )
    np.testing.assert_allclose(comet["value"], expected, rtol=1e-6)
    assert comet["higher_is_better"].all()
    assert (q[q["metric"] == "cosine_distance"]["value"] == 1.0).all()  # orthogonal unit vectors


def test_alignscore_scores_every_decision_of_a_graph_cell(tiny_alignscore):
    ckpt, base = tiny_alignscore
    cfg = _cfg(
        "dataset=cnn_dm_bundled",
        f"metrics.alignscore.ckpt={ckpt}",
        f"metrics.alignscore.model={base}",
    )
    settings = metric_settings(cfg)
    assert (settings["alignscore"].ckpt, settings["alignscore"].model) == (str(ckpt), str(base))
    triples = [["cat", "sat on", "mat"]]
    decisions = pd.DataFrame(
        {
            "prompt_id": ["p0", "p0"],
            "method": ["bayes", "beam"],
            "action": [json.dumps(triples), json.dumps([])],
            "risk": [0.5, 1.0],
            "text": ["Cat sat on mat.", ""],
        }
    )
    latents = pd.DataFrame(
        {
            "prompt_id": ["p0"],
            "source": "reference",
            "sample_idx": -1,
            "latent": json.dumps(triples),
            "parse_ok": True,
        }
    )
    q = quality_rows(
        _dataset(1),
        decisions,
        latents,
        QualityScoring(
            get_space("graphs"), ["hamming", "f1", "alignscore"], "text", settings=settings
        ),
    )
    align = q[q["metric"] == "alignscore"].set_index("method")["value"]
    # the generation is the context, the reference summary the claim (lm-polygraph's default)
    expected = tm.alignscore_scores(
        contexts=["Cat sat on mat.", ""],
        claims=["The cat sat on the mat."] * 2,
        ckpt_path=str(ckpt),
        model=str(base),
    )
    np.testing.assert_allclose(align[["bayes", "beam"]], expected, rtol=1e-6)
    ham = q[q["metric"] == "hamming"].set_index("method")["value"]
    assert ham["bayes"] == 0.0 and ham["beam"] == 1.0

    # metrics.alignscore.claim=generation: the summary is the claim, checked against the reference
    flipped = metric_settings(
        _cfg(
            "dataset=cnn_dm_bundled",
            f"metrics.alignscore.ckpt={ckpt}",
            f"metrics.alignscore.model={base}",
            "metrics.alignscore.claim=generation",
        )
    )
    q = quality_rows(
        _dataset(1),
        decisions,
        latents,
        QualityScoring(get_space("graphs"), ["alignscore"], "text", settings=flipped),
    )
    expected = tm.alignscore_scores(
        contexts=["The cat sat on the mat."] * 2,
        claims=["Cat sat on mat.", ""],
        ckpt_path=str(ckpt),
        model=str(base),
    )
    np.testing.assert_allclose(
        q.set_index("method")["value"][["bayes", "beam"]], expected, rtol=1e-6
    )
    assert not np.allclose(expected, align[["bayes", "beam"]])  # the direction matters


def test_without_checkpoints_text_metrics_are_skipped():
    cfg = _cfg("dataset=wmt19_fien_bundled")
    for name in ("comet", "alignscore"):
        assert METRICS[name].scorer(metric_config(cfg, name), MetricContext()) is None
