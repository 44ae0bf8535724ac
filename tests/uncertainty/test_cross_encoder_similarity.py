"""SAR's and CoCoA's similarities with a cross-encoder equal lm-polygraph 0.7's own calculators
(CrossEncoderSimilarityMatrixCalculator, GreedyCrossEncoderSimilarityMatrixCalculator) on the
same tiny cross-encoder (a real sentence-transformers CrossEncoder built locally: the hub's
stsb-roberta-large cannot be downloaded here)."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.fixture(scope="module")
def cross_encoder(tmp_path_factory):
    spec = importlib.util.spec_from_file_location(
        "build_rehearsal_assets", SCRIPTS / "build_rehearsal_assets.py"
    )
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    out = tmp_path_factory.mktemp("ce")
    return str(builder.build_tiny_nli(out, name="cross_encoder", labels={"LABEL_0": 0}))


class _Model:
    """What lm-polygraph's similarity calculators read of a WhiteboxModel: its device and
    tokenizer (no LLM runs in them)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def device(self):
        return "cpu"


def test_sentence_token_and_greedy_similarities_equal_lm_polygraph(cross_encoder, tiny_chat_model):
    from lm_polygraph.stat_calculators.cross_encoder_similarity import (
        CrossEncoderSimilarityMatrixCalculator,
    )
    from lm_polygraph.stat_calculators.greedy_cross_encoder_similarity import (
        GreedyCrossEncoderSimilarityMatrixCalculator,
    )
    from transformers import AutoTokenizer

    from pipeline.uncertainty.cross_encoder import CrossEncoderSimilarity
    from pipeline.uncertainty.stats import greedy_similarity, sentence_similarity, token_similarity

    tok = AutoTokenizer.from_pretrained(tiny_chat_model)
    question = "Name the oceans"
    texts = ["Atlantic and Pacific", "Indian", "Atlantic and Pacific"]
    tokens = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    model = _Model(tok)
    deps = {
        "sample_texts": [texts],
        "input_texts": [question],
        "sample_tokens": [tokens],
        "greedy_tokens": [tokens[0]],
        "greedy_texts": [texts[0]],
    }
    theirs = CrossEncoderSimilarityMatrixCalculator(cross_encoder_name=cross_encoder)(
        deps, [question], model
    )
    greedy = GreedyCrossEncoderSimilarityMatrixCalculator(cross_encoder_name=cross_encoder)(
        deps, [question], model
    )

    judge = CrossEncoderSimilarity(cross_encoder)
    np.testing.assert_allclose(
        sentence_similarity(texts, judge), theirs["sample_sentence_similarity"][0], atol=1e-6
    )
    np.testing.assert_allclose(
        greedy_similarity(texts[0], texts, judge),
        greedy["greedy_sentence_similarity"][0],
        atol=1e-6,
    )
    for text, ids, expected in zip(texts, tokens, theirs["sample_token_similarity"][0]):
        np.testing.assert_allclose(
            token_similarity(question, text, len(ids), judge, tok), expected, atol=1e-6
        )


def test_paper_configuration_uses_lm_polygraphs_defaults(compose_cfg):
    cfg = compose_cfg("experiment=paper")
    assert cfg.uq.groups.lm_polygraph.similarity == "cross_encoder"
    assert cfg.uq.groups.lm_polygraph.cross_encoder == "cross-encoder/stsb-roberta-large"
    assert cfg.uq.groups.lm_polygraph.nli_with_question is False
    assert cfg.metrics.f1.mean == "geometric"
    assert "bayes_risk_fbeta" in cfg.uq.estimators and "bayes_fbeta" in cfg.evaluation.targets
    graphs = compose_cfg("experiment=paper", "dataset=cnn_dm")
    assert graphs.task.space == "graphs" and graphs.task.space_options.directed is False
