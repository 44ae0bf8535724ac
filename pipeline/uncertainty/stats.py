"""Build lm-polygraph statistics from the cached artifacts (no LLM, no lm-polygraph import).

Keys and shapes follow lm-polygraph 0.7.0's stat calculators (docs/notes.md):

| key | per prompt | built from |
|---|---|---|
| greedy_log_likelihoods | (T,) token log-probs of the target decode | decodes (strategy = target, "beam" in the paper) |
| greedy_texts | str | the target decode's text |
| sample_texts | N strings | samples |
| sample_log_probs | N floats | samples.logprob |
| sample_log_likelihoods | N arrays (T_i,) | samples.token_logprobs |
| semantic_matrix_entail / _contra | (N, N) | equivalence.pair_probs(question, texts) |
| semantic_matrix_classes | (N, N) int, 1 = "equivalent" | equivalence.decisions(question, texts) |
| sample_sentence_similarity | (N, N) | the similarity judge, clipped to [0, 1] |
| greedy_sentence_similarity | (N,) | judge(target text, sample i), clipped to [0, 1] |
| sample_token_similarity | N arrays (T_i,) | see token_similarity() |
| p_true | float | ptrue.logprob_true (lm-polygraph's stat is log p(True)) |

The similarity judge is lm-polygraph's cross-encoder (stsb-roberta-large; anything with
`score_pairs`, pipeline.uncertainty.cross_encoder; `uq.groups.lm_polygraph.similarity: cross_encoder`, the paper
configuration) or, offline (no cross-encoder ships on PyPI), the bi-encoder cosine of the
project's embedder clipped to [0, 1] (the cross-encoder's range).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

# The stats that only full pair matrices give (KLE's); semantic classes alone need fewer pairs.
FULL_MATRICES = frozenset(
    {"semantic_matrix_entail", "semantic_matrix_contra", "semantic_matrix_classes"}
)
# A prompt's semantic class labels, clustered against class representatives (uq's own key).
CLASS_LABELS = "semantic_class_labels"

# Entailment id used in semantic_matrix_classes: decisions are written as 1 / 0.
EQUIVALENT_ID = 1


@dataclass
class PromptArtifacts:
    """Everything the estimators need about one prompt (valid samples only)."""

    prompt_id: str
    question: str
    sample_texts: list[str] = field(default_factory=list)
    sample_log_probs: list[float] = field(default_factory=list)
    sample_log_likelihoods: list[np.ndarray] = field(default_factory=list)
    target_text: str | None = None
    target_log_likelihoods: np.ndarray | None = None
    logprob_true: float | None = None
    # samples given as texts only (outside generations without token log-probs): the
    # estimators that read texts alone (KLE) use them, those that read log-probs skip the prompt
    text_only: bool = False

    @property
    def n_samples(self) -> int:
        return len(self.sample_texts)


def _clip01(x: np.ndarray) -> np.ndarray:
    return np.clip(np.asarray(x, dtype=np.float64), 0.0, 1.0)


def token_units(
    text: str, n_tokens: int, tokenizer: object | None = None
) -> tuple[list[str], list[int], list[bool], bool]:
    """Units whose removal measures a token's relevance, and each token's unit.

    Returns (units, token -> unit index (-1: none), token is special, units are token ids). With the generating model's
    ``tokenizer``, units are its tokens when re-encoding ``text`` gives the artifact's token count
    (or one less: the generated EOS, a special token). Otherwise, and without a tokenizer (the
    artifacts do not store token ids), units are whitespace words and token j of T belongs to word
    floor(j * K / T): a positional approximation of the token -> word alignment.
    """
    if tokenizer is not None:
        ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
        if len(ids) in (n_tokens, n_tokens - 1):
            special = set(getattr(tokenizer, "all_special_ids", []) or [])
            units = [str(i) for i in ids]
            owner = list(range(len(ids))) + ([-1] if len(ids) == n_tokens - 1 else [])
            is_special = [i in special for i in ids] + ([True] if len(ids) == n_tokens - 1 else [])
            return units, owner, is_special, True
    words = text.split()
    if not words:
        return [], [-1] * n_tokens, [False] * n_tokens, False
    k = len(words)
    return (
        words,
        [min(k - 1, (j * k) // n_tokens) for j in range(n_tokens)],
        [False] * n_tokens,
        False,
    )


def _joined(units: list[str], tokenizer: object | None, use_ids: bool) -> str:
    if use_ids:
        return tokenizer.decode([int(u) for u in units], skip_special_tokens=True)
    return " ".join(units)


MIN_PREFIX_WORDS = 8  # a question cut to fewer words than this carries no context: dropped


def fitting_prefix(question: str, text: str, embedder: object | None) -> str:
    """The longest head of `question` (whole words) such that `question + " " + text` fits the
    embedder's length, so the text under test is never cut away by its truncation; "" when
    fewer than MIN_PREFIX_WORDS would remain. A CNN/DM "question" is a whole article."""
    if embedder is None or not hasattr(embedder, "count_tokens") or not question:
        return question
    limit = embedder.max_tokens
    if embedder.count_tokens(f"{question} {text}") <= limit:
        return question
    words = question.split()
    lo, hi = 0, len(words)  # largest n with words[:n] + text fitting
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if embedder.count_tokens(" ".join(words[:mid]) + " " + text) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo]) if lo >= MIN_PREFIX_WORDS else ""


def token_similarity_strings(
    question: str,
    text: str,
    n_tokens: int,
    tokenizer: object | None = None,
    embedder: object | None = None,
) -> tuple[str, list[str], list[int], list[bool]]:
    """The full string and the one-unit-dropped strings (lm-polygraph: input + " " + text),
    the input shortened to what fits the embedder with the whole text (`fitting_prefix`)."""
    units, owner, is_special, use_ids = token_units(text, n_tokens, tokenizer)
    joined = _joined(units, tokenizer, use_ids)
    prefix = fitting_prefix(question, joined, embedder)
    lead = f"{prefix} " if prefix else ""
    full = f"{lead}{joined}"
    dropped = [
        f"{lead}{_joined(units[:k] + units[k + 1 :], tokenizer, use_ids)}"
        for k in range(len(units))
    ]
    return full, dropped, owner, is_special


def token_similarity(
    question: str, text: str, n_tokens: int, embedder: object, tokenizer: object | None = None
) -> np.ndarray:
    """Per-token similarity of (question + text) to (question + text without that token's unit).

    As lm-polygraph's CrossEncoderSimilarityMatrixCalculator: a single token gets 0.5, special
    tokens get 1 (no relevance). SAR divides by the summed relevance 1 - sim, so when no token
    has any relevance (e.g. empty text) all tokens get 0.5 (uniform relevance) instead of a NaN.
    """
    if n_tokens <= 1:
        return np.full(n_tokens, 0.5)
    full, dropped, owner, is_special = token_similarity_strings(
        question, text, n_tokens, tokenizer, embedder
    )
    if not dropped:
        return np.full(n_tokens, 0.5)
    if hasattr(embedder, "score_pairs"):  # a cross-encoder: (full, dropped) pairs as lm-polygraph
        unit_sim = _clip01(embedder.score_pairs([(full, d) for d in dropped]))
    else:
        vectors = np.asarray(embedder.embed([full, *dropped]), dtype=np.float64)
        unit_sim = _clip01(vectors[1:] @ vectors[0])
    sims = np.array(
        [1.0 if (sp or o < 0) else unit_sim[o] for o, sp in zip(owner, is_special, strict=True)]
    )
    if np.all(sims >= 1.0):
        return np.full(n_tokens, 0.5)
    return sims


def sentence_similarity(texts: Sequence[str], embedder: object) -> np.ndarray:
    """(N, N) similarity of the bare sample texts, clipped to [0, 1]: a cross-encoder's score of
    every ordered pair of distinct texts (lm-polygraph), or the embedder's cosine."""
    if hasattr(embedder, "score_pairs"):
        unique, inv = np.unique(np.asarray(list(texts), dtype=object), return_inverse=True)
        pairs = [(str(a), str(b)) for a in unique for b in unique]
        scores = embedder.score_pairs(pairs).reshape(len(unique), len(unique))
        return _clip01(scores[inv][:, inv])
    v = np.asarray(embedder.embed(list(texts)), dtype=np.float64)
    return _clip01(v @ v.T)


def greedy_similarity(target_text: str, texts: Sequence[str], embedder: object) -> np.ndarray:
    """(N,) similarity of the target decode to each sample, clipped to [0, 1]: a cross-encoder's
    mean of both pair orders (lm-polygraph's greedy calculator), or the embedder's cosine."""
    if hasattr(embedder, "score_pairs"):
        forward = embedder.score_pairs([(target_text, t) for t in texts])
        backward = embedder.score_pairs([(t, target_text) for t in texts])
        return _clip01((forward + backward) / 2)
    v = np.asarray(embedder.embed([target_text, *texts]), dtype=np.float64)
    return _clip01(v[1:] @ v[0])


def strings_to_embed(
    prompts: Sequence[PromptArtifacts],
    keys: set[str],
    tokenizer: object | None = None,
    embedder: object | None = None,
) -> list[str]:
    """Every string the embedder will see for ``keys``: embedded up front in one batched call."""
    out: list[str] = []
    for p in prompts:
        if keys & {"sample_sentence_similarity", "greedy_sentence_similarity"}:
            out.extend(p.sample_texts)
        if "greedy_sentence_similarity" in keys and p.target_text is not None:
            out.append(p.target_text)
        if "sample_token_similarity" in keys:
            for text, ll in zip(p.sample_texts, p.sample_log_likelihoods, strict=True):
                if len(ll) > 1:
                    full, dropped, _, _ = token_similarity_strings(
                        p.question, text, len(ll), tokenizer, embedder
                    )
                    out.extend([full, *dropped])
    return list(dict.fromkeys(out))


def prompt_stats(
    p: PromptArtifacts,
    keys: set[str],
    equivalence: object | None,
    embedder: object | None,
    tokenizer: object | None = None,
    nli_with_question: bool = True,
) -> dict[str, object]:
    """Per-prompt values of the requested stat keys (batched by build_batch_stats). NLI judges
    question + answer pairs, or the bare answers (`nli_with_question=False`, lm-polygraph's)."""
    premise_context = p.question if nli_with_question else ""
    out: dict[str, object] = {}

    def need(*names: str) -> bool:
        return any(n in keys for n in names)

    if need("greedy_log_likelihoods"):
        out["greedy_log_likelihoods"] = np.asarray(p.target_log_likelihoods, dtype=np.float64)
    if need("greedy_texts"):
        out["greedy_texts"] = p.target_text
    if need("sample_texts"):
        out["sample_texts"] = list(p.sample_texts)
    if need("sample_log_probs"):
        out["sample_log_probs"] = [float(x) for x in p.sample_log_probs]
    if need("sample_log_likelihoods"):
        out["sample_log_likelihoods"] = [
            np.asarray(x, dtype=np.float64) for x in p.sample_log_likelihoods
        ]
    if need("semantic_matrix_entail", "semantic_matrix_contra"):
        _require(equivalence, "equivalence", "semantic matrices")
        entail, contra = equivalence.pair_probs(premise_context, p.sample_texts)
        out["semantic_matrix_entail"], out["semantic_matrix_contra"] = entail, contra
    if need("semantic_classes_entail", "semantic_matrix_classes"):
        _require(equivalence, "equivalence", "semantic classes")
        out["semantic_matrix_classes"] = equivalence.decisions(
            premise_context, p.sample_texts
        ).astype(np.int64)
    if need("sample_sentence_similarity"):
        _require(embedder, "embedder", "sample_sentence_similarity")
        out["sample_sentence_similarity"] = sentence_similarity(p.sample_texts, embedder)
    if need("greedy_sentence_similarity"):
        _require(embedder, "embedder", "greedy_sentence_similarity")
        out["greedy_sentence_similarity"] = greedy_similarity(
            p.target_text, p.sample_texts, embedder
        )
    if need("sample_token_similarity"):
        _require(embedder, "embedder", "sample_token_similarity")
        out["sample_token_similarity"] = [
            token_similarity(p.question, t, len(ll), embedder, tokenizer)
            for t, ll in zip(p.sample_texts, p.sample_log_likelihoods, strict=True)
        ]
    if need("p_true"):
        out["p_true"] = float(p.logprob_true)
    return out


def _require(obj: object | None, what: str, stat: str) -> None:
    if obj is None:
        raise ValueError(f"{stat} needs an {what}; pass one to compute_uncertainty().")


_STACKED = {
    "semantic_matrix_entail",
    "semantic_matrix_contra",
    "semantic_matrix_classes",
    "sample_sentence_similarity",
    "greedy_sentence_similarity",
}


def classes_from_labels(labels: Sequence[Sequence[int]]) -> dict[str, dict]:
    """semantic_classes_entail in lm-polygraph's layout from each prompt's class labels (class
    ids numbered by first member, as its SemanticClassesCalculator numbers them)."""
    return {
        "sample_to_class": {b: dict(enumerate(map(int, lab))) for b, lab in enumerate(labels)},
        "class_to_sample": {
            b: [[i for i, c in enumerate(lab) if c == k] for k in range(max(lab, default=-1) + 1)]
            for b, lab in enumerate(labels)
        },
    }


def build_batch_stats(per_prompt: Sequence[dict[str, object]], keys: set[str]) -> dict[str, object]:
    """Batch per-prompt stats as lm-polygraph expects: matrices stacked to (B, N, N) / (B, N)
    (all prompts of a batch have the same N), everything else as per-prompt lists; p_true as an
    array; semantic_classes_entail from the prompts' class labels (CLASS_LABELS, clustered
    without full matrices) or through lm-polygraph's own SemanticClassesCalculator.
    """
    stats: dict[str, object] = {}
    wanted = set(keys)
    labelled = "semantic_classes_entail" in wanted and all(CLASS_LABELS in s for s in per_prompt)
    if "semantic_classes_entail" in wanted and not labelled:
        wanted |= {"semantic_matrix_classes", "sample_texts"}
    for key in wanted - {"semantic_classes_entail"}:
        values = [s[key] for s in per_prompt]
        if key in _STACKED:
            stats[key] = np.stack(values)
        elif key == "p_true":
            stats[key] = np.asarray(values, dtype=np.float64)
        else:
            stats[key] = values
    if labelled:
        stats["semantic_classes_entail"] = classes_from_labels(
            [s[CLASS_LABELS] for s in per_prompt]
        )
    elif "semantic_classes_entail" in keys:
        from lm_polygraph.stat_calculators.semantic_classes import SemanticClassesCalculator

        deps = {
            "sample_texts": stats["sample_texts"],
            "semantic_matrix_classes": stats["semantic_matrix_classes"],
            "entailment_id": EQUIVALENT_ID,
        }
        stats.update(SemanticClassesCalculator()(deps, texts=None, model=None))
    return stats
