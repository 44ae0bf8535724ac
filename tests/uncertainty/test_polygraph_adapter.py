"""compute_uncertainty against lm-polygraph's estimators called directly on stats built here.

Synthetic artifacts: 3 prompts, M = 5 crafted samples each (one sample of "hamlet" is invalid,
so that prompt has N = 4 and forms its own lm-polygraph batch); the real packaged MiniLM is the
embedder and the equivalence backend. The stats below are written out by hand from the tables
(token -> word owners, class dictionaries), and the similarities come from sentence-transformers
directly, not from pipeline.uncertainty.stats.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pipeline.mapping.embed import Embedder, packaged_minilm_path
from pipeline.mapping.equivalence import EmbeddingEquivalence
from pipeline.uncertainty import compute_uncertainty

QUESTIONS = {
    "france": "What is the capital of France?",
    "hamlet": "Who wrote Hamlet?",
    "ocean": "What is the largest ocean?",
}
# (text, token log-probs); logprob = sum. None marks an invalid sample (no token log-probs).
SAMPLES = {
    "france": [
        ("Paris", [-0.1, -0.05]),
        ("Paris", [-0.2, -0.05]),
        ("Lyon", [-1.5, -0.1]),
        ("The capital is Paris.", [-0.3, -0.2, -0.1, -0.4, -0.05]),
        ("Paris", [-0.15, -0.05]),
    ],
    "hamlet": [
        ("William Shakespeare", [-0.2, -0.1, -0.05]),
        ("Christopher Marlowe", [-2.0, -0.3, -0.05]),
        ("Shakespeare", [-0.4, -0.05]),
        ("William Shakespeare", None),
        ("William Shakespeare", [-0.25, -0.1, -0.05]),
    ],
    "ocean": [
        ("The Pacific Ocean", [-0.5, -0.2, -0.3, -0.05]),
        ("The Atlantic Ocean", [-1.2, -0.9, -0.3, -0.05]),
        ("Pacific", [-0.7, -0.05]),
        ("The Pacific Ocean", [-0.6, -0.2, -0.3, -0.05]),
        ("Indian Ocean", [-2.5, -0.4, -0.05]),
    ],
}
BEAM = {
    "france": ("Paris", [-0.08, -0.04]),
    "hamlet": ("William Shakespeare", [-0.18, -0.09, -0.04]),
    "ocean": ("The Pacific Ocean", [-0.45, -0.2, -0.25, -0.05]),
}
LOGPROB_TRUE = {"france": -0.1, "hamlet": -0.7}  # no P(True) row for "ocean"
# Token -> word owners by the positional rule floor(j * K / T), written out by hand.
OWNERS = {
    ("Paris", 2): [0, 0],
    ("Lyon", 2): [0, 0],
    ("The capital is Paris.", 5): [0, 0, 1, 2, 3],
    ("William Shakespeare", 3): [0, 0, 1],
    ("Christopher Marlowe", 3): [0, 0, 1],
    ("Shakespeare", 2): [0, 0],
    ("The Pacific Ocean", 4): [0, 0, 1, 2],
    ("The Atlantic Ocean", 4): [0, 0, 1, 2],
    ("Pacific", 2): [0, 0],
    ("Indian Ocean", 3): [0, 0, 1],
}


def _frames():
    dataset = pd.DataFrame(
        {
            "prompt_id": list(QUESTIONS),
            "dataset": "toy",
            "question": list(QUESTIONS.values()),
            "answers": [[] for _ in QUESTIONS],
            "probabilities": [[] for _ in QUESTIONS],
            "reference_text": "",
        }
    )
    rows = []
    for pid, samples in SAMPLES.items():
        for i, (text, lps) in enumerate(samples):
            rows.append(
                (pid, i, text, lps if lps is not None else [], sum(lps) if lps else float("nan"))
            )
    samples = pd.DataFrame(
        rows, columns=["prompt_id", "sample_idx", "text", "token_logprobs", "logprob"]
    )
    decodes = pd.DataFrame(
        [(pid, "beam", t, lps, sum(lps)) for pid, (t, lps) in BEAM.items()]
        + [(pid, "greedy", "nonsense", [-9.0], -9.0) for pid in BEAM],  # must be ignored
        columns=["prompt_id", "strategy", "text", "token_logprobs", "logprob"],
    )
    ptrue = pd.DataFrame(
        [(pid, v, math.exp(v)) for pid, v in LOGPROB_TRUE.items()],
        columns=["prompt_id", "logprob_true", "p_true"],
    )
    return samples, decodes, ptrue, dataset


@pytest.fixture(scope="module")
def setup():
    embedder = Embedder("minilm")
    equivalence = EmbeddingEquivalence(embedder)
    samples, decodes, ptrue, dataset = _frames()
    result = compute_uncertainty(samples, decodes, ptrue, dataset, equivalence, embedder)
    return result, equivalence


def _cos(model, a, b):
    e = model.encode([a, b])
    e = e / np.linalg.norm(e, axis=1, keepdims=True)
    return float(e[0] @ e[1])


@pytest.fixture(scope="module")
def direct_stats(setup):
    """Stats for each lm-polygraph batch ({france, ocean} with N = 5, {hamlet} with N = 4)."""
    from sentence_transformers import SentenceTransformer

    _, equivalence = setup
    st = SentenceTransformer(str(packaged_minilm_path()), device="cpu")
    per = {}
    for pid, samples in SAMPLES.items():
        valid = [(t, lps) for t, lps in samples if lps is not None]
        texts = [t for t, _ in valid]
        q = QUESTIONS[pid]
        entail, contra = equivalence.pair_probs(q, texts)
        clusters = equivalence.cluster(q, texts)
        emb = st.encode(texts)
        emb = emb / np.linalg.norm(emb, axis=1, keepdims=True)
        token_sims = []
        for t, lps in valid:
            words = t.split()
            full = f"{q} {' '.join(words)}"
            word_sim = [
                min(1.0, max(0.0, _cos(st, full, f"{q} {' '.join(words[:k] + words[k + 1 :])}")))
                for k in range(len(words))
            ]
            token_sims.append(np.array([word_sim[o] for o in OWNERS[t, len(lps)]]))
        beam_text, beam_lps = BEAM[pid]
        b = st.encode([beam_text])[0]
        per[pid] = {
            "sample_texts": texts,
            "sample_log_probs": [sum(lps) for _, lps in valid],
            "sample_log_likelihoods": [np.array(lps) for _, lps in valid],
            "semantic_matrix_entail": entail,
            "semantic_matrix_contra": contra,
            "clusters": clusters,
            "sample_sentence_similarity": np.clip(emb @ emb.T, 0, 1),
            "greedy_sentence_similarity": np.clip(emb @ (b / np.linalg.norm(b)), 0, 1),
            "sample_token_similarity": token_sims,
            "greedy_log_likelihoods": np.array(beam_lps),
        }
    batches = {}
    for group in (["france", "ocean"], ["hamlet"]):
        stats = {k: [per[p][k] for p in group] for k in per[group[0]] if k != "clusters"}
        for k in (
            "semantic_matrix_entail",
            "semantic_matrix_contra",
            "sample_sentence_similarity",
            "greedy_sentence_similarity",
        ):
            stats[k] = np.stack(stats[k])
        # Class dictionaries in lm-polygraph's layout, written from the cluster lists.
        stats["semantic_classes_entail"] = {
            "sample_to_class": {
                b: dict(enumerate(per[p]["clusters"])) for b, p in enumerate(group)
            },
            "class_to_sample": {
                b: [
                    [i for i, c in enumerate(per[p]["clusters"]) if c == k]
                    for k in range(max(per[p]["clusters"]) + 1)
                ]
                for b, p in enumerate(group)
            },
        }
        stats["p_true"] = np.array([LOGPROB_TRUE.get(p, np.nan) for p in group])
        batches[tuple(group)] = stats
    return batches


def _values(result, estimator):
    sel = result[result["estimator"] == estimator]
    return dict(zip(sel["prompt_id"], sel["value"], strict=True))


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("msp", "MaximumSequenceProbability"),
        ("semantic_entropy", "SemanticEntropy"),
        ("kle", "KernelLanguageEntropy"),
        ("sar", "SAR"),
        ("cocoa_msp", "CocoaMSP"),
    ],
)
def test_adapter_equals_lm_polygraph_on_the_same_stats(setup, direct_stats, name, cls):
    import lm_polygraph.estimators as lpe

    result, _ = setup
    got = _values(result, name)
    assert set(got) == set(SAMPLES)
    est = getattr(lpe, cls)()
    for group, stats in direct_stats.items():
        expected = np.asarray(est(stats), dtype=np.float64)
        for pid, value in zip(group, expected, strict=True):
            assert got[pid] == pytest.approx(value, rel=1e-6, abs=1e-9), (name, pid)


def test_ptrue_and_msp_hand_values(setup, direct_stats):
    import lm_polygraph.estimators as lpe

    result, _ = setup
    ptrue = _values(result, "ptrue")
    assert ptrue == pytest.approx(
        {"france": 0.1, "hamlet": 0.7}
    )  # -log p(True); "ocean" has no row
    direct = lpe.PTrue()({"p_true": np.array([-0.1, -0.7])})
    assert [ptrue["france"], ptrue["hamlet"]] == pytest.approx(list(direct))
    assert _values(result, "msp") == pytest.approx({"france": 0.12, "hamlet": 0.31, "ocean": 0.95})


def test_semantic_entropy_hand_value(setup, direct_stats):
    result, _ = setup
    stats = direct_stats[("hamlet",)]
    lp = np.array(stats["sample_log_probs"][0])
    clusters = np.array(
        [stats["semantic_classes_entail"]["sample_to_class"][0][i] for i in range(4)]
    )
    # Kuhn et al. "mean" estimator: -mean_i log sum_{j in class(i)} p_j
    class_lp = {c: np.log(np.exp(lp[clusters == c]).sum()) for c in set(clusters)}
    expected = -np.mean([class_lp[c] for c in clusters])
    assert _values(result, "semantic_entropy")["hamlet"] == pytest.approx(expected, rel=1e-9)


def test_output_contract_and_skip_counts(setup):
    result, _ = setup
    assert list(result.columns) == ["prompt_id", "estimator", "value"]
    assert list(dict.fromkeys(result["estimator"])) == [
        "msp",
        "semantic_entropy",
        "kle",
        "sar",
        "cocoa_msp",
        "ptrue",
    ]
    assert len(result) == 5 * 3 + 2
    assert np.all(np.isfinite(result["value"]))
    assert result.attrs["skipped"]["invalid_samples"] == 1
    assert result.attrs["skipped"]["ptrue_prompts_without_inputs"] == 1


def test_only_requested_stats_are_built_and_bad_input_is_rejected():
    samples, decodes, ptrue, dataset = _frames()
    embedder = Embedder("minilm")
    # MSP and PTrue need no similarity: no embedder, no equivalence, no model call at all.
    out = compute_uncertainty(
        samples, decodes, ptrue, dataset, None, None, estimators=["msp", "ptrue"]
    )
    assert sorted(set(out["estimator"])) == ["msp", "ptrue"] and len(out) == 5
    with pytest.raises(ValueError, match="unknown estimator"):
        compute_uncertainty(
            samples, decodes, ptrue, dataset, None, embedder, estimators=["entropy"]
        )
    with pytest.raises(ValueError, match="missing column"):
        compute_uncertainty(
            samples.drop(columns=["logprob"]), decodes, ptrue, dataset, None, embedder
        )
    with pytest.raises(ValueError, match="not in the dataset"):
        compute_uncertainty(
            samples, decodes, ptrue, dataset.iloc[:1], None, None, estimators=["msp"]
        )
    with pytest.raises(ValueError, match="needs an equivalence"):
        compute_uncertainty(samples, decodes, ptrue, dataset, None, embedder, estimators=["kle"])


def test_semantic_entropy_without_kle_reads_fewer_pairs_and_gives_the_same_values(setup):
    """Without KLE no estimator needs full NLI matrices: semantic entropy's classes come from
    comparing each answer with the classes' first members (24 -> 18 pairs on these prompts),
    and its values are those of the classes lm-polygraph builds from the full matrices."""
    result, _ = setup
    embedder = Embedder("minilm")
    samples, decodes, ptrue, dataset = _frames()
    judges = {}
    for names in (("semantic_entropy", "kle"), ("semantic_entropy",)):
        judges[names] = EmbeddingEquivalence(embedder)
        alone = compute_uncertainty(
            samples, decodes, ptrue, dataset, judges[names], embedder, estimators=list(names)
        )
        assert _values(alone, "semantic_entropy") == pytest.approx(
            _values(result, "semantic_entropy"), rel=1e-12, abs=1e-12
        )
    assert judges[("semantic_entropy", "kle")].n_pairs_scored == 24  # U (U - 1) per prompt
    assert judges[("semantic_entropy",)].n_pairs_scored == 18


def test_samples_given_as_texts_alone_feed_the_estimators_that_read_texts_alone(setup):
    """Outside generations without token log-probs (the scorer's input): KLE reads the texts
    alone and gets the value it has with log-probs present; those that read log-probs (SE, SAR)
    skip the prompt instead of computing on nothing."""
    _, equivalence = setup
    samples, decodes, ptrue, dataset = _frames()
    embedder = equivalence.embedder if hasattr(equivalence, "embedder") else Embedder("minilm")
    full = compute_uncertainty(
        samples,
        decodes,
        ptrue,
        dataset,
        equivalence,
        embedder,
        estimators=["kle", "semantic_entropy"],
    )
    texts_only = samples.assign(
        token_logprobs=[[] for _ in range(len(samples))], logprob=float("nan")
    )
    bare = compute_uncertainty(
        texts_only,
        decodes.iloc[0:0],
        None,
        dataset,
        equivalence,
        embedder,
        estimators=["kle", "semantic_entropy"],
    )
    kle = lambda df: df[df["estimator"] == "kle"].set_index("prompt_id")["value"]  # noqa: E731
    # the prompts whose samples all had log-probs: the same texts, the same KLE
    whole = [pid for pid, rows in SAMPLES.items() if all(lps is not None for _, lps in rows)]
    pd.testing.assert_series_equal(kle(bare).loc[whole], kle(full).loc[whole])
    assert set(bare["estimator"]) == {"kle"}  # semantic_entropy: no prompt had its inputs
