"""Sets 2^[K] with the Hamming loss (paper Lemma "HammingBayes"), plus batch forms.

Bayes action {y : p(y) >= 1/2}, Bayes risk sum_y min(p_y, 1 - p_y) (not normalised by K).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np

from pipeline.latent.base import (
    BayesResult,
    LatentBatch,
    LatentSpace,
    LatentTypeError,
    first_min_index,
    first_min_index_rows,
    json_scalar,
    padded_chunks,
    register,
    reject_none,
    sorted_labels,
    validate_batch_weights,
)

# Batch functions process prompts in chunks of about this many incidence cells, so converting a
# bool chunk to float64 stays around 8 MB (cache- and allocator-friendly; big temporaries page-fault).
_CHUNK_CELLS = 1 << 20


def incidence_matrix(
    sets: list[frozenset], labels: list[Hashable] | None = None
) -> tuple[list[Hashable], np.ndarray]:
    """(labels, X) with X[m, k] = labels[k] in sets[m]; labels default to the sorted union."""
    if labels is None:
        union: set[Hashable] = set()
        for s in sets:
            union.update(s)
        labels = sorted_labels(union)
    index = {lab: k for k, lab in enumerate(labels)}
    x = np.zeros((len(sets), len(labels)), dtype=bool)
    for m, s in enumerate(sets):
        if s:
            x[m, [index[lab] for lab in s]] = True
    return labels, x


def _as_incidence(incidence: np.ndarray) -> np.ndarray:
    x = np.asarray(incidence)
    if x.ndim != 3:
        raise ValueError(f"incidence must have shape (prompts, samples, labels), got {x.shape}")
    if x.dtype != bool:
        if not np.all((x == 0) | (x == 1)):
            raise ValueError("incidence must be boolean (or 0/1)")
        x = x.astype(bool)
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"incidence needs at least one prompt and one sample, got shape {x.shape}")
    return x


def _chunks(n_prompts: int, cells_per_prompt: int) -> Iterable[slice]:
    step = max(1, _CHUNK_CELLS // max(1, cells_per_prompt))
    for start in range(0, n_prompts, step):
        yield slice(start, min(n_prompts, start + step))


def _zero_one(w: np.ndarray) -> bool:
    return bool(np.all((w == 0.0) | (w == 1.0)))


def _counted_samples(x: np.ndarray, w: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(incidence with the zero-weight samples' rows cleared, each prompt's number of samples
    as a (P, 1) int array) for 0/1 weights (None: every sample counts)."""
    if w is None:
        return x, np.full((x.shape[0], 1), x.shape[1], dtype=np.int64)
    keep = w > 0
    return x & keep[:, :, None], keep.sum(axis=1, keepdims=True).astype(np.int64)


