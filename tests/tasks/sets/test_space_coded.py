"""Label sets coded once per cell (`IncidenceBatch`): frozensets in a space whose canonical form
of a frozenset is itself skip the per-item check; the decisions equal those of the checked path
(lists and sets of labels) and of the one-prompt maths. Graphs, whose canonical form orients
undirected edges, always take the checked path."""

import numpy as np

from pipeline.latent import get_space
from pipeline.tasks.sets.space import _already_canonical


def _cell(seed: int, n_prompts: int = 40, m: int = 12):
    rng = np.random.default_rng(seed)
    cell = []
    for p in range(n_prompts):
        labels = [f"l{p % 5}-{k}" for k in range(int(rng.integers(1, 8)))]
        share = rng.uniform(0.05, 0.95, len(labels))
        cell.append(
            [
                frozenset(x for x, q in zip(labels, share) if rng.random() < q)
                for _ in range(int(rng.integers(1, m + 1)))
            ]
        )
    return cell


def test_coded_frozensets_decide_as_the_checked_path_and_one_prompt():
    for name in ("sets", "sets-fbeta"):
        space = get_space(name)
        cell = _cell(1)
        assert _already_canonical(space, cell)
        fast = space.batch(cell)
        checked = space.batch([[list(s) for s in p] for p in cell])  # lists: validated, copied
        for batch in (fast, checked):
            actions, risks = batch.bayes()
            for p, samples in enumerate(cell):
                one = space.bayes(samples)
                assert actions[p] == one.action and abs(risks[p] - one.risk) < 1e-12
        assert fast.bayes()[0] == checked.bayes()[0]
        np.testing.assert_array_equal(fast.bayes()[1], checked.bayes()[1])
        if name == "sets":
            np.testing.assert_array_equal(fast.sample_mbr()[0], checked.sample_mbr()[0])
            np.testing.assert_array_equal(fast.map(), checked.map())
            decodes = [p[0] for p in cell]
            np.testing.assert_array_equal(fast.risk(decodes), checked.risk(decodes))


def test_graphs_and_non_frozensets_take_the_checked_path():
    edges = [[frozenset({("b", "r", "a")}), frozenset({("a", "r", "b")})]]
    graphs = get_space("graphs")  # undirected by default
    assert not _already_canonical(graphs, edges)
    actions, risks = graphs.batch(edges).bayes()
    assert actions == [frozenset({("a", "r", "b")})] and risks[0] == 0.0  # one edge, oriented
    sets = get_space("sets")
    assert not _already_canonical(sets, [[{"a"}, frozenset({"b"})]])  # a set: copied to frozen
    assert not _already_canonical(sets, [[frozenset({"a"})], []])  # a prompt without samples


def test_zero_one_weights_count_only_the_weighted_samples():
    """0/1 weights take the integer path: a zero-weight sample's labels count for nothing, and
    the result is that of the weight-1 samples alone (exact, ties included)."""
    from pipeline.tasks.sets.space import sets_bayes_batch, sets_pairwise_risks_batch

    rng = np.random.default_rng(5)
    x = rng.random((6, 9, 4)) < 0.5
    w = (rng.random((6, 9)) < 0.7).astype(float)
    w[:, 0] = 1.0
    actions, risks = sets_bayes_batch(x, w)
    sample_risks = sets_pairwise_risks_batch(x, w)
    for p in range(6):
        kept = x[p][w[p] > 0]
        n = len(kept)
        counts = kept.sum(axis=0)
        assert actions[p].tolist() == (2 * counts >= n).tolist()
        assert risks[p] == np.minimum(counts, n - counts).sum() / n
        brute = [sum(int(np.count_nonzero(a ^ b)) for b in kept) / n for a in kept]
        assert sample_risks[p][w[p] > 0].tolist() == brute
        assert np.all(np.isinf(sample_risks[p][w[p] == 0]))
    fractional = w * 0.5 + 0.25  # not 0/1: the float path, same maths
    a2, r2 = sets_bayes_batch(x, fractional)
    assert a2.shape == actions.shape and np.all(np.isfinite(r2))
