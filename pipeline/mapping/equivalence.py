"""Semantic equivalence of free-form answers: NLI (DeBERTa-MNLI) or embedding similarity.

Both backends share one interface (docs/design.md s6, s7):

- ``pair_probs(question, texts) -> (entail, contra)``: (N, N) float64 matrices; row i is the
  premise, column j the hypothesis.
- ``decisions(question, texts) -> (N, N) bool``: the relation used for clustering; clustering
  puts i with a cluster's FIRST member f when ``dec[f, i] and dec[i, f]``.
- ``cluster(question, texts) -> list[int]``: greedy clustering against each cluster's first
  member, exactly as lm-polygraph's ``SemanticClassesCalculator`` (cluster ids 0, 1, ... in
  order of creation); ``cluster_many`` does many prompts in rounds of one batched pass and
  scores only the pairs the greedy reads (each answer against the first members it meets, both
  directions: about 2 U K pairs for U distinct answers in K clusters, not U (U - 1)).

Only the unique strings of a call are scored, and every scored ordered pair is cached in memory
and (with ``cache_dir``) in an sqlite file keyed by (model name, question, premise answer,
hypothesis answer), so a rerun makes zero model calls (``n_model_calls`` counts forward passes).
``prefetch([(question, texts), ...])`` scores the missing pairs of many prompts at once, in
length-sorted batches (a GPU is busy with full batches instead of one prompt's few pairs).

NLI inputs are ``question + answer`` on both sides. When that does not fit the model's length,
only the shared question prefix is shortened (its head kept, or dropped when less than
``MIN_PREFIX_TOKENS`` would remain): the answers under test are never cut. A CNN/DM "question"
is a whole article; truncating from the end, as tokenizers do, would cut both answers away and
make every pair "the same article" (entailment both ways).

Deviations from lm-polygraph, on purpose:
- a string compared with itself is not scored: it entails itself (entail 1, contra 0). lm-polygraph
  runs the model on (a, a); a weak model can then split identical answers into two clusters.
- premise/hypothesis are ``question + " " + answer`` (Kuhn et al. 2023) where lm-polygraph's
  semantic matrix uses the bare answers.
- ``EmbeddingEquivalence`` has no neutral class: entail = sigmoid((cos - threshold) / scale),
  contra = 1 - entail, label ENTAIL iff cos >= threshold. Used by KLE this makes the neutral mass
  zero (its graph weight is entail + 0.5 * neutral in lm-polygraph).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pipeline.runtime.devices import HALF_DTYPES
from pipeline.text.normal_forms import to_text

log = logging.getLogger("pipeline")

# Label codes of the label matrices (independent of any model's label ids).
ENTAIL, NEUTRAL, CONTRA = 0, 1, 2

DEFAULT_NLI_MODEL = "microsoft/deberta-large-mnli"
# Chosen from the documented 20-pair check in tests/mapping/test_equivalence_embedding.py
# (MiniLM, "question answer" strings): thresholds in (0.929, 0.945] and (0.947, 0.968] both
# classify 17/20 pairs right; 0.935 sits inside the lower range (docs/notes.md saw ~0.92 on another set): a
# split answer costs less than two different answers merged into one cluster.
DEFAULT_EMBEDDING_THRESHOLD = 0.935
DEFAULT_EMBEDDING_SCALE = 0.02
# A question prefix shorter than this after truncation carries no usable context: dropped.
MIN_PREFIX_TOKENS = 16


class PairCache:
    """On-disk cache of scored ordered pairs: sqlite, one row per pair, atomic transactions.

    Each row carries the digest of its key and value (`_row_digest`); a row that does not
    verify (edited, damaged, or written before digests: no digest) reads as a miss, is scored
    again and overwritten. Such rows are counted in `unverified`; the first batch holding any
    is logged, once per cache."""

    def __init__(self, cache_dir: str | Path) -> None:
        self.path = Path(cache_dir) / "equivalence_pairs.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.unverified = 0  # rows read that did not verify (read as misses)
        try:
            self._open()
        except sqlite3.DatabaseError as exc:  # truncated, zeroed, garbage: a cache heals
            aside = self.path.with_name(f"{self.path.name}.damaged-{int(time.time())}")
            os.replace(self.path, aside)
            log.warning(
                "pair cache %s is damaged (%s): moved to %s, starting a new one (pairs "
                "are scored again)",
                self.path,
                exc,
                aside.name,
            )
            self._open()

    def _open(self) -> None:
        with self._connect() as con:
            con.execute(
                "CREATE TABLE IF NOT EXISTS pairs "
                "(key TEXT PRIMARY KEY, value TEXT NOT NULL, digest BLOB)"
            )
            if con.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("quick_check failed")
            columns = {row[1] for row in con.execute("PRAGMA table_info(pairs)")}
            if "digest" not in columns:  # a cache written before digests: its rows are misses
                try:
                    con.execute("ALTER TABLE pairs ADD COLUMN digest BLOB")
                except sqlite3.OperationalError as exc:  # another process added it first
                    if "duplicate column" not in str(exc):
                        raise

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=60.0)

    @staticmethod
    def _row_digest(key: str, value: str) -> bytes:
        """The first 16 bytes of sha256(key, value): a row edited, damaged or written for
        another key does not match (128 bits: an accident never does; 16 bytes a row, not 64)."""
        return hashlib.sha256(f"{key}\0{value}".encode("utf-8", "surrogatepass")).digest()[:16]

    @staticmethod
    def _values_text(values: Sequence[float]) -> str:
        """The JSON list json.dumps writes, 5x faster: finite floats are written by repr (a
        NaN or inf, whose repr has an n, goes through json.dumps)."""
        floats = [float(x) for x in values]
        text = f"[{', '.join(map(repr, floats))}]"
        return json.dumps(floats) if "n" in text else text

    @staticmethod
    def _row_values(text: str) -> list[float] | None:
        """One row's values, or None when they are not a JSON list of numbers."""
        try:
            value = json.loads(text)
        except ValueError:
            return None
        ok = isinstance(value, list) and all(isinstance(x, int | float) for x in value)
        return value if ok else None

    @staticmethod
    def key(model: str, question: str, premise: str, hypothesis: str) -> str:
        """Hash of the JSON list [model, question, premise answer, hypothesis answer]."""
        raw = json.dumps([model, question, premise, hypothesis], ensure_ascii=False)
        return hashlib.sha256(raw.encode("utf-8")).hexdigest()

    def get_many(self, keys: Sequence[str]) -> dict[str, list[float]]:
        found: dict[str, list[float]] = {}
        unverified = 0
        with self._lock, self._connect() as con:
            for start in range(0, len(keys), 500):  # stay under sqlite's bound-variable limit
                chunk = list(keys[start : start + 500])
                marks = ",".join("?" * len(chunk))
                verified_keys, verified_values = [], []
                for k, v, d in con.execute(
                    f"SELECT key, value, digest FROM pairs WHERE key IN ({marks})", chunk
                ):
                    # an unverified row is a miss: scored again and overwritten
                    if isinstance(v, str) and d == self._row_digest(k, v):
                        verified_keys.append(k)
                        verified_values.append(v)
                    else:
                        unverified += 1
                # what put_many wrote: JSON lists of floats, parsed in one call (a row at a time
                # was most of a read's cost); anything else a row at a time, as a miss
                try:
                    values = json.loads(f"[{','.join(verified_values)}]")
                except ValueError:
                    values = []
                if len(values) != len(verified_keys):
                    values = [self._row_values(v) for v in verified_values]
                for k, value in zip(verified_keys, values, strict=True):
                    if isinstance(value, list):
                        found[k] = value
                    else:
                        unverified += 1
        if unverified:
            self._unverified(unverified)
        return found

    def _unverified(self, n: int) -> None:
        first = self.unverified == 0
        self.unverified += n
        if first:  # once per cache: a cache from before digests would log every batch
            log.warning(
                "%d pair cache rows in %s did not verify (edited, damaged, or written "
                "before row digests): read as misses and scored again; later ones are "
                "counted in the cache's `unverified`, not logged",
                n,
                self.path,
            )

    def put_many(self, items: dict[str, list[float]]) -> None:
        if not items:
            return
        rows = []
        for k, v in items.items():
            text = self._values_text(v)
            rows.append((k, text, self._row_digest(k, text)))
        with self._lock, self._connect() as con:  # one transaction: all rows or none
            con.executemany(
                "INSERT OR REPLACE INTO pairs (key, value, digest) VALUES (?, ?, ?)", rows
            )