def sets_bayes_batch(
    incidence: np.ndarray, weights: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Hamming Bayes action and risk for many prompts at once.

    incidence: bool (P, M, K), sample m of prompt p contains label k.  Prompts with fewer samples
    or labels are padded with zero-weight samples / all-False label columns.
    weights: (P, M) non-negative (None = uniform).  Returns (actions bool (P, K), risks (P,)).
    O(P M K).
    """
    x = _as_incidence(incidence)
    n_prompts, n_samples, n_labels = x.shape
    w = validate_batch_weights(weights, n_prompts, n_samples)
    if w is None or _zero_one(w):
        # Unweighted (0/1 weights: padding): integer counts, so the >= 1/2 comparison is exact,
        # and the risks are the weighted path's to the bit (the same integers, one division)
        x, n = _counted_samples(x, w)
        counts = (
            np.count_nonzero(x, axis=1) if n_labels else np.zeros((n_prompts, 0), dtype=np.int64)
        )
        actions = 2 * counts >= n
        risks = np.minimum(counts, n - counts).sum(axis=1) / n[:, 0]
        return actions, risks.astype(np.float64)
    actions = np.empty((n_prompts, n_labels), dtype=bool)
    risks = np.empty(n_prompts, dtype=np.float64)
    for sl in _chunks(n_prompts, n_samples * n_labels):
        wc = w[sl]
        total = wc.sum(axis=1, keepdims=True)
        mass = np.matmul(wc[:, None, :], x[sl].astype(np.float64))[:, 0, :]  # (p, K) raw weight
        actions[sl] = 2 * mass >= total
        # summed before the one division: integer weights (counts, 0/1 padding) stay exact,
        # so padding a prompt with empty labels or zero-weight samples cannot change its risk
        risks[sl] = np.minimum(mass, total - mass).sum(axis=1) / total[:, 0]
    return actions, risks


def sets_pairwise_risks_batch(
    incidence: np.ndarray, weights: np.ndarray | None = None
) -> np.ndarray:
    """Empirical Hamming risk of every sample as the candidate: (P, M); zero-weight (padding)
    samples get +inf so they are never chosen.  O(P M K), no M x M matrix:

        sum_j w_j |s_i ^ s_j| = W |s_i| + sum_j w_j |s_j| - 2 sum_y x_iy m_y,  m_y = sum_j w_j x_jy

    Unweighted, every term is an integer, so the risks (and their ties) are exact, as the
    pairwise sum was.
    """
    x = _as_incidence(incidence)
    n_prompts, n_samples, n_labels = x.shape
    w = validate_batch_weights(weights, n_prompts, n_samples)
    out = np.empty((n_prompts, n_samples), dtype=np.float64)
    zero_one = w is None or _zero_one(w)
    for sl in _chunks(n_prompts, n_samples * max(1, n_labels)):
        if zero_one:  # integers throughout (int matmul), padding (weight 0) never chosen
            xs, n = _counted_samples(x[sl], None if w is None else w[sl])
            xi = xs.astype(np.int64)
            sizes = xi.sum(axis=2)  # (p, M)
            mass = xi.sum(axis=1)  # (p, K): how many samples hold each label
            inner = np.matmul(xi, mass[:, :, None])[:, :, 0]  # (p, M)
            total = n * sizes + sizes.sum(axis=1, keepdims=True) - 2 * inner
            out[sl] = total / n
            if w is not None:
                out[sl][w[sl] <= 0] = np.inf
        else:
            xf = x[sl].astype(np.float64)
            wc = w[sl]
            wsum = wc.sum(axis=1, keepdims=True)
            sizes = xf.sum(axis=2)
            mass = np.matmul(wc[:, None, :], xf)[:, 0, :]  # (p, K)
            inner = np.matmul(xf, mass[:, :, None])[:, :, 0]
            total = wsum * sizes + (wc * sizes).sum(axis=1, keepdims=True) - 2.0 * inner
            out[sl] = total / wsum
            out[sl][wc <= 0] = np.inf
    return out


def sets_sample_mbr_batch(
    incidence: np.ndarray, weights: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """l_Sample for many prompts: (index of the chosen sample (P,), its risk (P,)); ties: first."""
    risks = sets_pairwise_risks_batch(incidence, weights)
    idx = first_min_index_rows(risks)
    return idx, risks[np.arange(risks.shape[0]), idx]


class IncidenceBatch(LatentBatch):
    """Label sets of many prompts as padded incidence chunks: each prompt's labels (sorted, as
    `incidence_matrix` orders them) are its columns, its samples its rows. Labels are coded once
    for the whole cell, so columns, actions and their masks are array lookups."""

    @staticmethod
    def _checked_items(space: LatentSpace, prompts: Sequence[Sequence[Any]]) -> list[list[Any]]:
        if _already_canonical(space, prompts):
            # frozensets where a frozenset is the canonical form: nothing to validate per item
            # (that check and copy cost more than the decision)
            return [p if isinstance(p, list) else list(p) for p in prompts]
        return LatentBatch._checked_items(space, prompts)

    def __init__(self, space: LatentSpace, prompts: Sequence[Sequence[Any]]) -> None:
        super().__init__(space, prompts)
        # the cell's vocabulary, built once: every label coded in one pass
        codes: dict[Hashable, int] = {}
        hit_labels = [
            codes.setdefault(lab, len(codes))
            for items in self.items
            for item in items
            for lab in item
        ]
        set_sizes = [len(item) for items in self.items for item in items]
        self.names = sorted_labels(frozenset(codes))
        self._rank_of = {name: k for k, name in enumerate(self.names)}  # a label's sorted place
        rank = np.empty(len(codes), dtype=np.int64)
        rank[[codes[name] for name in self.names]] = np.arange(len(codes))
        self._n_names = max(1, len(codes))
        counts = np.asarray(set_sizes, dtype=np.int64)
        sample_prompt = np.repeat(np.arange(len(self.items)), self.sizes)
        sample_index = (
            np.concatenate([np.arange(n) for n in self.sizes])
            if len(self.items)
            else np.zeros(0, dtype=np.int64)
        )
        self._hit_prompt = np.repeat(sample_prompt, counts)
        self._hit_sample = np.repeat(sample_index, counts)
        hit_keys = self._hit_prompt * self._n_names + rank[np.asarray(hit_labels, dtype=np.int64)]
        # each prompt's labels, sorted, as one array of keys prompt * names + rank
        self._keys = np.unique(hit_keys)
        self._starts = np.searchsorted(self._keys, np.arange(len(self.items) + 1) * self._n_names)
        self._hit_column = np.searchsorted(self._keys, hit_keys) - self._starts[self._hit_prompt]
        self.widths = np.diff(self._starts)
        self.chunks = padded_chunks(self.widths, self.n_samples)

    def incidence(self, sl: slice, width: int) -> np.ndarray:
        """bool (prompts, n_samples, width) of the prompts in `sl`; padding is False."""
        x = np.zeros((sl.stop - sl.start, self.n_samples, width), dtype=bool)
        lo, hi = np.searchsorted(self._hit_prompt, [sl.start, sl.stop])
        x[self._hit_prompt[lo:hi] - sl.start, self._hit_sample[lo:hi], self._hit_column[lo:hi]] = (
            True
        )
        return x

    def action_masks(self, actions: Sequence[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(prompts with an action, bool (P, widest) of each action's labels among its prompt's
        labels, how many labels each action has beyond them)."""
        known = np.array([a is not None for a in actions], dtype=bool)
        prompt_of, rank_of, beyond = [], [], np.zeros(len(actions), dtype=np.int64)
        for p, action in enumerate(actions):
            if action is None:
                continue
            labels = self.space.canonical(action)
            ranks = [self._rank_of[lab] for lab in labels if lab in self._rank_of]
            prompt_of.extend([p] * len(ranks))
            rank_of.extend(ranks)
            beyond[p] = len(labels) - len(ranks)
        masks = np.zeros((len(actions), max(1, int(self.widths.max(initial=0)))), dtype=bool)
        prompt_arr = np.asarray(prompt_of, dtype=np.int64)
        keys = prompt_arr * self._n_names + np.asarray(rank_of, dtype=np.int64)
        pos = np.searchsorted(self._keys, keys)
        hit = pos < len(self._keys)
        hit[hit] = self._keys[pos[hit]] == keys[hit]
        beyond += np.bincount(prompt_arr[~hit], minlength=len(actions))
        masks[prompt_arr[hit], pos[hit] - self._starts[prompt_arr[hit]]] = True
        return known, masks, beyond

    def to_set(self, p: int, mask: np.ndarray) -> frozenset:
        cols = np.flatnonzero(mask[: self.widths[p]])
        return frozenset(
            self.names[k] for k in (self._keys[self._starts[p] + cols] % self._n_names)
        )


