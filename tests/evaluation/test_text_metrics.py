"""COMET and AlignScore through their real code, on tiny random checkpoints built here.

No hub here, so the paper's checkpoints (Unbabel/wmt22-comet-da, AlignScore-large.ckpt)
cannot run; the tiny stand-ins go through the same public functions and the same library
code (comet.load_from_checkpoint + predict; lm-polygraph's BERTAlignModel + Inferencer).
Their weights are random: the tests check shapes, finiteness, determinism, that scores move
with the input, AlignScore's sentence aggregation against a brute-force recomputation, and the
error messages; never quality.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pipeline.evaluation import text_metrics as tm

SOURCES = [
    "Kissa istui matolla.",
    "Helsinki on Suomen pääkaupunki.",
    "Talvella on kylmä sää.",
    "Koira haukkui kuulle.",
]
HYPOTHESES = [
    "The cat sat on the mat.",
    "Helsinki is the capital.",
    "It is cold in winter.",
    "A dog barked at the moon last night.",
]
REFERENCES = [
    "The cat sat on the mat.",
    "Helsinki is the capital of Finland.",
    "The weather is cold in winter.",
    "The dog barked at the moon.",
]


# ------------------------------------------------------------------------------------- COMET


def test_comet_scores_shape_finite_deterministic(tiny_comet):
    first = tm.comet_scores(SOURCES, HYPOTHESES, REFERENCES, model=tiny_comet, batch_size=2)
    second = tm.comet_scores(SOURCES, HYPOTHESES, REFERENCES, model=tiny_comet, batch_size=2)
    assert len(first) == 4 and all(isinstance(x, float) and math.isfinite(x) for x in first)
    assert first == second
    assert len(set(first)) == 4  # different segments, different scores


def test_comet_scores_follow_their_segment(tiny_comet):
    base = tm.comet_scores(SOURCES, HYPOTHESES, REFERENCES, model=tiny_comet, batch_size=1)
    changed = tm.comet_scores(
        SOURCES, HYPOTHESES[:3] + ["Banana."], REFERENCES, model=tiny_comet, batch_size=1
    )
    assert abs(changed[3] - base[3]) > 1e-4
    assert changed[:3] == pytest.approx(base[:3], abs=1e-6)
    # COMET sorts by length internally; the scores must come back in input order.
    reversed_scores = tm.comet_scores(
        SOURCES[::-1], HYPOTHESES[::-1], REFERENCES[::-1], model=tiny_comet, batch_size=1
    )
    assert reversed_scores[::-1] == pytest.approx(base, abs=1e-6)


def test_comet_folder_and_ckpt_paths_share_one_cached_model(tiny_comet):
    by_folder = tm.load_comet_model(tiny_comet)
    by_file = tm.load_comet_model(str(tiny_comet / "checkpoints" / "model.ckpt"))
    assert by_folder is by_file
    assert tm.comet_scores([], [], [], model=tiny_comet) == []


def test_comet_missing_checkpoint_names_the_config_key(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"metrics\.comet\.model"):
        tm.comet_scores(SOURCES, HYPOTHESES, REFERENCES, model=tmp_path / "nope" / "model.ckpt")
    (tmp_path / "empty_folder").mkdir()
    with pytest.raises(FileNotFoundError, match=r"checkpoints/model\.ckpt.*metrics\.comet\.model"):
        tm.comet_scores(SOURCES, HYPOTHESES, REFERENCES, model=tmp_path / "empty_folder")


def test_comet_hub_name_offline_names_the_config_key(monkeypatch):
    # The hub is unreachable here: the hub path must fail with a clear message, not hang.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match=r"Unbabel/wmt22-comet-da.*metrics\.comet\.model"):
        tm.comet_scores(SOURCES, HYPOTHESES, REFERENCES, model="Unbabel/wmt22-comet-da")


def test_comet_rejects_bad_input(tiny_comet):
    with pytest.raises(ValueError, match="hypotheses has 3 entries"):
        tm.comet_scores(SOURCES, HYPOTHESES[:3], REFERENCES, model=tiny_comet)
    with pytest.raises(TypeError, match="sequence of strings"):
        tm.comet_scores("Kissa", "Cat", "Cat", model=tiny_comet)
    with pytest.raises(TypeError, match=r"references\[1\] is NoneType"):
        tm.comet_scores(SOURCES[:2], HYPOTHESES[:2], ["x", None], model=tiny_comet)


# --------------------------------------------------------------------------------- AlignScore

CONTEXTS = [
    "Paris is the capital of France. It has many museums. The Louvre is one of them.",
    "The team won the final match 2-1 on Sunday. Fans celebrated in the streets.",
    "Scientists found water on the planet.",
]
CLAIMS = [
    "Paris is the capital of France. The Louvre is a museum.",
    "The team lost.",
    "Water was found.",
]


def test_alignscore_shape_range_deterministic(tiny_alignscore):
    ckpt, base = tiny_alignscore
    first = tm.alignscore_scores(CONTEXTS, CLAIMS, ckpt, model=str(base))
    second = tm.alignscore_scores(CONTEXTS, CLAIMS, ckpt, model=str(base))
    assert len(first) == 3 and first == second
    assert all(0.0 <= x <= 1.0 for x in first)  # nli_sp: mean of softmax probabilities
    assert len(set(first)) == 3
    assert tm.alignscore_scores([], [], ckpt, model=str(base)) == []


def test_alignscore_responds_to_the_claim(tiny_alignscore):
    ckpt, base = tiny_alignscore
    base_scores = tm.alignscore_scores(CONTEXTS, CLAIMS, ckpt, model=str(base))
    changed = tm.alignscore_scores(CONTEXTS, CLAIMS[:2] + ["Numbers 0 1 2."], ckpt, model=str(base))
    assert abs(changed[2] - base_scores[2]) > 1e-4
    assert changed[:2] == pytest.approx(base_scores[:2], abs=1e-6)


def _pair_nli(ckpt: Path, base: Path, premise: str, hypo: str) -> float:
    """Entailment probability of one (premise, hypothesis) pair, straight from the port."""
    inferencer = tm.load_alignscore_model(ckpt, model=str(base))
    return float(inferencer.inference([premise], [hypo])[2][0, 0])


def test_alignscore_nli_sp_aggregation_matches_brute_force(tiny_alignscore):
    ckpt, base = tiny_alignscore
    # Short context (< 350 words): AlignScore keeps it as ONE chunk (its sentences re-joined);
    # the claim's two sentences are scored separately and averaged.
    context = "Paris is the capital of France. It has many museums. The Louvre is one of them."
    claim_sentences = ["Paris is the capital of France.", "The Louvre is a museum."]
    expected = sum(_pair_nli(ckpt, base, context, s) for s in claim_sentences) / 2
    got = tm.alignscore_scores(
        [context], [" ".join(claim_sentences)], ckpt, model=str(base), sentence_splitter="offline"
    )
    assert got == pytest.approx([expected], abs=1e-6)

    # Long context (8 sentences, 400 words): 400 // 350 + 1 = 2 chunks of 4 sentences; each
    # claim sentence takes its best chunk, then the mean over claim sentences.
    sentences = [f"Sentence {i} " + " ".join(["word"] * 48) + "." for i in range(8)]
    long_context = " ".join(sentences)
    assert len(long_context.split()) == 400
    chunks = [" ".join(sentences[:4]), " ".join(sentences[4:])]
    expected = sum(max(_pair_nli(ckpt, base, c, s) for c in chunks) for s in claim_sentences) / 2
    got = tm.alignscore_scores(
        [long_context],
        [" ".join(claim_sentences)],
        ckpt,
        model=str(base),
        sentence_splitter="offline",
    )
    assert got == pytest.approx([expected], abs=1e-6)


def test_alignscore_whole_text_mode_is_the_pair_score(tiny_alignscore):
    ckpt, base = tiny_alignscore
    got = tm.alignscore_scores(
        CONTEXTS[:1], CLAIMS[:1], ckpt, model=str(base), evaluation_mode="nli"
    )
    assert got == pytest.approx([_pair_nli(ckpt, base, CONTEXTS[0], CLAIMS[0])], abs=1e-6)


def test_alignscore_empty_texts_are_scored_not_crashed(tiny_alignscore):
    ckpt, base = tiny_alignscore
    scores = tm.alignscore_scores(["", CONTEXTS[0]], ["Paris.", "   "], ckpt, model=str(base))
    assert len(scores) == 2 and all(math.isfinite(x) for x in scores)


def test_offline_sentence_splitter_keeps_abbreviations():
    split, name = tm.make_sentence_splitter("offline")
    assert name == "offline_punkt"
    assert split("Dr. Smith arrived at 5 p.m. on Monday. He left, e.g. by train. Why?") == [
        "Dr. Smith arrived at 5 p.m. on Monday.",
        "He left, e.g. by train.",
        "Why?",
    ]
    with pytest.raises(ValueError, match="sentence_splitter"):
        tm.make_sentence_splitter("spacy")


def test_nltk_splitter_requires_punkt_data():
    import nltk

    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
    except LookupError:
        with pytest.raises(LookupError, match="nltk.downloader punkt_tab"):
            tm.make_sentence_splitter("nltk")
    else:  # the reference data is installed on this machine
        assert tm.make_sentence_splitter("nltk")[1] == "nltk.sent_tokenize"


def test_alignscore_missing_checkpoint_names_the_config_key(tiny_alignscore, tmp_path):
    _, base = tiny_alignscore
    for ckpt in (tmp_path / "AlignScore-large.ckpt", None, ""):
        with pytest.raises(FileNotFoundError, match=r"metrics\.alignscore\.ckpt"):
            tm.alignscore_scores(CONTEXTS, CLAIMS, ckpt, model=str(base))


def test_alignscore_checkpoint_that_does_not_fit_names_the_model_key(tiny_alignscore, tmp_path):
    import torch

    _, base = tiny_alignscore
    wrong = tmp_path / "wrong.ckpt"
    torch.save({"state_dict": {}}, wrong)
    with pytest.raises(ValueError, match=r"weights missing.*metrics\.alignscore\.model"):
        tm.alignscore_scores(CONTEXTS, CLAIMS, wrong, model=str(base))


def test_alignscore_rejects_bad_arguments(tiny_alignscore):
    ckpt, base = tiny_alignscore
    with pytest.raises(ValueError, match="evaluation_mode"):
        tm.alignscore_scores(CONTEXTS, CLAIMS, ckpt, model=str(base), evaluation_mode="smart-n")
    with pytest.raises(ValueError, match="claims has 2 entries"):
        tm.alignscore_scores(CONTEXTS, CLAIMS[:2], ckpt, model=str(base))
    with pytest.raises(ValueError, match=r"metrics\.alignscore\.model"):
        tm.alignscore_scores(CONTEXTS, CLAIMS, ckpt, model="bert-base-uncased")
