"""decide_prompt: every method's action, risk and text on hand-computed examples; the texts are
the task's latent space's (`LatentSpace.render`)."""

import json
import math

import numpy as np
import pytest

from pipeline.latent import get_space
from pipeline.stages.decide import decide_prompt
from pipeline.tasks.sets.space import surface_form

SETS, SPHERE, CLASSES = get_space("sets"), get_space("sphere"), get_space("classes")


def by_method(rows):
    return {r["method"]: r for r in rows}


def test_sets_methods_exact_values():
    s = lambda *xs: frozenset(xs)  # noqa: E731
    samples = [
        (s("pacific"), "Pacific."),
        (s("pacific", "atlantic"), "Pacific and Atlantic."),
        (s("pacific", "atlantic"), "pacific, atlantic"),
        (s("indian"), "Indian"),
        (None, "???"),
    ]  # unparseable: dropped from the distribution
    decodes = {"beam": (s("atlantic"), "Atlantic"), "greedy": (None, "")}
    rows = by_method(
        decide_prompt(SETS, samples, decodes, {"bayes_fbeta": get_space("sets-fbeta", beta=1.0)})
    )
    # p(pacific) = 3/4, p(atlantic) = 1/2, p(indian) = 1/4
    assert json.loads(rows["bayes"]["action"]) == ["atlantic", "pacific"]
    assert rows["bayes"]["risk"] == pytest.approx(0.25 + 0.5 + 0.25)
    # rendered from the set's labels in the samples' spelling, not copied from a sample
    assert rows["bayes"]["text"] == "Atlantic, Pacific"
    assert json.loads(rows["map"]["action"]) == ["atlantic", "pacific"]  # most frequent, 2 of 4
    # l_Sample: {pacific} (0 + 1 + 1 + 2) / 4 = 1.0 ties {pacific, atlantic} (1 + 0 + 0 + 3) / 4;
    # ties go to the first sample seen
    assert json.loads(rows["sample_mbr"]["action"]) == ["pacific"]
    assert rows["sample_mbr"]["text"] == "Pacific" and rows["map"]["text"] == "Atlantic, Pacific"
    assert rows["sample_mbr"]["risk"] == pytest.approx(1.0)
    # self-consistency votes on normalised raw text: all four differ -> the first sample
    assert json.loads(rows["self_consistency"]["action"]) == ["pacific"]
    assert rows["self_consistency"]["risk"] == pytest.approx((0 + 1 + 1 + 2) / 4)
    # beam's risk under the samples: {atlantic} vs each = (2 + 1 + 1 + 2) / 4
    assert rows["beam"]["risk"] == pytest.approx(1.5) and rows["beam"]["text"] == "Atlantic"
    assert rows["greedy"]["action"] == "null" and math.isnan(rows["greedy"]["risk"])
    # the F-beta action (GFM): {atlantic, pacific} has E[F1] (2/3 + 1 + 1 + 0) / 4 = 2/3,
    # {pacific} only (1 + 2/3 + 2/3 + 0) / 4 = 7/12
    assert json.loads(rows["bayes_fbeta"]["action"]) == ["atlantic", "pacific"]
    assert rows["bayes_fbeta"]["risk"] == pytest.approx(1 - 2 / 3)
    assert rows["bayes_fbeta"]["text"] == "Atlantic, Pacific"
    assert list(rows) == [
        "bayes",
        "bayes_fbeta",
        "map",
        "sample_mbr",
        "self_consistency",
        "beam",
        "greedy",
    ]


def test_sphere_text_is_the_closest_sample():
    a, b, c = np.eye(3)
    samples = [(list(a), "first"), (list(b), "second"), (list(0.9 * a + 0.1 * c), "third")]
    rows = by_method(decide_prompt(SPHERE, samples, {}))
    mu = (a + b + (0.9 * a + 0.1 * c) / np.linalg.norm(0.9 * a + 0.1 * c)) / 3
    np.testing.assert_allclose(json.loads(rows["bayes"]["action"]), mu / np.linalg.norm(mu))
    assert rows["bayes"]["risk"] == pytest.approx(1 - np.linalg.norm(mu))
    assert rows["bayes"]["text"] == "first"  # largest cosine with the mean direction