class SetBatch(IncidenceBatch):
    """Hamming sets (and graphs' edge sets) in O(P M K) array code."""

    def bayes(self) -> tuple[list[Any], np.ndarray]:
        actions: list[Any] = []
        risks = np.empty(len(self.items))
        for sl, width in self.chunks:
            chosen, risks[sl] = sets_bayes_batch(self.incidence(sl, width), self.weights(sl))
            actions.extend(self.to_set(p, row) for p, row in zip(range(sl.start, sl.stop), chosen))
        return actions, risks

    def _compute_sample_risks(self) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for sl, width in self.chunks:
            risks = sets_pairwise_risks_batch(self.incidence(sl, width), self.weights(sl))
            out.extend(row[:n] for row, n in zip(risks, self.sizes[sl]))
        return out

    def risk(self, actions: Sequence[Any]) -> np.ndarray:
        """sum_j |s_j ^ a| / n = (n |a| + sum_j |s_j| - 2 sum_y a_y m_y) / n, in integers."""
        known, masks, beyond = self.action_masks(actions)
        out = np.full(len(self.items), np.nan)
        for sl, width in self.chunks:
            mass = self.incidence(sl, width).sum(axis=1, dtype=np.int64)  # (p, K)
            mask, n = masks[sl, :width], self.sizes[sl]
            total = (
                n * (mask.sum(axis=1) + beyond[sl])
                + mass.sum(axis=1)
                - 2 * (mass * mask).sum(axis=1)
            )
            out[sl] = np.where(known[sl], total / n, np.nan)
        return out


def _already_canonical(space: LatentSpace, prompts: Sequence[Sequence[Any]]) -> bool:
    """Every prompt has samples and every sample is a frozenset, in a space whose canonical
    form of a frozenset is itself (sets, F-beta sets; not graphs, which orient edges)."""
    return (
        getattr(type(space), "frozensets_are_canonical", False)
        and all(len(p) for p in prompts)
        and all(type(item) is frozenset for p in prompts for item in p)
    )


def _canonical_set(latent: Any, space: str) -> frozenset:
    reject_none(latent, space)
    if isinstance(latent, (str, bytes, dict)) or not isinstance(latent, Iterable):
        raise LatentTypeError(
            f"{space}: a latent must be a frozenset (or set/list) of labels, got {type(latent).__name__}; "
            "wrap a single label as frozenset({label})"
        )
    try:
        return frozenset(latent)
    except TypeError:
        raise ValueError(f"{space}: set elements must be hashable, got {latent!r}") from None


