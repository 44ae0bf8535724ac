"""NliEquivalence on a tiny randomly initialised DeBERTa-v2 classifier built here.

DeBERTa-large-MNLI cannot be downloaded on this machine (no hub); the real loading code
(AutoTokenizer / AutoModelForSequenceClassification.from_pretrained on a folder) runs on a tiny
random model and a WordLevel tokenizer saved to a temporary folder. Expected values come from a
direct forward pass of the same weights written in this file, not from the code under test.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from pipeline.mapping.equivalence import (
    CONTRA,
    ENTAIL,
    NEUTRAL,
    NliEquivalence,
)

QUESTION = "what is the capital of france"
WORDS = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "what",
    "is",
    "the",
    "capital",
    "of",
    "france",
    "paris",
    "lyon",
    "city",
    "a",
    "an",
    "it",
]
TEXTS = ["paris", "lyon", "city", "it", "a city", "paris city", "lyon city", "it is paris"]
MNLI_LABELS = {"CONTRADICTION": 0, "NEUTRAL": 1, "ENTAILMENT": 2}


def _tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
    )


def _build(folder, label2id=MNLI_LABELS, force_label: str | None = None):
    """Save a tiny DeBERTa-v2 classifier; force_label sets weights so every pair gets that label."""
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification

    torch.manual_seed(0)
    config = DebertaV2Config(
        vocab_size=len(WORDS),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=64,
        type_vocab_size=0,
        pooler_hidden_size=32,
        num_labels=len(label2id),
        label2id=dict(label2id),
        id2label={i: n for n, i in label2id.items()},
        initializer_range=1.0,  # large random weights: labels then vary with the input
    )
    model = DebertaV2ForSequenceClassification(config)
    with torch.no_grad():
        if force_label is not None:
            model.classifier.weight.zero_()
            model.classifier.bias.zero_()
            model.classifier.bias[label2id[force_label]] = 20.0
        else:
            torch.manual_seed(1)
            model.classifier.weight.normal_(0.0, 1.0)
            model.classifier.bias.zero_()
    model.save_pretrained(folder)
    _tokenizer().save_pretrained(folder)
    return str(folder)


def _direct_probs(folder, question, texts):
    """Softmax of the saved model on every ordered pair, by a plain forward pass."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    n = len(texts)
    pairs = list(itertools.product(range(n), range(n)))
    with torch.no_grad():
        enc = tok(
            [question + " " + texts[i] for i, _ in pairs],
            [question + " " + texts[j] for _, j in pairs],
            padding=True,
            return_tensors="pt",
        )
        probs = torch.softmax(model(**enc).logits, -1).numpy()
    return probs.reshape(n, n, -1).astype(np.float64), model.config.label2id


@pytest.fixture(scope="module")
def random_model(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("tiny_deberta"))


@pytest.fixture(scope="module")
def reference(random_model):
    return _direct_probs(random_model, QUESTION, TEXTS)


def _code(p_e, p_n, p_c):
    return [ENTAIL, NEUTRAL, CONTRA][int(np.argmax([p_e, p_n, p_c]))]


def test_pair_probs_shapes_values_and_unique_scoring(random_model, reference):
    probs, label2id = reference
    texts = TEXTS[:3] + [TEXTS[0]]  # a duplicate: scored once
    eq = NliEquivalence(random_model, batch_size=4)
    entail, contra = eq.pair_probs(QUESTION, texts)
    assert entail.shape == contra.shape == (4, 4)
    # 3 unique strings -> 6 ordered off-diagonal pairs, in ceil(6 / 4) = 2 forward passes
    assert eq.n_pairs_scored == 6 and eq.n_model_calls == 2
    idx = [0, 1, 2, 0]
    for a, b in itertools.product(range(4), range(4)):
        if texts[a] == texts[b]:
            assert entail[a, b] == 1.0 and contra[a, b] == 0.0  # a string entails itself
        else:
            ia, ib = idx[a], idx[b]
            assert entail[a, b] == pytest.approx(probs[ia, ib, label2id["ENTAILMENT"]], abs=1e-5)
            assert contra[a, b] == pytest.approx(probs[ia, ib, label2id["CONTRADICTION"]], abs=1e-5)