def test_no_parseable_sample_gives_null_actions_not_a_crash():
    rows = by_method(decide_prompt(CLASSES, [(None, "x"), (None, "y")], {"beam": ("paris", "P")}))
    assert all(
        rows[m]["action"] == "null" and math.isnan(rows[m]["risk"])
        for m in ("bayes", "map", "sample_mbr", "self_consistency")
    )
    assert rows["beam"]["action"] == '"paris"' and math.isnan(rows["beam"]["risk"])


def test_set_text_says_what_the_set_says():
    """A sample that maps to {australia} while also listing India does not stand for the set."""
    s = lambda *xs: frozenset(xs)  # noqa: E731
    samples = [
        (s("australia"), "1. Australia - 2. India"),
        (s("australia"), "Australia."),
        (s("people s republic of china"), "The People's Republic of China"),
    ]
    rows = by_method(decide_prompt(SETS, samples, {}))
    assert json.loads(rows["bayes"]["action"]) == ["australia"]
    assert rows["bayes"]["text"] == "Australia"
    assert (
        surface_form("people s republic of china", ["x", "The People's Republic of China."])
        == "People's Republic of China"
    )
    assert surface_form("john lennon", ["The Beatles' John  Lennon wrote"]) == "John  Lennon"
    assert surface_form("nowhere", ["Atlantic"]) == "nowhere"  # no sample writes it: the label
    assert surface_form("art", ["Earth, Mars"]) == "art"  # whole words only, not inside "Earth"
    assert SETS.describe(frozenset()) == ""


def test_graph_text_is_g_inverse():
    from pipeline.tasks.graphs.reading import graph_to_text

    g = frozenset({("marie curie", "won", "nobel prize"), ("marie curie", "born in", "warsaw")})
    rows = by_method(
        decide_prompt(get_space("graphs"), [(g, "Marie Curie won the Nobel Prize."), (g, "x")], {})
    )
    assert (
        rows["bayes"]["text"]
        == graph_to_text(g)
        == "Marie curie born in warsaw. Marie curie won nobel prize."
    )


def test_every_latent_method_has_a_decision_rule_and_only_those():
    from pipeline.components.methods import methods
    from pipeline.latent.decision_rules import DECISION_RULES

    assert set(DECISION_RULES.names()) == set(methods("latent"))


def test_the_decision_rules_against_brute_force_on_sets():
    """Bayes = the subset of least empirical Hamming risk over every subset of the labels seen;
    l_MAP = the most frequent latent; l_Sample = the sample of least risk; self-consistency =
    the first sample of the most frequent normalised text."""
    import itertools

    from pipeline.latent import get_space
    from pipeline.latent.decision_rules import DECISION_RULES

    space = get_space("sets")
    valid = [
        (frozenset({"a", "b"}), "A and B"),
        (frozenset({"a"}), "a"),
        (frozenset({"a", "b"}), "a and b"),
        (frozenset({"c"}), "C"),
        (frozenset({"a"}), "A"),
    ]
    latents = [lat for lat, _ in valid]

    def risk(action):
        return sum(space.distance(lat, action) for lat in latents) / len(latents)

    labels = sorted(set().union(*latents))
    subsets = [
        frozenset(c) for r in range(len(labels) + 1) for c in itertools.combinations(labels, r)
    ]
    best = min(risk(s) for s in subsets)
    # a cell of one prompt, as the decide stage hands the rules every prompt of a cell
    batch, texts = space.batch([latents]), [[txt for _, txt in valid]]

    def rule(name):
        actions, risks, rule_texts = DECISION_RULES[name](batch, texts)
        return actions[0], float(risks[0]), None if rule_texts is None else rule_texts[0]

    action, r, text = rule("bayes")
    assert r == pytest.approx(best) and risk(frozenset(action)) == pytest.approx(best)
    assert text is None
    action, r, _ = rule("map")
    assert frozenset(action) == frozenset({"a", "b"}) and r == pytest.approx(
        risk(frozenset(action))
    )
    action, r, _ = rule("sample_mbr")
    assert r == pytest.approx(min(risk(lat) for lat in latents))
    action, r, text = rule("self_consistency")
    assert text == "A and B" and frozenset(action) == frozenset({"a", "b"})


