"""Metrics of decision texts against reference texts: COMET (translation) and AlignScore
(summaries). Each needs a checkpoint; without one the metric is skipped and the log says so."""

from __future__ import annotations

from pipeline.tasks import METRICS, Metric


def _comet(cfg):
    from pipeline.aux_models import text_scorers

    return text_scorers(cfg).get("comet")


def _alignscore(cfg):
    from pipeline.aux_models import text_scorers

    return text_scorers(cfg).get("alignscore")


METRICS.add("comet", Metric("COMET", higher_is_better=True, scorer=_comet,
                            config_key="evaluation.comet_model"))
METRICS.add("alignscore", Metric("AlignScore", higher_is_better=True, scorer=_alignscore,
                                 config_key="evaluation.alignscore_ckpt"))