def test_clusters_match_brute_force_from_direct_decisions(random_model, reference):
    probs, label2id = reference
    e, n, c = label2id["ENTAILMENT"], label2id["NEUTRAL"], label2id["CONTRADICTION"]
    entails = np.array(
        [
            [i == j or _code(*probs[i, j, [e, n, c]]) == ENTAIL for j in range(len(TEXTS))]
            for i in range(len(TEXTS))
        ]
    )
    eq = NliEquivalence(random_model)
    clusters = eq.cluster(QUESTION, TEXTS)
    assert len(clusters) == len(TEXTS)
    # Brute force: check every defining property of first-member greedy clustering.
    first = {}
    for i, cid in enumerate(clusters):
        first.setdefault(cid, i)
    assert list(first) == sorted(first) == list(range(len(first)))  # ids in creation order
    for i, cid in enumerate(clusters):
        f = first[cid]
        if f != i:
            assert entails[f, i] and entails[i, f]
        for earlier, fe in first.items():
            if earlier < cid and fe < i:
                assert not (entails[fe, i] and entails[i, fe]), (i, earlier)


def test_strict_and_non_strict_on_crafted_pairs(random_model, reference):
    probs, label2id = reference
    ids = [label2id["ENTAILMENT"], label2id["NEUTRAL"], label2id["CONTRADICTION"]]
    code = {
        (i, j): _code(*probs[i, j, ids]) for i, j in itertools.permutations(range(len(TEXTS)), 2)
    }

    def find(forward, backward):
        for i, j in itertools.permutations(range(len(TEXTS)), 2):
            if code[i, j] == forward and code[j, i] == backward:
                return [TEXTS[i], TEXTS[j]]
        pytest.fail(f"random model has no pair with labels {forward}/{backward}; change the seed")

    strict, lax = (
        NliEquivalence(random_model, strict=True),
        NliEquivalence(random_model, strict=False),
    )
    one_way = find(ENTAIL, NEUTRAL)  # entailment one way only
    assert strict.cluster(QUESTION, one_way) == [0, 1]
    assert lax.cluster(QUESTION, one_way) == [0, 0]
    both_neutral = find(NEUTRAL, NEUTRAL)
    assert strict.cluster(QUESTION, both_neutral) == [0, 1]
    assert lax.cluster(QUESTION, both_neutral) == [0, 1]
    with_contradiction = find(NEUTRAL, CONTRA)  # neutral one way, contradiction back
    assert strict.cluster(QUESTION, with_contradiction) == [0, 1]
    assert lax.cluster(QUESTION, with_contradiction) == [0, 1]


@pytest.mark.parametrize(
    "label2id",
    [
        MNLI_LABELS,
        {"ENTAILMENT": 0, "NEUTRAL": 1, "CONTRADICTION": 2},
        {"entailment": 1, "contradiction": 0},
    ],
)
def test_label_ids_come_from_config(tmp_path, label2id):
    name = next(k for k in label2id if k.lower() == "entailment")
    folder = _build(tmp_path / "forced", label2id=label2id, force_label=name)
    eq = NliEquivalence(folder)
    entail, contra = eq.pair_probs(QUESTION, ["paris", "lyon", "city"])
    assert np.all(entail > 0.999) and np.all(contra < 1e-6)
    assert eq.cluster(QUESTION, ["paris", "lyon", "city"]) == [0, 0, 0]
    contra_name = next(k for k in label2id if k.lower() == "contradiction")
    folder_c = _build(tmp_path / "forced_c", label2id=label2id, force_label=contra_name)
    eq_c = NliEquivalence(folder_c, strict=False)
    assert eq_c.cluster(QUESTION, ["paris", "lyon", "city"]) == [0, 1, 2]
    assert np.all(eq_c.pair_probs(QUESTION, ["paris", "lyon"])[1][0, 1] > 0.999)


