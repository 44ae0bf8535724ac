"""Clustering reads only the pairs it needs: `Equivalence.cluster_many` equals lm-polygraph's
greedy on the full decision matrix (`greedy_first_member_clusters`) for random relations, and
scores far fewer pairs. The relation comes from a table of random labels (a real Equivalence
subclass whose model is that table: no NLI model runs here)."""

import numpy as np
import pytest

from pipeline.mapping.equivalence import (
    CONTRA,
    ENTAIL,
    NEUTRAL,
    Equivalence,
    decisions_from_labels,
    greedy_first_member_clusters,
)


class TableEquivalence(Equivalence):
    """Label of (premise, hypothesis) from a fixed table; counts what it is asked."""

    def __init__(self, table, strict=True, cache_dir=None):
        super().__init__(strict=strict, cache_dir=cache_dir)
        self.table = table

    @property
    def name(self):
        return "table"

    def _score(self, question, pairs):
        return np.array([[self.table[(question, a, b)]] for a, b in pairs], dtype=float)

    def _matrices(self, values):
        labels = values[..., 0].astype(np.int64)
        return (labels == ENTAIL).astype(float), (labels == CONTRA).astype(float), labels


def random_prompt(rng, q, n_texts, n_distinct, p_entail):
    distinct = [f"{q}-a{i}" for i in range(n_distinct)]
    texts = [distinct[i] for i in rng.integers(0, n_distinct, size=n_texts)]
    # clustered structure: answers of one hidden class mostly entail each other
    hidden = {a: int(rng.integers(0, 4)) for a in distinct}
    table = {}
    for a in distinct:
        for b in distinct:
            if a != b:
                same = hidden[a] == hidden[b]
                table[(q, a, b)] = (
                    ENTAIL
                    if rng.random() < (p_entail if same else 0.05)
                    else int(rng.choice([NEUTRAL, CONTRA]))
                )
    return texts, table


def full_greedy(table, q, texts, strict):
    n = len(texts)
    labels = np.full((n, n), ENTAIL, dtype=np.int64)
    for i, a in enumerate(texts):
        for j, b in enumerate(texts):
            if a != b:
                labels[i, j] = table[(q, a, b)]
    return greedy_first_member_clusters(decisions_from_labels(labels, strict))


@pytest.mark.parametrize("strict", [True, False])
def test_batched_lazy_clustering_equals_the_full_greedy(strict):
    rng = np.random.default_rng(0)
    for trial in range(40):
        items, table = [], {}
        for k in range(int(rng.integers(1, 6))):
            q = f"q{trial}-{k}"
            texts, t = random_prompt(
                rng,
                q,
                int(rng.integers(0, 25)),
                int(rng.integers(1, 15)),
                float(rng.uniform(0.3, 1.0)),
            )
            items.append((q, texts))
            table.update(t)
        eq = TableEquivalence(table, strict=strict)
        got = eq.cluster_many(items)
        assert got == [full_greedy(table, q, texts, strict) for q, texts in items]
        # every per-prompt call agrees and needs no new pair
        before = eq.n_pairs_scored
        assert [eq.cluster(q, texts) for q, texts in items] == got
        assert eq.n_pairs_scored == before


def test_far_fewer_pairs_than_the_full_matrix_on_a_triviaqa_shaped_prompt():
    # 22 distinct answers (20 samples + decodes) in 3 classes: the full matrix is 22 * 21 pairs
    distinct = [f"a{i}" for i in range(22)]
    hidden = {a: i % 3 for i, a in enumerate(distinct)}
    table = {
        ("q", a, b): ENTAIL if hidden[a] == hidden[b] else CONTRA
        for a in distinct
        for b in distinct
        if a != b
    }
    eq = TableEquivalence(table)
    assert eq.cluster("q", distinct) == [i % 3 for i in range(22)]
    # round 1: 21 answers x a0 (both directions); round 2: 13 left x a1; round 3: 6 left x a2
    assert eq.n_pairs_scored == 2 * (21 + 13 + 6) == 80  # 17 % of the full 462


@pytest.mark.parametrize("with_disk", [False, True])
def test_a_bounded_memory_of_pairs_changes_no_result(tmp_path, with_disk):
    """Memory holds at most `memory_pairs` scored pairs between operations; clusters and pair
    matrices equal the unbounded ones. With the disk cache a forgotten pair is read back, not
    scored again; without it, it is scored again."""
    rng = np.random.default_rng(1)
    items, table = [], {}
    for k in range(12):
        texts, t = random_prompt(rng, f"q{k}", 20, 12, 0.7)
        items.append((f"q{k}", texts))
        table.update(t)
    free = TableEquivalence(table)
    want_clusters = free.cluster_many(items)
    cluster_pairs = free.n_pairs_scored
    want_labels = [free.labels(q, texts) for q, texts in items]

    cache = tmp_path / "pairs" if with_disk else None
    bounded = TableEquivalence(table, cache_dir=cache)
    bounded.memory_pairs = 40  # under one prompt's full matrix (up to 132 ordered pairs)
    assert bounded.cluster_many(items) == want_clusters
    assert bounded.n_pairs_scored == cluster_pairs  # a round reads only what it just scored
    got_labels = []
    for q, texts in items:
        got_labels.append(bounded.labels(q, texts))
        assert len(bounded._memory) <= bounded.memory_pairs + 12 * 11  # the bound + one prompt
    for got, want in zip(got_labels, want_labels, strict=True):
        np.testing.assert_array_equal(got, want)
    again = [bounded.labels(q, texts) for q, texts in items[:3]]  # long since forgotten
    for got, want in zip(again, want_labels[:3], strict=True):
        np.testing.assert_array_equal(got, want)
    full = sum(len(set(t)) * (len(set(t)) - 1) for _, t in items)
    if with_disk:  # the cluster pairs plus the rest of each full matrix, each scored once
        assert bounded.n_pairs_scored == full
    else:
        assert bounded.n_pairs_scored > full  # forgotten pairs were scored again
