"""Every case of issue 20's "Why" scored as a careful reader scores it, through the pipeline's
own map, decide and evaluate code (real mappers, spaces and metrics; nothing mocked), plus the
audit artifact and its warnings."""

import json

import pandas as pd
import pytest

from pipeline.evaluation.audit import audit_prompt, count_warnings, label_warnings
from pipeline.latent import get_space
from pipeline.stages.decide import decide_prompt
from pipeline.stages.evaluate import QualityScoring, audit_rows, quality_rows


def _dataset(question, answers):
    return pd.DataFrame(
        [
            {
                "prompt_id": "p",
                "dataset": "t",
                "question": question,
                "answers": answers,
                "probabilities": [],
                "reference_text": "",
            }
        ]
    )


def _classes(question, texts):
    """The offline classes mapper (answers read, clustered by the label rule)."""
    from pipeline.tasks.classes.task import ClassesSettings
    from pipeline.tasks.contract import MAPPERS, MapContext

    return MAPPERS["classes"].build(ClassesSettings(), MapContext())(question, texts)


def _decisions(space, question, texts, decodes=None):
    latents = _classes(question, texts) if space.name == "classes" else texts
    rows = decide_prompt(space, list(zip(latents, texts)), decodes or {})
    return pd.DataFrame([{"prompt_id": "p", **r} for r in rows])


def test_cluster_answer_is_printed_and_scored_as_its_most_frequent_member():
    """ "Paris, France" (3), "Paris" (5), "Lyon" (2), reference "Paris": the Bayes answer is the
    right cluster, printed and scored as "Paris"; greedy is scored on its own text."""
    space = get_space("classes")
    texts = ["Paris, France"] * 3 + ["Paris"] * 5 + ["Lyon"] * 2
    question = "What is the capital of France?"
    latents = _classes(question, texts)
    assert latents == ["paris"] * 8 + ["lyon"] * 2  # named by the most frequent answer
    greedy_text = "Paris, France"
    decisions = _decisions(
        space, question, texts, {"greedy": (_classes(question, [greedy_text])[0], greedy_text)}
    )
    bayes = decisions.set_index("method").loc["bayes"]
    assert bayes["text"] == "Paris" and json.loads(bayes["action"]) == "paris"
    assert bayes["risk"] == pytest.approx(0.2)
    q = quality_rows(
        _dataset(question, [["Paris"]]),
        decisions,
        pd.DataFrame(columns=["prompt_id", "source", "sample_idx", "latent", "parse_ok"]),
        QualityScoring(space, ["exact_match_error"], "one_answer"),
    )
    errors = q.set_index("method")["value"]
    assert errors["bayes"] == 0.0 and errors["map"] == 0.0
    # greedy said "Paris, France": the official TriviaQA scorer does not accept it
    assert errors["greedy"] == 1.0
    assert not q["higher_is_better"].any()  # an error: lower is better, named so


@pytest.mark.parametrize(
    ("responses", "reference", "question", "f1", "hamming"),
    [
        # a wrong answer no longer gets F1 = 1 through a mangled reference ({vitamin} = {vitamin})
        (
            ["Vitamin D, Vitamin E"] * 3,
            ["Vitamin A", "Vitamin K"],
            "Which vitamins are fat-soluble?",
            0.0,
            2.0,
        ),
        # a perfect G7 answer gets Hamming 0 ("United Kingdom" was read as "kingdom")
        (
            ["Canada, France, Germany, Italy, Japan, the United Kingdom and the United States."]
            * 2,
            ["Canada", "France", "Germany", "Italy", "Japan", "United Kingdom", "United States"],
            "Which countries are members of the G7?",
            1.0,
            0.0,
        ),
        (["C++, C# and F#"] * 2, ["C#", "F#"], "Which languages did Microsoft design?", 0.8, 0.5),
        (
            ["Kangaroo, koala and wombat"] * 2,
            ["kangaroo", "koala", "wombat"],
            "Which are marsupials: kangaroo, koala, platypus, wombat?",
            1.0,
            0.0,
        ),
        # "Atlantic Ocean" names the alias "Atlantic"
        (
            ["The Atlantic Ocean and the Pacific Ocean"] * 2,
            [["Atlantic"], ["Pacific"]],
            "Which oceans border the United States?",
            1.0,
            0.0,
        ),
        (
            ["North Korea and Russia"] * 2,
            [["Korea"], ["Russia"]],
            "Which countries border China?",
            0.5,
            1.0,
        ),
    ],
)
def test_set_cases_score_as_a_careful_reader_scores_them(
    responses, reference, question, f1, hamming
):
    from pipeline.mapping.labels import LabelMerger
    from pipeline.tasks.sets.reading import SetExtractor
    from pipeline.tasks.sets.task import answer_set_from_user

    space = get_space("sets")
    latents = SetExtractor(method="rule", equivalence=LabelMerger().cluster).map_prompt(
        question, responses
    )
    decisions = pd.DataFrame(
        [{"prompt_id": "p", **r} for r in decide_prompt(space, list(zip(latents, responses)), {})]
    )
    answers = answer_set_from_user(reference)["answers"]
    q = quality_rows(
        _dataset(question, answers),
        decisions,
        pd.DataFrame(columns=["prompt_id", "source", "sample_idx", "latent", "parse_ok"]),
        QualityScoring(space, ["f1", "hamming"], "answer_set"),
    )
    bayes = q[q["method"] == "bayes"].set_index("metric")["value"]
    assert bayes["f1"] == pytest.approx(f1) and bayes["hamming"] == pytest.approx(hamming)