@register("sets")
class SetSpace(LatentSpace[frozenset]):
    """frozenset of hashable labels; d = Hamming distance |a ^ b| over the union of labels.

    Bayes action {y : p(y) >= 1/2} (labels at exactly 1/2 are included), risk
    sum_y min(p_y, 1 - p_y).  O(M K) with K the size of the label union.
    """

    # a frozenset is its own canonical form (IncidenceBatch skips the per-item check then)
    frozensets_are_canonical = True

    def canonical(self, latent: Any) -> frozenset:
        return _canonical_set(latent, self.name or "sets")

    def distance(self, a: Any, b: Any) -> float:
        return float(len(self.canonical(a) ^ self.canonical(b)))

    def _bayes(self, items: list[frozenset], w: np.ndarray) -> BayesResult:
        labels, x = incidence_matrix(items)
        actions, risks = sets_bayes_batch(x[None], w[None])
        return BayesResult(
            frozenset(lab for lab, keep in zip(labels, actions[0]) if keep), float(risks[0])
        )

    def _risk(self, action: frozenset, items: list[frozenset], w: np.ndarray) -> float:
        sym = np.array([len(action ^ item) for item in items], dtype=np.float64)
        return float(w @ sym / w.sum())

    def sample_mbr(self, latents: Sequence[Any], weights: Any = None) -> BayesResult:
        """l_Sample in O(M K) (`sets_pairwise_risks_batch`), no M x M matrix."""
        items, w = self._prepare(latents, weights)
        _, x = incidence_matrix(items)
        risks = sets_pairwise_risks_batch(x[None], w[None])[0]
        best = first_min_index(risks)
        return BayesResult(items[best], float(risks[best]))

    def _pairwise_distances(self, items: list[frozenset]) -> np.ndarray:
        _, x = incidence_matrix(items)
        xf = x.astype(np.float64)
        sizes = xf.sum(axis=1)
        return sizes[:, None] + sizes[None, :] - 2.0 * (xf @ xf.T)

    def batch(self, prompts: Sequence[Sequence[Any]]) -> SetBatch:
        return SetBatch(self, prompts)

    # A set is written from its own labels ("Atlantic, Pacific"), never as a sample's text: a
    # sample that maps to the set may say more or other things than the set.
    renders_latent = True

    def encode(self, latent: frozenset) -> list:
        return encode_label_set(latent, self.name)

    def decode(self, payload: Any) -> frozenset:
        if not isinstance(payload, list):
            raise ValueError(f"{self.name}: expected a JSON list, got {payload!r:.200}")
        return frozenset(payload)

    def labels(self, latent: Any) -> list[str] | None:
        return None if latent is None else sorted(map(str, latent))

    def max_risk(self, latents: Sequence[Any]) -> float:
        # sum_y min(p, 1 - p) <= |U| / 2 over the union U of the samples' elements
        items = [self.canonical(x) for x in latents]
        return len(frozenset().union(*items)) / 2.0

    def no_answer(self) -> frozenset:
        return frozenset()  # names nothing: the paper's abstention (graphs: no edge)

    def agreement(self, action: Any, latent: Any) -> float:
        # F1 of the answer against a sample (F(empty, empty) = 1): confidence is the answer's
        # expected F1, so an empty answer from samples that each name something is 0, not the
        # agreement that many scattered labels' small p(y) would suggest
        if not action and not latent:
            return 1.0
        return 2.0 * len(action & latent) / (len(action) + len(latent))

    def describe(self, latent: Any, texts: Sequence[str] = ()) -> str:
        """Sorted labels, each in the samples' own spelling where a sample writes it."""
        if latent is None:
            return ""
        return ", ".join(surface_form(str(x), list(texts)) for x in sorted(map(str, latent)))


def encode_label_set(latent: Any, space: str) -> list:
    """A set of labels as a sorted JSON list (strings, dicts and bytes are not sets)."""
    if isinstance(latent, (str, bytes, dict)):
        raise ValueError(f"{space} latent must be a set of labels, got {type(latent).__name__}")
    return [json_scalar(x, f"{space} label") for x in sorted_labels(frozenset(latent))]


@functools.lru_cache(maxsize=8192)
def _surface_pattern(label: str) -> re.Pattern:
    """A label's words with articles and punctuation allowed between them (compiled once: every
    decision of a prompt writes the same labels)."""
    gap = r"(?:[\W_]+(?:(?:the|a|an)[\W_]+)?)"
    return re.compile(
        r"(?<![^\W_])" + gap.join(re.escape(w) for w in label.split()) + r"(?![^\W_])",
        re.IGNORECASE,
    )


def surface_form(label: str, texts: list[str]) -> str:
    """How the samples write a canonical label ("john lennon" -> "John Lennon"); the label itself
    when no sample writes it (canonical labels drop articles and punctuation, so both may sit
    between its words: "people s republic" matches "People's Republic")."""
    if not label.split():
        return label
    pattern = _surface_pattern(label)
    for text in texts:
        m = pattern.search(text[:20_000])
        if m:
            return m.group(0)
    return label
