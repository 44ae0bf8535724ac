"""The stats builder against hand-built arrays (pipeline.uncertainty.stats)."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.mapping.embed import Embedder, packaged_minilm_path
from pipeline.mapping.equivalence import EmbeddingEquivalence
from pipeline.uncertainty.stats import (
    PromptArtifacts,
    build_batch_stats,
    prompt_stats,
    token_similarity,
    token_units,
)


@pytest.fixture(scope="module")
def embedder():
    return Embedder("minilm")


def _prompt():
    return PromptArtifacts(
        prompt_id="p",
        question="Who wrote Hamlet?",
        sample_texts=[
            "William Shakespeare",
            "Christopher Marlowe",
            "Shakespeare",
            "William Shakespeare",
        ],
        sample_log_probs=[-0.35, -2.35, -0.45, -0.4],
        sample_log_likelihoods=[
            np.array([-0.2, -0.1, -0.05]),
            np.array([-2.0, -0.3, -0.05]),
            np.array([-0.4, -0.05]),
            np.array([-0.25, -0.1, -0.05]),
        ],
        target_text="William Shakespeare",
        target_log_likelihoods=np.array([-0.18, -0.09, -0.04]),
        logprob_true=-0.7,
    )


def test_plain_keys_and_classes(embedder):
    keys = {
        "greedy_log_likelihoods",
        "sample_log_probs",
        "sample_texts",
        "p_true",
        "semantic_classes_entail",
    }
    eq = EmbeddingEquivalence(embedder)
    per = prompt_stats(_prompt(), keys, eq, embedder)
    stats = build_batch_stats([per, per], keys)
    np.testing.assert_array_equal(stats["greedy_log_likelihoods"][1], [-0.18, -0.09, -0.04])
    assert stats["sample_log_probs"] == [[-0.35, -2.35, -0.45, -0.4]] * 2
    np.testing.assert_array_equal(stats["p_true"], [-0.7, -0.7])
    # Shakespeare / Marlowe: MiniLM at the default threshold gives classes {0, 2, 3} and {1}.
    assert stats["semantic_classes_entail"]["class_to_sample"][1] == [[0, 2, 3], [1]]
    assert stats["semantic_classes_entail"]["sample_to_class"][0] == {0: 0, 1: 1, 2: 0, 3: 0}
    np.testing.assert_array_equal(
        stats["semantic_matrix_classes"][0],
        [[1, 0, 1, 1], [0, 1, 0, 0], [1, 0, 1, 1], [1, 0, 1, 1]],
    )


def test_similarity_keys_match_direct_cosines(embedder):
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(packaged_minilm_path()), device="cpu")
    p = _prompt()
    keys = {
        "sample_sentence_similarity",
        "greedy_sentence_similarity",
        "semantic_matrix_entail",
        "semantic_matrix_contra",
    }
    stats = build_batch_stats(
        [prompt_stats(p, keys, EmbeddingEquivalence(embedder), embedder)], keys
    )
    e = st.encode(p.sample_texts)
    e = e / np.linalg.norm(e, axis=1, keepdims=True)
    assert stats["sample_sentence_similarity"].shape == (1, 4, 4)
    np.testing.assert_allclose(
        stats["sample_sentence_similarity"][0], np.clip(e @ e.T, 0, 1), atol=1e-5
    )
    np.testing.assert_allclose(
        stats["greedy_sentence_similarity"][0], np.clip(e @ e[0], 0, 1), atol=1e-5
    )
    assert (
        stats["semantic_matrix_entail"].shape == stats["semantic_matrix_contra"].shape == (1, 4, 4)
    )


def test_token_units_and_similarity(embedder):
    # Words: token j of T belongs to word floor(j * K / T).
    assert token_units("The capital is Paris.", 5)[1] == [0, 0, 1, 2, 3]
    assert token_units("", 3)[1] == [-1, -1, -1]
    np.testing.assert_array_equal(token_similarity("q", "Paris", 1, embedder), [0.5])  # one token
    np.testing.assert_array_equal(
        token_similarity("q", "", 3, embedder), [0.5, 0.5, 0.5]
    )  # no relevance
    # A tokenizer of the generating model: its tokens are the units, a trailing EOS is special.
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(packaged_minilm_path()))
    ids = tok("paris is big", add_special_tokens=False)["input_ids"]
    _units, owner, special, use_ids = token_units("paris is big", len(ids) + 1, tok)
    assert use_ids and owner == [0, 1, 2, -1] and special == [False, False, False, True]
    sims = token_similarity("q", "paris is big", len(ids) + 1, embedder, tok)
    v = embedder.embed(["q paris is big", "q is big", "q paris big", "q paris is"]).astype(
        np.float64
    )
    np.testing.assert_allclose(sims, [*(v[1:] @ v[0]), 1.0], atol=1e-6)


def test_a_long_question_is_shortened_never_the_text_under_test(embedder):
    """SAR's strings are question + text: with a whole article as the question, the embedder's
    truncation would cut every text away (all similarities 1). The question's head is kept
    instead, as much as fits with the whole text."""
    from pipeline.uncertainty.stats import (
        MIN_PREFIX_WORDS,
        fitting_prefix,
        token_similarity_strings,
    )

    article = " ".join(
        f"The council met on day {i} to discuss the new tram line." for i in range(60)
    )
    text = "The council approved a tram line to the eastern suburbs."
    assert embedder.count_tokens(f"{article} {text}") > embedder.max_tokens == 256
    prefix = fitting_prefix(article, text, embedder)
    assert article.startswith(prefix) and len(prefix.split()) >= MIN_PREFIX_WORDS
    assert embedder.count_tokens(f"{prefix} {text}") <= embedder.max_tokens
    # one more word would not fit: the longest head that does
    nxt = " ".join(article.split()[: len(prefix.split()) + 1])
    assert embedder.count_tokens(f"{nxt} {text}") > embedder.max_tokens
    full, dropped, _, _ = token_similarity_strings(article, text, 10, embedder=embedder)
    assert full == f"{prefix} {text}" and all(d.startswith(prefix + " ") for d in dropped)
    # every dropped-word string differs from the full one inside what the model reads
    sims = token_similarity(article, text, 10, embedder)
    assert np.all(sims < 1.0 - 1e-6)
    assert fitting_prefix("Who wrote Hamlet?", text, embedder) == "Who wrote Hamlet?"
    assert fitting_prefix(article, " ".join(["word"] * 300), embedder) == ""  # nothing fits