def test_audit_warns_where_a_careful_reader_would_look_twice():
    audit = audit_prompt(
        [["kingdom", "united kingdom"], ["the"], ["c"], [], [], [], []],
        [["Vitamin A"], ["vitamin a"], ["Atlantic"]],
        "Which?",
        extra_labels=["atlantic ocean"],
    )
    kinds = sorted({w.split(":")[0] for w in audit.warnings})
    assert kinds == [
        "fragment_label",
        "mostly_empty",
        "reference_collapsed",
        "single_letter_label",
        "stop_word_label",
    ]
    assert audit.reference_labels == ["vitamin a", "vitamin a", "atlantic"]
    assert audit.label_matches["atlantic ocean"] == {"answer": 2, "rule": "head_noun"}
    assert audit.label_matches["kingdom"] == {"answer": None, "rule": "none"}
    assert count_warnings([audit.warnings, []])["mostly_empty"] == 1
    assert label_warnings(["pacific", "atlantic"]) == []


def test_audit_rows_of_a_cell():
    space = get_space("sets")
    s = lambda *xs: space.to_json(frozenset(xs))  # noqa: E731
    latents = pd.DataFrame(
        [
            {"prompt_id": "p", "source": "sample", "sample_idx": i, "latent": lat, "parse_ok": ok}
            for i, (lat, ok) in enumerate(
                [
                    (s("atlantic ocean", "pacific"), True),
                    (s("atlantic ocean"), True),
                    ("null", False),
                ]
            )
        ]
    )
    decisions = pd.DataFrame(
        [
            {
                "prompt_id": "p",
                "method": "bayes",
                "action": s("atlantic ocean"),
                "risk": 0.5,
                "text": "Atlantic Ocean",
            }
        ]
    )
    rows = audit_rows(
        space,
        _dataset("Which oceans?", [["Atlantic"], ["Pacific Ocean"]]),
        decisions,
        latents,
        reference="answer_set",
    )
    assert rows["reference_labels"].tolist() == [["atlantic", "pacific ocean"]]
    assert json.loads(rows.loc[0, "label_matches"]) == {
        "atlantic ocean": {"answer": 0, "rule": "head_noun"},
        "pacific": {"answer": 1, "rule": "head_noun"},
    }
    assert rows.loc[0, "warnings"] == []
    # a space without labels has nothing to audit
    assert audit_rows(
        get_space("sphere"),
        _dataset("q", []),
        decisions.iloc[:0],
        latents.iloc[:0],
        reference="text",
    ).empty


def test_a_decision_without_a_latent_is_not_scored_but_an_empty_answer_set_is():
    """The paper discards answers no g_T can parse: a decision whose output has no latent
    ("null") gets no Hamming/F1 row (not a full loss), like KL and COMET; a parsed empty set is
    an answer and scores a full loss."""
    space = get_space("sets")
    decisions = pd.DataFrame(
        [
            {
                "prompt_id": "p",
                "method": "beam",
                "action": "null",
                "risk": float("nan"),
                "text": "?",
            },
            {
                "prompt_id": "p",
                "method": "greedy",
                "action": "[]",
                "risk": float("nan"),
                "text": "",
            },
            {"prompt_id": "p", "method": "bayes", "action": '["pacific"]', "risk": 0.1, "text": ""},
        ]
    )
    q = quality_rows(
        _dataset("Which oceans?", [["Pacific"]]),
        decisions,
        None,
        QualityScoring(space, ["f1", "hamming"], "answer_set"),
    )
    got = {(r.method, r.metric): r.value for r in q.itertuples()}
    assert got == {
        ("greedy", "f1"): 0.0,
        ("greedy", "hamming"): 1.0,
        ("bayes", "f1"): 1.0,
        ("bayes", "hamming"): 0.0,
    }