@pytest.mark.parametrize("space_name", ["sets", "graphs", "classes", "sphere", "simplex"])
def test_a_cell_decided_together_equals_its_prompts_decided_alone(space_name):
    """decide_many pads prompts of different sizes into one array: nothing leaks between them
    (an undecidable prompt, a prompt without a decode, decodes in different orders)."""
    from pipeline.stages.decide import decide_many

    rng = np.random.default_rng(5)
    space = get_space(space_name)
    extra = {"bayes_fbeta": get_space("sets-fbeta")} if space_name in ("sets", "graphs") else {}

    def latent(p):
        labels = [f"a{p}", f"b{p}", f"c{p}", "shared"]
        if space_name == "sets":
            return frozenset(x for x in labels if rng.random() < 0.5)
        if space_name == "graphs":
            return frozenset((x, "r", "y") for x in labels if rng.random() < 0.5)
        if space_name == "classes":
            return labels[int(rng.integers(0, 3))]
        if space_name == "sphere":
            return rng.normal(size=4)
        q = rng.dirichlet(np.ones(3))
        return dict(zip(labels[:3], q.tolist()))

    prompts = []
    for p in range(12):
        m = int(rng.integers(1, 7))
        samples = [
            (None if (p == 3 or rng.random() < 0.15) else latent(p), f"text {i % 3}")
            for i in range(m)
        ]
        decodes = {} if p == 5 else {"greedy": (latent(p), "g"), "beam": (latent(p), "b")}
        if p == 7:
            decodes = dict(reversed(list(decodes.items())))
        prompts.append((samples, decodes))
    together = decide_many(space, prompts, extra)
    for p, (samples, decodes) in enumerate(prompts):
        alone = decide_prompt(space, samples, decodes, extra)
        assert [r["method"] for r in together[p]] == [r["method"] for r in alone]
        for a, b in zip(together[p], alone):
            assert a["text"] == b["text"]
            assert (math.isnan(a["risk"]) and math.isnan(b["risk"])) or a["risk"] == pytest.approx(
                b["risk"], rel=1e-12, abs=1e-12
            )
            if space_name in ("sphere", "simplex"):  # means: equal up to rounding
                va, vb = json.loads(a["action"]), json.loads(b["action"])
                if isinstance(va, dict):
                    va, vb = list(va.values()), list(vb.values())
                assert (va is None and vb is None) or np.allclose(va, vb, rtol=0, atol=1e-12)
            else:
                assert a["action"] == b["action"]
    assert all(math.isnan(r["risk"]) for r in together[3] if r["method"] not in ("greedy", "beam"))


def test_a_reals_prompt_whose_risk_overflows_gets_no_decision_and_the_others_theirs(caplog):
    """l2 risk of values spanning +-1e308 exceeds the largest float: that prompt is refused (NaN,
    like an unparseable one, with a warning) instead of stopping the cell or writing inf."""
    import math

    from pipeline.latent import get_space
    from pipeline.stages.decide import decide_many

    prompts = [
        ([(1e308, "a"), (-1e308, "b"), (1e308, "c")], {}),
        ([(1.0, "x"), (3.0, "y")], {"greedy": (2.0, "z")}),
    ]
    with caplog.at_level("WARNING", logger="pipeline"):
        overflowed, fine = decide_many(get_space("reals", loss="l2"), prompts)
    assert {r["method"] for r in overflowed} >= {"bayes", "map"}
    assert all(r["action"] == "null" and math.isnan(r["risk"]) for r in overflowed)
    assert {r["method"]: (r["action"], r["risk"]) for r in fine}["bayes"] == ("2.0", 1.0)
    assert {r["method"]: r["risk"] for r in fine}["greedy"] == 1.0
    assert "1 prompt(s) get no decision (NaN risk)" in caplog.text
    assert "exceeds the largest float" in caplog.text