def test_config_without_nli_labels_is_a_clear_error(tmp_path):
    folder = _build(
        tmp_path / "bad", label2id={"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2}, force_label="LABEL_0"
    )
    with pytest.raises(ValueError, match="entailment"):
        NliEquivalence(folder).pair_probs(QUESTION, ["paris", "lyon"])


def test_disk_cache_makes_a_rerun_free(random_model, tmp_path):
    first = NliEquivalence(random_model, cache_dir=tmp_path)
    e1, c1 = first.pair_probs(QUESTION, TEXTS[:4])
    assert first.n_model_calls == 1 and first.n_pairs_scored == 12
    again = NliEquivalence(random_model, cache_dir=tmp_path)  # new process-like instance
    e2, c2 = again.pair_probs(QUESTION, TEXTS[:4])
    assert again.n_model_calls == 0 and again.n_pairs_scored == 0
    np.testing.assert_array_equal(e1, e2)
    np.testing.assert_array_equal(c1, c2)
    assert again.cluster(QUESTION, TEXTS[:4]) == first.cluster(QUESTION, TEXTS[:4])
    # The key holds the question and the pair order: a new question or a new pair is scored.
    again.pair_probs("another question", TEXTS[:2])
    assert again.n_pairs_scored == 2
    again.pair_probs(QUESTION, [TEXTS[0], TEXTS[5]])
    assert again.n_pairs_scored == 4


ARTICLE = " ".join(["the capital of france is a city"] * 30)  # 210 words: over max_length 64


def test_a_long_question_is_cut_never_the_answers(random_model):
    """Truncating `article + answer` from the end (what `truncation=True` does) cuts both
    answers away and leaves two identical inputs; the question prefix is cut instead."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(random_model)
    naive = [
        tok(f"{ARTICLE} {a}", truncation=True, max_length=64)["input_ids"]
        for a in ("paris", "lyon")
    ]
    assert naive[0] == naive[1]  # the failure mode being fixed

    eq = NliEquivalence(random_model, max_length=64)
    premise, hypothesis = eq.pair_texts(ARTICLE, "paris", "lyon")
    assert premise.endswith(" paris") and hypothesis.endswith(" lyon")
    prefix = premise[: -len(" paris")]
    assert hypothesis == prefix + " lyon" and ARTICLE.startswith(prefix)
    assert len(prefix.split()) >= 16  # the head of the article is kept as context
    assert len(tok(premise, hypothesis)["input_ids"]) <= 64
    assert eq.n_prefix_truncated == 1

    # the scores are those of a direct forward pass on exactly these texts
    entail, _ = eq.pair_probs(ARTICLE, ["paris", "lyon"])
    probs, label2id = _direct_probs(random_model, prefix, ["paris", "lyon"])
    assert entail[0, 1] == pytest.approx(probs[0, 1, label2id["ENTAILMENT"]], abs=1e-5)
    assert entail[1, 0] == pytest.approx(probs[1, 0, label2id["ENTAILMENT"]], abs=1e-5)


def test_a_question_that_fits_is_kept_whole(random_model):
    eq = NliEquivalence(random_model, max_length=64)
    assert eq.pair_texts(QUESTION, "paris", "lyon") == (f"{QUESTION} paris", f"{QUESTION} lyon")
    assert eq.n_prefix_truncated == 0


def test_prefetch_scores_many_prompts_in_full_batches(random_model):
    prompts = [(QUESTION, TEXTS[:4]), ("what is it", TEXTS[2:6] + [TEXTS[2]])]
    eq = NliEquivalence(random_model, batch_size=8)
    assert eq.prefetch(prompts) == 4 * 3 + 4 * 3  # unique ordered pairs of both prompts
    assert eq.n_model_calls == 3  # 24 pairs in batches of 8, across the two prompts
    got = [eq.pair_probs(q, t) for q, t in prompts]
    assert eq.n_model_calls == 3  # everything came from the prefetched cache
    fresh = NliEquivalence(random_model, batch_size=8)
    for (q, t), (entail, contra) in zip(prompts, got):
        e2, c2 = fresh.pair_probs(q, t)
        np.testing.assert_allclose(entail, e2, atol=1e-6)
        np.testing.assert_allclose(contra, c2, atol=1e-6)


def _packaged_tokenizers():
    """Tokenizers of three families that ship here: the test's WordLevel with a pair template,
    MiniLM's BERT WordPiece (token types) and SmolLM2's byte-level BPE (DeBERTa-large-MNLI's
    family)."""
    from transformers import AutoTokenizer

    from pipeline.generation.smollm2 import ensure_dense_model
    from pipeline.mapping.embed import packaged_minilm_path

    smollm2 = AutoTokenizer.from_pretrained(str(ensure_dense_model(None)))
    smollm2.pad_token = smollm2.eos_token
    return {
        "wordlevel": _tokenizer(),
        "wordpiece": AutoTokenizer.from_pretrained(str(packaged_minilm_path())),
        "bytelevel_bpe": smollm2,
    }


def test_pairs_built_from_texts_tokenized_once_equal_the_tokenizers_pair_encoding():
    """The model inputs built from each text's own encoding, joined by the pair template, are
    the tokenizer's own pair encoding, padded alike (ids, token types, mask)."""
    pairs = [
        ("what is the capital of france paris", "what is the capital of france lyon city"),
        ("it", "it is paris"),
        ("Capital: Paris, France.", " a city"),
        ("paris", ""),
    ]
    for name, tokenizer in _packaged_tokenizers().items():
        judge = NliEquivalence(model="unused", max_length=512)
        judge._use_tokenizer(tokenizer)
        for batch in (pairs[:-1], pairs):  # an empty text: HF makes no pair, the tokenizer runs
            judge._encodings = {}
            got = judge._batch(batch)
            want = tokenizer(
                [a for a, _ in batch], [b for _, b in batch], padding=True, return_tensors="pt"
            )
            for key in ("input_ids", "attention_mask", "token_type_ids"):
                if key in want:
                    assert torch.equal(got[key], want[key]), (name, key)
            if batch is pairs[:-1]:  # every text encoded once, none twice
                assert set(judge._encodings) == {t for pair in batch for t in pair}, name
        for a, b in pairs:  # the length check is the pair's length, from the same encodings
            assert judge._length(a, b) == len(tokenizer(a, b)["input_ids"]), name


def test_half_precision_scores_near_float32_under_cache_keys_of_its_own(random_model, tmp_path):
    """bfloat16 (what `nli_dtype: auto` picks on a GPU) runs the weights in bfloat16, scores near
    float32, and the pair cache never serves one precision's scores to the other."""
    full = NliEquivalence(random_model, cache_dir=tmp_path)
    e32, c32 = full.pair_probs(QUESTION, TEXTS[:4])
    half = NliEquivalence(random_model, cache_dir=tmp_path, dtype="bfloat16")
    e16, c16 = half.pair_probs(QUESTION, TEXTS[:4])
    assert half._model.dtype == torch.bfloat16 and full._model.dtype == torch.float32
    assert half.n_pairs_scored == 12  # the float32 pairs on disk were not read as bfloat16 ones
    assert not np.array_equal(e16, e32)  # it did run in bfloat16
    np.testing.assert_allclose(e16, e32, atol=0.05)
    np.testing.assert_allclose(c16, c32, atol=0.05)
    again = NliEquivalence(random_model, cache_dir=tmp_path, dtype="bfloat16")
    np.testing.assert_array_equal(again.pair_probs(QUESTION, TEXTS[:4])[0], e16)
    assert again.n_pairs_scored == 0  # ... and the bfloat16 pairs serve bfloat16
    # float32 keys are the model's name alone: caches written before precisions were kept apart
    # stay valid
    assert full.name == random_model and half.name != random_model
    with pytest.raises(ValueError, match="dtype='half'"):
        NliEquivalence(random_model, dtype="half")


def test_the_judge_of_a_config_runs_float32_on_cpu(random_model, tmp_path):
    from pipeline.aux_models.factories import equivalence_judge
    from pipeline.components.parts import SettingError
    from pipeline.mapping.settings import EquivalenceConfig
    from pipeline.runtime.devices import resolve_dtype

    judge = equivalence_judge(
        EquivalenceConfig(backend="nli", nli_model=random_model), "cpu", str(tmp_path)
    )
    assert judge.dtype == "float32" and judge.name == random_model
    assert resolve_dtype("auto", "cpu") == "float32"
    assert resolve_dtype("bfloat16", "cpu") == "bfloat16"  # asked for: kept
    with pytest.raises(SettingError, match="nli_dtype='fp8'"):
        EquivalenceConfig(nli_dtype="fp8")