def greedy_first_member_clusters(dec: np.ndarray) -> list[int]:
    """lm-polygraph's greedy classes: i joins the first cluster c with dec[f_c, i] & dec[i, f_c]."""
    n = dec.shape[0]
    firsts: list[int] = []
    labels: list[int] = []
    for i in range(n):
        for cid, f in enumerate(firsts):
            if dec[f, i] and dec[i, f]:
                labels.append(cid)
                break
        else:
            labels.append(len(firsts))
            firsts.append(i)
    return labels


def decisions_from_labels(labels: np.ndarray, strict: bool) -> np.ndarray:
    """Pair decisions from an (N, N) label matrix (ENTAIL / NEUTRAL / CONTRA codes).

    strict: dec[i, j] = (i entails j); clustering then needs entailment both ways.
    non-strict (Kuhn et al.'s code, lm-polygraph's option): equivalent when neither direction is a
    contradiction and not both are neutral; symmetric.
    """
    if strict:
        return labels == ENTAIL
    lt = labels.T
    return (labels != CONTRA) & (lt != CONTRA) & ~((labels == NEUTRAL) & (lt == NEUTRAL))


class Equivalence:
    """Shared machinery: unique strings, pair cache, matrices, clustering."""

    #: number of values stored per scored pair (backend specific)
    n_values: int = 1

    #: scored pairs kept in memory (~300 bytes each); the oldest go first past it (a paper-scale
    #: cell scores millions). Trimmed only between operations, never under one's reads.
    memory_pairs: int = 2_000_000

    def __init__(self, strict: bool = True, cache_dir: str | Path | None = None) -> None:
        self.strict = bool(strict)
        self._disk = PairCache(cache_dir) if cache_dir is not None else None
        self._memory: dict[str, list[float]] = {}
        self.n_model_calls = 0  # forward passes of the underlying model
        self.n_pairs_scored = 0  # ordered pairs sent to the model (cache misses)

    @property
    def name(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def _score(self, question: str, pairs: list[tuple[str, str]]) -> np.ndarray:
        """Model values for ordered (premise answer, hypothesis answer) pairs -> (P, n_values)."""
        raise NotImplementedError  # pragma: no cover

    def _score_triples(self, triples: list[tuple[str, str, str]]) -> np.ndarray:
        """Values of (question, premise answer, hypothesis answer) triples of any questions."""
        out = np.zeros((len(triples), self.n_values), dtype=np.float64)
        by_question: dict[str, list[int]] = {}
        for i, (q, _, _) in enumerate(triples):
            by_question.setdefault(q, []).append(i)
        for q, rows in by_question.items():
            out[rows] = np.asarray(
                self._score(q, [triples[i][1:] for i in rows]), dtype=np.float64
            ).reshape(len(rows), self.n_values)
        return out

    def _trim(self) -> None:
        """Forget the oldest scored pairs beyond `memory_pairs` (the disk cache keeps them)."""
        excess = len(self._memory) - self.memory_pairs
        if excess > 0:
            for key in list(itertools.islice(self._memory, excess)):
                del self._memory[key]

    def _missing(self, question: str, unique: list[str]) -> list[tuple[str, tuple[str, str, str]]]:
        """(cache key, triple) of every off-diagonal ordered pair not in memory (disk consulted)."""
        self._trim()
        triples = [(question, a, b) for a in unique for b in unique if a != b]
        keys = [PairCache.key(self.name, *t) for t in triples]
        missing_keys = [k for k in keys if k not in self._memory]
        if missing_keys and self._disk is not None:
            self._memory.update(self._disk.get_many(missing_keys))
        return [(k, t) for k, t in zip(keys, triples, strict=True) if k not in self._memory]

    def _score_and_store(self, todo: list[tuple[str, tuple[str, str, str]]]) -> None:
        if not todo:
            return
        scored = np.asarray(self._score_triples([t for _, t in todo]), dtype=np.float64)
        scored = scored.reshape(len(todo), self.n_values)
        self.n_pairs_scored += len(todo)
        new = {k: row.tolist() for (k, _), row in zip(todo, scored, strict=True)}
        self._memory.update(new)
        if self._disk is not None:
            self._disk.put_many(new)

    def prefetch(self, items: Sequence[tuple[object, Sequence[object]]]) -> int:
        """Score every missing pair of many (question, texts) prompts in one batched pass;
        later per-prompt calls hit the cache. Returns the number of pairs scored."""
        todo: dict[str, tuple[str, str, str]] = {}
        for question, texts in items:
            unique = list(dict.fromkeys(to_text(t) for t in texts))
            todo.update(self._missing(to_text(question), unique))
        before = self.n_pairs_scored
        self._score_and_store(list(todo.items()))
        return self.n_pairs_scored - before

    def _matrices(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(U, U, n_values) pair values -> entail probs, contra probs, label codes (U, U)."""
        raise NotImplementedError  # pragma: no cover

    def _unique_values(self, question: str, unique: list[str]) -> np.ndarray:
        """(U, U, n_values) values for all ordered off-diagonal pairs, from cache or model."""
        u = len(unique)
        values = np.zeros((u, u, self.n_values), dtype=np.float64)
        self._score_and_store(self._missing(question, unique))
        for i in range(u):
            for j in range(u):
                if i != j:
                    values[i, j] = self._memory[
                        PairCache.key(self.name, question, unique[i], unique[j])
                    ]
        return values

    def _expanded(self, question: object, texts: Sequence[object]) -> tuple[np.ndarray, ...]:
        if isinstance(texts, str | bytes):
            raise TypeError("texts must be a sequence of answers, not a single string.")
        question_s = to_text(question)
        strings = [to_text(t) for t in texts]
        unique = list(dict.fromkeys(strings))
        index = {s: i for i, s in enumerate(unique)}
        inv = np.array([index[s] for s in strings], dtype=np.int64)
        entail, contra, labels = self._matrices(self._unique_values(question_s, unique))
        # A string and itself: entails, never contradicts (not scored, see module docstring).
        np.fill_diagonal(entail, 1.0)
        np.fill_diagonal(contra, 0.0)
        np.fill_diagonal(labels, ENTAIL)
        grid = np.ix_(inv, inv)
        return entail[grid], contra[grid], labels[grid]

    def pair_probs(
        self, question: object, texts: Sequence[object]
    ) -> tuple[np.ndarray, np.ndarray]:
        """(entail, contra) probability matrices (N, N); [i, j] = premise i, hypothesis j."""
        entail, contra, _ = self._expanded(question, texts)
        return entail, contra

    def labels(self, question: object, texts: Sequence[object]) -> np.ndarray:
        """(N, N) label codes ENTAIL / NEUTRAL / CONTRA (argmax decision per ordered pair)."""
        return self._expanded(question, texts)[2]

    def decisions(self, question: object, texts: Sequence[object]) -> np.ndarray:
        """(N, N) bool relation; clustering needs it in both directions (see decisions_from_labels)."""
        return decisions_from_labels(self.labels(question, texts), self.strict)

    def cluster(self, question: object, texts: Sequence[object]) -> list[int]:
        """Greedy clusters against each cluster's first member (lm-polygraph's semantic classes),
        scoring only the pairs the greedy reads (`cluster_many`)."""
        if isinstance(texts, str | bytes):
            raise TypeError("texts must be a sequence of answers, not a single string.")
        return self.cluster_many([(question, texts)])[0]

    def _equivalent(self, question: str, a: str, b: str) -> bool:
        """Whether a cached pair (both directions scored) puts a and b in one cluster."""
        values = np.zeros((2, 2, self.n_values), dtype=np.float64)
        values[0, 1] = self._memory[PairCache.key(self.name, question, a, b)]
        values[1, 0] = self._memory[PairCache.key(self.name, question, b, a)]
        labels = self._matrices(values)[2]
        np.fill_diagonal(labels, ENTAIL)
        dec = decisions_from_labels(labels, self.strict)
        return bool(dec[0, 1] and dec[1, 0])

    def cluster_many(self, items: Sequence[tuple[object, Sequence[object]]]) -> list[list[int]]:
        """`greedy_first_member_clusters` of many prompts, equal to it on the full decision
        matrices but scoring only what it reads: each distinct answer against the first members
        it is compared with, in order, until one is equivalent (both directions). The prompts
        advance together in rounds (one batched scoring pass per round: every pending answer
        against the first members it has not met yet); an answer matching none becomes the next
        first member. Rounds = the largest number of clusters of a prompt; pairs scored about
        2 U K instead of U (U - 1) for U distinct answers in K clusters."""
        prompts = []
        for question, texts in items:
            q = to_text(question)
            strings = [to_text(t) for t in texts]
            unique = list(dict.fromkeys(strings))
            index = {x: i for i, x in enumerate(unique)}
            prompts.append(
                {
                    "q": q,
                    "unique": unique,
                    "inv": [index[x] for x in strings],
                    "label": [0] + [-1] * (len(unique) - 1) if unique else [],
                    "firsts": [0] if unique else [],
                    "met": [1] * len(unique),
                }
            )
        while True:
            self._trim()  # between rounds: a round reads only pairs it scored or found
            todo: dict[str, tuple[str, str, str]] = {}
            for p in prompts:
                u, q = p["unique"], p["q"]
                for i, lab in enumerate(p["label"]):
                    if lab < 0:
                        for f in p["firsts"][p["met"][i] - 1 :]:
                            for a, b in ((u[f], u[i]), (u[i], u[f])):
                                key = PairCache.key(self.name, q, a, b)
                                if key not in self._memory:
                                    todo[key] = (q, a, b)
            if todo and self._disk is not None:
                self._memory.update(self._disk.get_many(list(todo)))
            self._score_and_store([(k, t) for k, t in todo.items() if k not in self._memory])
            pending = False
            for p in prompts:
                u, q, firsts, label = p["unique"], p["q"], p["firsts"], p["label"]
                for i, lab in enumerate(label):
                    if lab >= 0:
                        continue
                    for cid in range(p["met"][i] - 1, len(firsts)):
                        if self._equivalent(q, u[firsts[cid]], u[i]):
                            label[i] = cid
                            break
                    p["met"][i] = len(firsts) + 1
                waiting = [i for i, lab in enumerate(label) if lab < 0]
                if waiting:  # the lowest one met every first member before it: a new cluster
                    label[waiting[0]] = len(firsts)
                    firsts.append(waiting[0])
                    pending = pending or len(waiting) > 1
            if not pending:
                break
        return [[p["label"][i] for i in p["inv"]] for p in prompts]


def _find_label_id(label2id: dict[str, int], prefix: str) -> int | None:
    hits = [i for name, i in label2id.items() if str(name).lower().startswith(prefix)]
    return int(hits[0]) if len(hits) == 1 else None


NLI_DTYPES = ("float32", *HALF_DTYPES)


class NliEquivalence(Equivalence):
    """NLI backend: a sequence classifier (DeBERTa-large-MNLI in the paper configuration).

    Args:
        model: hub id or local folder loadable by ``AutoModelForSequenceClassification``.
        strict: bidirectional entailment (default, as lm-polygraph) or Kuhn et al.'s non-strict rule.
        batch_size: pairs per forward pass.
        device: torch device.
        cache_dir: folder of the on-disk pair cache (None: in-memory only).
        max_length: tokenizer truncation length.
        dtype: the weights' precision (float32, bfloat16, float16; `devices.resolve_dtype`
            picks one for a device). The pair cache keys it (`name`).
        revision: hub revision (branch, tag or commit) of a hub model; None: its latest commit.
            The pair cache keys a pinned one (`name`).
    """

    n_values = 3  # probabilities (entail, neutral, contra)

    def __init__(
        self,
        model: str = DEFAULT_NLI_MODEL,
        strict: bool = True,
        batch_size: int = 16,
        device: str = "cpu",
        cache_dir: str | Path | None = None,
        max_length: int = 512,
        dtype: str = "float32",
        revision: str | None = None,
    ) -> None:
        super().__init__(strict=strict, cache_dir=cache_dir)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
        if dtype not in NLI_DTYPES:
            raise ValueError(f"dtype={dtype!r}: choose one of {', '.join(NLI_DTYPES)}")
        self.dtype = dtype
        self.model_ref = str(model)
        self.revision = revision
        self.batch_size = int(batch_size)
        self.device = device
        self.max_length = int(max_length)
        self._model = None
        self._tokenizer = None
        self.entail_id: int | None = None
        self.neutral_id: int | None = None
        self.contra_id: int | None = None
        self._backend = None  # the fast tokenizer's own tokenizer, without padding/truncation
        self._pair_specials = 0
        self._encodings: dict | None = None  # text -> encoding, during one scoring call
        self.n_prefix_truncated = 0  # pairs whose question prefix was shortened or dropped
        self.n_answers_truncated = 0  # pairs whose answers alone exceeded max_length

    @property
    def name(self) -> str:
        """The judge in pair-cache keys: the model (@ a pinned revision), and its precision
        unless float32 (so float32 scores at the latest commit keep the keys written before
        precisions and revisions were kept apart)."""
        ref = self.model_ref if self.revision is None else f"{self.model_ref}@{self.revision}"
        return ref if self.dtype == "float32" else f"{ref} [{self.dtype}]"

    def revision_entry(self) -> dict:
        """The checkpoint for the manifests: the hub commit loaded (before a load, the one the
        cache or the hub resolves; all pairs cached: none is loaded), or the local folder."""
        from pipeline.runtime.revisions import checkpoint_entry, loaded_commit

        loaded = loaded_commit(self._model) if self._model is not None else None
        return checkpoint_entry(self.model_ref, self.revision, loaded=loaded)

    def _load(self) -> None:
        if self._model is not None:
            return
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        pinned = {} if self.revision is None else {"revision": self.revision}
        self._tokenizer = AutoTokenizer.from_pretrained(self.model_ref, **pinned)
        import torch

        model = AutoModelForSequenceClassification.from_pretrained(
            self.model_ref, dtype=getattr(torch, self.dtype), **pinned
        )
        self.max_length = min(
            self.max_length,
            int(self._tokenizer.model_max_length),
            int(getattr(model.config, "max_position_embeddings", self.max_length)),
        )
        label2id = dict(model.config.label2id)
        self.entail_id = _find_label_id(label2id, "entail")
        self.contra_id = _find_label_id(label2id, "contra")
        self.neutral_id = _find_label_id(label2id, "neutral")
        if self.entail_id is None or self.contra_id is None:
            raise ValueError(
                f"NLI model {self.model_ref!r} must name its labels in config.label2id with one "
                f"'entailment' and one 'contradiction' label; it has {label2id}. "
                "Use an MNLI-style classifier or fix its config.json label2id."
            )
        self._model = model.to(self.device).eval()
        self._use_tokenizer(self._tokenizer)

    def _use_tokenizer(self, tokenizer) -> None:
        """Tokenize through `tokenizer`; a fast one's own tokenizer encodes each text once."""
        self._tokenizer, self._backend, self._pair_specials = tokenizer, None, 0
        if tokenizer.is_fast:
            from tokenizers import Tokenizer

            # a copy: the tokenizer's own calls switch padding and truncation on and off
            self._backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
            self._backend.no_padding()
            self._backend.no_truncation()
            self._pair_specials = self._backend.num_special_tokens_to_add(is_pair=True)

    def _score(self, question: str, pairs: list[tuple[str, str]]) -> np.ndarray:
        return self._score_triples([(question, a, b) for a, b in pairs])

    def _prefix(self, question: str, keep: int) -> str:
        """The question cut after its first `keep` tokens (character offsets of a fast
        tokenizer; decoded ids otherwise)."""
        if keep <= 0:
            return ""
        enc = self._tokenizer(
            question, add_special_tokens=False, return_offsets_mapping=self._tokenizer.is_fast
        )
        if keep >= len(enc["input_ids"]):
            return question
        if self._tokenizer.is_fast:
            return question[: enc["offset_mapping"][keep - 1][1]]
        return self._tokenizer.decode(enc["input_ids"][:keep])

    def _length(self, a: str, b: str) -> int:
        """Tokens of the pair (a, b) with its special tokens. A fast tokenizer encodes the two
        texts of a pair separately, so each text is tokenized once (`_encodings`) and a pair's
        length is a sum; a slow one encodes the pair."""
        if self._encodings is None or not a or not b:  # an empty text makes no pair for HF
            return len(self._tokenizer(a, b, truncation=False)["input_ids"])
        return len(self._encoded(a).ids) + len(self._encoded(b).ids) + self._pair_specials

    def _encoded(self, text: str):
        found = self._encodings.get(text)
        if found is None:
            found = self._encodings[text] = self._backend.encode(text, add_special_tokens=False)
        return found

    def pair_texts(self, question: str, premise: str, hypothesis: str) -> tuple[str, str]:
        """The texts of one ordered pair: `question + answer` on both sides, the question cut
        (its head kept) or dropped so that both answers fit `max_length` whole."""
        self._load()
        tok = self._tokenizer
        length = self._length

        full = (
            (f"{question} {premise}", f"{question} {hypothesis}")
            if question
            else (premise, hypothesis)
        )
        if not question or length(*full) <= self.max_length:
            return full
        q_len = len(tok(question, add_special_tokens=False)["input_ids"])
        answers = length(premise, hypothesis)
        keep = min(q_len, (self.max_length - answers) // 2)
        while keep >= MIN_PREFIX_TOKENS:
            prefix = self._prefix(question, keep)
            texts = (f"{prefix} {premise}", f"{prefix} {hypothesis}")
            if length(*texts) <= self.max_length:
                self.n_prefix_truncated += 1
                return texts
            keep -= 4  # token boundaries moved by the cut: shorten a little more
        self.n_prefix_truncated += 1
        if answers > self.max_length:  # the answers alone do not fit: the tokenizer cuts them
            self.n_answers_truncated += 1
        return premise, hypothesis

    def _batch(self, pairs: list[tuple[str, str]]) -> dict:
        """Model inputs of a batch of pairs. From the texts' own encodings (each text tokenized
        once per scoring call) joined by the tokenizer's pair template; a pair over `max_length`
        (its answers alone too long) and slow tokenizers go through the tokenizer, truncating."""
        import torch

        if self._encodings is None or any(
            not a or not b or self._length(a, b) > self.max_length for a, b in pairs
        ):
            return self._tokenizer(
                [a for a, _ in pairs],
                [b for _, b in pairs],
                padding=True,
                truncation="longest_first",
                max_length=self.max_length,
                return_tensors="pt",
            )
        joined = [
            self._backend.post_process(self._encoded(a), self._encoded(b), add_special_tokens=True)
            for a, b in pairs
        ]
        width = max(len(e.ids) for e in joined)
        pad = self._tokenizer.pad_token_id or 0
        left = self._tokenizer.padding_side == "left"
        batch = {
            "input_ids": torch.full((len(joined), width), pad, dtype=torch.long),
            "attention_mask": torch.zeros((len(joined), width), dtype=torch.long),
        }
        with_types = "token_type_ids" in self._tokenizer.model_input_names
        if with_types:
            batch["token_type_ids"] = torch.zeros((len(joined), width), dtype=torch.long)
        for row, e in enumerate(joined):
            cols = slice(width - len(e.ids), width) if left else slice(0, len(e.ids))
            batch["input_ids"][row, cols] = torch.tensor(e.ids, dtype=torch.long)
            batch["attention_mask"][row, cols] = 1
            if with_types:
                batch["token_type_ids"][row, cols] = torch.tensor(e.type_ids, dtype=torch.long)
        return batch

    def _score_triples(self, triples: list[tuple[str, str, str]]) -> np.ndarray:
        from concurrent.futures import ThreadPoolExecutor

        import torch

        self._load()
        self._encodings = {} if self._backend is not None else None
        try:
            texts = [self.pair_texts(q, a, b) for q, a, b in triples]
            # Longest first: little padding within a batch, and a batch too large fails at once.
            order = sorted(range(len(texts)), key=lambda i: -len(texts[i][0]) - len(texts[i][1]))
            out = np.zeros((len(triples), 3), dtype=np.float64)
            batches = [
                order[start : start + self.batch_size]
                for start in range(0, len(order), self.batch_size)
            ]
            # the next batch is built on a thread while the model runs this one
            with torch.no_grad(), ThreadPoolExecutor(max_workers=1) as builder:
                upcoming = (
                    builder.submit(self._batch, [texts[i] for i in batches[0]]) if batches else None
                )
                for n, rows in enumerate(batches):
                    encoded = {k: v.to(self.device) for k, v in upcoming.result().items()}
                    if n + 1 < len(batches):
                        upcoming = builder.submit(self._batch, [texts[i] for i in batches[n + 1]])
                    self._score_batch(encoded, rows, out)
        finally:
            self._encodings = None  # the texts' encodings live for one scoring call only
        return out

    def _score_batch(self, encoded: dict, rows: list[int], out: np.ndarray) -> None:
        """(entail, neutral, contra) probabilities of one batch into `out[rows]`."""
        import torch

        probs = torch.softmax(self._model(**encoded).logits.float(), dim=-1).cpu().numpy()
        self.n_model_calls += 1
        entail = probs[:, self.entail_id]
        contra = probs[:, self.contra_id]
        # A two-label model has no neutral column: the rest of the mass is neutral.
        neutral = (
            probs[:, self.neutral_id] if self.neutral_id is not None else 1.0 - entail - contra
        )
        out[rows] = np.stack([entail, neutral, contra], axis=1)

    def _matrices(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        # The order of `values` is (entail, neutral, contra) == (ENTAIL, NEUTRAL, CONTRA).
        return values[..., 0].copy(), values[..., 2].copy(), values.argmax(axis=-1).astype(np.int64)


class EmbeddingEquivalence(Equivalence):
    """Embedding backend (the default experiment: no MNLI model ships on PyPI).

    cos = <e(question + " " + a), e(question + " " + b)> with unit embeddings; equivalent iff
    cos >= threshold. Probabilities (a documented deviation, there is no NLI model): entail =
    sigmoid((cos - threshold) / scale), contra = 1 - entail; no neutral class, so strict and
    non-strict clustering coincide.
    """

    n_values = 1  # cosine similarity

    def __init__(
        self,
        embedder: object,
        threshold: float = DEFAULT_EMBEDDING_THRESHOLD,
        scale: float = DEFAULT_EMBEDDING_SCALE,
        strict: bool = True,
        cache_dir: str | Path | None = None,
    ) -> None:
        super().__init__(strict=strict, cache_dir=cache_dir)
        if not hasattr(embedder, "embed"):
            raise TypeError(
                "embedder must provide embed(texts) -> (n, d) unit rows (pipeline.mapping.embed.Embedder)."
            )
        if not -1.0 <= float(threshold) <= 1.0:
            raise ValueError(f"threshold is a cosine similarity in [-1, 1], got {threshold}.")
        if scale <= 0:
            raise ValueError(f"scale must be > 0, got {scale}.")
        self.embedder = embedder
        self.threshold = float(threshold)
        self.scale = float(scale)

    @property
    def name(self) -> str:
        return f"embedding:{getattr(self.embedder, 'name', type(self.embedder).__name__)}"

    def revision_entry(self) -> dict:
        """For the manifests: an offline stand-in for the NLI model, and its embedder's record."""
        record = getattr(self.embedder, "revision_entry", None)
        return {
            "source": "stand-in",
            "stands_in_for": "an NLI model",
            "embedder": record() if record else type(self.embedder).__name__,
        }

    def _score(self, question: str, pairs: list[tuple[str, str]]) -> np.ndarray:
        prefix = f"{question} " if question else ""
        strings = list(dict.fromkeys(prefix + t for pair in pairs for t in pair))
        vectors = np.asarray(self.embedder.embed(strings), dtype=np.float64)
        self.n_model_calls += 1
        row = {s: i for i, s in enumerate(strings)}
        a = vectors[[row[prefix + x] for x, _ in pairs]]
        b = vectors[[row[prefix + y] for _, y in pairs]]
        return np.einsum("ij,ij->i", a, b)[:, None]

    def _matrices(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        sim = values[..., 0]
        entail = 1.0 / (1.0 + np.exp(-(sim - self.threshold) / self.scale))
        labels = np.where(sim >= self.threshold, ENTAIL, CONTRA).astype(np.int64)
        return entail, 1.0 - entail, labels
