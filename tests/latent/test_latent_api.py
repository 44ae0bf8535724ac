"""Registry, codec, batch forms, error messages and the numpy-only import."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from pipeline.latent import (
    BayesResult,
    ClassSpace,
    FBetaSetSpace,
    GraphSpace,
    LatentSpace,
    RealSpace,
    SetSpace,
    SimplexSpace,
    SphereSpace,
    available_spaces,
    from_json,
    get_space,
    incidence_matrix,
    register,
    sets_bayes_batch,
    sets_pairwise_risks_batch,
    sets_sample_mbr_batch,
    sphere_bayes_batch,
    sphere_sample_mbr_batch,
    to_json,
)

NAMES = ["classes", "graphs", "reals", "sets", "sets-fbeta", "simplex", "sphere"]


def test_registry_names_and_types():
    assert available_spaces() == NAMES
    expected = {
        "classes": ClassSpace,
        "sets": SetSpace,
        "sets-fbeta": FBetaSetSpace,
        "graphs": GraphSpace,
        "sphere": SphereSpace,
        "simplex": SimplexSpace,
        "reals": RealSpace,
    }
    for name, cls in expected.items():
        assert type(get_space(name)) is cls
    assert get_space("reals", loss="l2").loss == "l2"


def test_unknown_space_lists_valid_names():
    with pytest.raises(
        ValueError, match="unknown latent space 'setz'; valid names: classes, graphs, reals, sets"
    ):
        get_space("setz")


def test_register_rejects_non_spaces_and_name_clash():
    with pytest.raises(TypeError, match="LatentSpace subclass"):
        register("not-a-space")(int)
    with pytest.raises(ValueError, match="already registered"):

        @register("sets")
        class Other(SetSpace):
            pass


def test_bayes_result_is_frozen():
    res = BayesResult(action=frozenset(), risk=0.0)
    with pytest.raises(AttributeError):
        res.risk = 1.0  # type: ignore[misc]
    assert isinstance(SetSpace(), LatentSpace)


@pytest.mark.parametrize(
    ("name", "latent"),
    [
        ("classes", "Cape Town"),
        ("classes", 3),
        ("classes", "Åland ✓"),
        ("sets", frozenset({"Pacific", "Arctic", "b", "Z"})),
        ("sets", frozenset()),
        ("sets-fbeta", frozenset({"x"})),
        (
            "graphs",
            # canonical: an undirected edge stores its endpoints sorted
            frozenset({("France", "is capital of", "Paris"), ("Eiffel Tower", "is in", "Paris")}),
        ),
        ("graphs", frozenset()),
        ("sphere", np.array([0.1, -1e-300, 1 / 3, 2.5e17])),
        ("simplex", {"a": 0.1, "b": 0.2, "c": 0.7000000000000001}),
        ("reals", 0.1),
        ("reals", -3.0),
    ],
)
def test_codec_round_trip_exact(name, latent):
    s = to_json(name, latent)
    back = from_json(name, s)
    if name == "sphere":
        assert back.dtype == np.float64 and np.array_equal(back, latent)
    else:
        assert back == latent and type(back) is type(latent)
    assert to_json(name, None) == "null" and from_json(name, "null") is None


def test_codec_formats():
    assert to_json("sets", frozenset({"b", "a", "c"})) == '["a", "b", "c"]'
    assert (
        to_json("graphs", {("b", "r", "c"), ("a", "r", "b")})
        == '[["a", "r", "b"], ["b", "r", "c"]]'
    )
    assert to_json("simplex", {"b": 0.5, "a": 0.5}) == '{"a": 0.5, "b": 0.5}'
    assert to_json("sphere", np.array([1.0, 0.0])) == "[1.0, 0.0]"
    assert to_json("reals", np.float32(2.0)) == "2.0"
    assert to_json("classes", np.int64(4)) == "4"


def test_codec_round_trips_space_outputs():
    latents = [{"a": 0.3, "b": 0.7}, {"a": 1.0}]
    action = SimplexSpace().bayes(latents).action
    assert from_json("simplex", to_json("simplex", action)) == action
    action = SphereSpace().bayes([[1.0, 2.0, 3.0], [0.5, 0.1, -1.0]]).action
    assert np.array_equal(from_json("sphere", to_json("sphere", action)), action)


def test_codec_errors():
    with pytest.raises(ValueError, match="unknown latent space"):
        to_json("nope", 1)
    with pytest.raises(ValueError, match="simplex labels must be strings"):
        to_json("simplex", {1: 1.0})
    with pytest.raises(ValueError, match="tuple of 3 strings"):
        to_json("graphs", {("a", "b")})
    with pytest.raises(ValueError, match="finite"):
        to_json("sphere", [1.0, float("nan")])
    with pytest.raises(ValueError, match="JSON scalar"):
        to_json("classes", ("a", "b"))
    with pytest.raises(ValueError, match="not valid JSON"):
        from_json("sets", "[unclosed")
    with pytest.raises(ValueError, match="expected a number"):
        from_json("reals", '"3"')


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: SetSpace().bayes([]), "latents is empty"),
        (lambda: SetSpace().bayes([frozenset("a")], weights=[-1]), "non-negative"),
        (lambda: SetSpace().bayes([frozenset("a")], weights=[float("nan")]), "finite"),
        (lambda: SetSpace().bayes([frozenset("a")], weights=[0.0]), "must not all be zero"),
        (lambda: SetSpace().bayes([frozenset("a")], weights=[1, 2]), "one weight per latent"),
        (lambda: SetSpace().bayes(["abc"]), "must be a frozenset"),
        (lambda: SetSpace().bayes([None]), "drop unparseable samples"),
        (lambda: GraphSpace().bayes([frozenset({("a", "b")})]), "tuple of 3 strings"),
        (lambda: SphereSpace().bayes([[0.0, 0.0]]), "zero vector"),
        (lambda: SphereSpace().bayes([[1.0, 0.0], [1.0, 0.0, 0.0]]), "same dimension"),
        (lambda: SphereSpace().bayes([[1.0, float("nan")]]), "NaN or inf"),
        (lambda: SimplexSpace().bayes([{"a": -0.1, "b": 1.1}]), "non-negative"),
        (lambda: SimplexSpace().bayes([{"a": float("nan")}]), "finite"),
        (lambda: SimplexSpace().bayes([{"a": 0.0}]), "all zero"),
        (lambda: SimplexSpace().bayes([[0.5, 0.5]]), "must be a dict"),
        (lambda: RealSpace().bayes([float("inf")]), "finite"),
        (lambda: RealSpace().bayes(["3"]), "real number"),
        (lambda: RealSpace(loss="l3"), "loss must be one of"),
        (lambda: FBetaSetSpace(beta=0), "beta must be a positive"),
        (lambda: ClassSpace().bayes([["unhashable"]]), "hashable"),
        (lambda: sets_bayes_batch(np.zeros((2, 3), bool)), "shape \\(prompts, samples, labels\\)"),
        (
            lambda: sets_bayes_batch(np.zeros((1, 2, 3), bool), np.zeros((1, 2))),
            "all-zero weight rows",
        ),
        (lambda: sphere_bayes_batch(np.zeros((1, 2, 3))), "zero vector"),
        (lambda: sphere_bayes_batch(np.array([[[1.0, np.inf]]])), "finite"),
        (
            lambda: sphere_bayes_batch(
                np.array([[[1.0, 0.0]], [[np.nan, 0.0]]]), assume_normalized=True
            ),
            "finite",
        ),
        (lambda: sphere_sample_mbr_batch(np.array([[[1.0, np.nan]]])), "finite"),
    ],
)
def test_errors_are_clear(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def _random_sets(rng, p, m, k):
    return rng.random((p, m, k)) < rng.uniform(0.05, 0.95, size=(p, 1, k))


@pytest.mark.parametrize("weighted", [False, True])
def test_sets_batch_matches_scalar(weighted):
    rng = np.random.default_rng(7)
    x = _random_sets(rng, 30, 8, 6)  # even M: exact halves occur
    w = rng.integers(0, 3, size=(30, 8)).astype(float) if weighted else None
    if w is not None:
        w[:, 0] += 1
    actions, risks = sets_bayes_batch(x, w)
    idx, mbr_risks = sets_sample_mbr_batch(x, w)
    labels = list(range(6))
    for p in range(30):
        lat = [frozenset(np.flatnonzero(row).tolist()) for row in x[p]]
        res = SetSpace().bayes(lat, None if w is None else w[p])
        assert frozenset(np.flatnonzero(actions[p]).tolist()) == res.action
        assert risks[p] == pytest.approx(res.risk, abs=1e-12)
        mbr = SetSpace().sample_mbr(lat, None if w is None else w[p])
        assert mbr_risks[p] == pytest.approx(mbr.risk, abs=1e-12)
        assert lat[idx[p]] == mbr.action
    assert incidence_matrix([frozenset({2, 0})], labels)[1].tolist() == [
        [True, False, True, False, False, False]
    ]


@pytest.mark.parametrize("weighted", [False, True])
def test_sample_mbr_risks_equal_the_pairwise_sums_brute_force(weighted):
    """l_Sample's O(M K) risks against sum_j w_j |s_i ^ s_j| / W by two loops over the samples
    (unweighted: bit-equal, so ties fall as the pairwise sum had them)."""
    rng = np.random.default_rng(11)
    x = _random_sets(rng, 25, 9, 5)
    x[3] = x[3, :1]  # every sample equal: all risks tie at 0
    w = rng.integers(0, 4, size=(25, 9)).astype(float) if weighted else None
    if w is not None:
        w[:, 2] += 1
    risks = sets_pairwise_risks_batch(x, w)
    for p in range(25):
        sets = [set(np.flatnonzero(row).tolist()) for row in x[p]]
        wp = np.ones(9) if w is None else w[p]
        for i in range(9):
            if wp[i] <= 0:
                assert risks[p, i] == np.inf
                continue
            brute = sum(wj * len(sets[i] ^ sj) for wj, sj in zip(wp, sets)) / wp.sum()
            if weighted:
                assert risks[p, i] == pytest.approx(brute, abs=1e-12)
            else:
                assert risks[p, i] == brute


@pytest.mark.parametrize("weights", [None, np.array([[2.0, 2.0]])])
def test_sets_batch_exact_half_is_included(weights):
    x = np.array([[[True, True, False], [True, False, True]]])
    actions, risks = sets_bayes_batch(x, weights)
    assert actions.tolist() == [[True, True, True]] and risks.tolist() == [1.0]


def test_sets_batch_padding_with_zero_weight_and_false_columns():
    lat = [frozenset("ab"), frozenset("a"), frozenset("c")]
    labels, x = incidence_matrix(lat)
    padded = np.zeros((1, 5, len(labels) + 2), dtype=bool)
    padded[0, :3, : len(labels)] = x
    padded[0, 3:, -1] = True  # padding samples contain a padding label: weight 0 must hide them
    actions, risks = sets_bayes_batch(padded, np.array([[1, 1, 1, 0, 0]], float))
    assert actions[0].tolist() == [True, False, False, False, False]
    assert risks[0] == pytest.approx(SetSpace().bayes(lat).risk)
    idx, mbr_risks = sets_sample_mbr_batch(padded, np.array([[0, 1, 1, 0, 0]], float))
    assert idx[0] == 1 and mbr_risks[0] == 1.0  # {a} vs {c}: tie at Hamming 2 / 2, first wins


@pytest.mark.parametrize("weighted", [False, True])
def test_sphere_batch_matches_scalar(weighted):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(20, 7, 5)) * rng.uniform(0.5, 3, size=(20, 7, 1))
    w = rng.random((20, 7)) if weighted else None
    actions, risks = sphere_bayes_batch(x, w)
    idx, mbr_risks = sphere_sample_mbr_batch(x, w)
    for p in range(20):
        res = SphereSpace().bayes(list(x[p]), None if w is None else w[p])
        np.testing.assert_allclose(actions[p], res.action, atol=1e-12)
        assert risks[p] == pytest.approx(res.risk, abs=1e-12)
        mbr = SphereSpace().sample_mbr(list(x[p]), None if w is None else w[p])
        assert mbr_risks[p] == pytest.approx(mbr.risk, abs=1e-12)
        np.testing.assert_allclose(
            x[p, idx[p]] / np.linalg.norm(x[p, idx[p]]), mbr.action, atol=1e-12
        )


def test_sphere_batch_keeps_float32_and_zero_mean_rows():
    x = np.array([[[1, 0], [0, 1]], [[0, 2], [0, -2]]], dtype=np.float32)
    actions, risks = sphere_bayes_batch(x)
    assert actions.dtype == np.float32
    np.testing.assert_allclose(actions[0], [math.sqrt(0.5)] * 2, rtol=1e-6)
    assert risks[1] == 1.0 and actions[1].tolist() == [0.0, 1.0]
    # zero-mean rows fall back to the first POSITIVE-weight sample
    actions, risks = sphere_bayes_batch(
        np.array([[[1.0, 0], [0, 1], [0, -1]]]), np.array([[0.0, 1, 1]])
    )
    assert actions[0].tolist() == [0.0, 1.0] and risks[0] == 1.0
    # zero padding rows are allowed when their weight is zero
    padded = np.zeros((1, 3, 2))
    padded[0, 0] = [3, 4]
    actions, risks = sphere_bayes_batch(padded, np.array([[1.0, 0.0, 0.0]]))
    np.testing.assert_allclose(actions[0], [0.6, 0.8])
    assert risks[0] == pytest.approx(0.0, abs=1e-15)


def test_import_pulls_only_numpy():
    code = (
        "import sys; before = set(sys.modules); import pipeline.latent; "
        "print('\\n'.join(sorted({m.split('.')[0] for m in set(sys.modules) - before})))"
    )
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, check=True
    )
    new = set(out.stdout.split())
    third_party = {m for m in new if m not in sys.stdlib_module_names and not m.startswith("_")} - {
        "numpy",
        "pipeline",
        "cython_runtime",
    }  # cython_runtime: registered by numpy's C extensions
    assert not third_party, f"import pipeline.latent pulled in {sorted(third_party)}"
    heavy = ("torch", "scipy", "pandas", "transformers", "pyarrow", "sklearn")
    lines = [
        ln.split("|")[-1].strip() for ln in out.stderr.splitlines() if ln.startswith("import time:")
    ]
    assert not [ln for ln in lines if ln.split(".")[0] in heavy]
