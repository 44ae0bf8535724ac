"""`score(..., answers=...)`: how sure is THIS answer, given the sampled responses (uqlm's
question). Each given answer is read by the task's g_T like a response; its risk and confidence
under the samples are checked against a brute-force computation over the labels as read."""

from __future__ import annotations

import json
import random
import warnings

import pytest

from pipeline.scorer.readers import ScoreInputError
from pipeline.scorer.run import score

WORDS = ["alpha", "beta", "gamma", "delta"]


def _score(rows, task, answers, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return score(rows, task=task, answers=answers, **kwargs)


def _f1(a: set, b: set) -> float:
    return 1.0 if not a and not b else 2 * len(a & b) / (len(a) + len(b))


@pytest.mark.parametrize("seed", range(20))
def test_a_given_set_answers_risk_and_confidence_against_brute_force(seed):
    rng = random.Random(seed)

    def some() -> list[str]:
        return rng.sample(WORDS, rng.randint(1, 3))

    rows = [{"responses": [", ".join(some()) for _ in range(rng.randint(3, 7))]} for _ in range(3)]
    answers = [" and ".join(some()) for _ in rows]
    df = _score(rows, "sets", answers)
    for (_, r), given in zip(df.iterrows(), answers):
        labels = [set(x) for x in r["response_labels"]]
        answer = set(r["answer_labels"])
        assert answer == set(given.split(" and "))  # read like a response
        hamming = sum(len(answer ^ x) for x in labels) / len(labels)
        assert r["answer_risk"] == pytest.approx(hamming)
        assert r["answer_confidence"] == pytest.approx(
            sum(_f1(answer, x) for x in labels) / len(labels)
        )
        assert r["answer_risk"] >= r["bayes_risk"] - 1e-12  # the Bayes answer minimises it


@pytest.mark.parametrize("seed", range(10))
def test_a_given_class_answers_risk_is_the_share_of_samples_it_disagrees_with(seed):
    rng = random.Random(seed)
    cities = ["Paris", "Lyon", "Nice"]
    rows = [
        {"responses": [rng.choice(cities) for _ in range(rng.randint(3, 9))], "reference": "Paris"}
        for _ in range(3)
    ]
    answers = [rng.choice(cities) for _ in rows]
    df = _score(rows, "classes", answers)
    for (_, r), row, given in zip(df.iterrows(), rows, answers):
        agree = sum(t == given for t in row["responses"]) / len(row["responses"])
        assert r["answer_risk"] == pytest.approx(1 - agree)
        assert r["answer_confidence"] == pytest.approx(agree)
        assert r["quality_answer_exact_match_error"] == (0.0 if given == "Paris" else 1.0)


def test_answers_by_prompt_id_for_a_file_and_none_where_not_given(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "responses": ["Paris", "Paris", "Lyon"]}) + "\n"
            for i in range(3)
        )
    )
    df = _score(path, "classes", {"q1": "Lyon"}).set_index("prompt_id")
    assert df.loc["q1", "answer_risk"] == pytest.approx(2 / 3)
    assert df["answer_risk"].isna().tolist() == [True, False, True]
    # another set of answers on the same file: not served from the first one's cache
    again = _score(path, "classes", {"q1": "Paris"}, work_dir=tmp_path / "w")
    assert again.set_index("prompt_id").loc["q1", "answer_risk"] == pytest.approx(1 / 3)
    again = _score(path, "classes", {"q1": "Lyon"}, work_dir=tmp_path / "w")
    assert again.set_index("prompt_id").loc["q1", "answer_risk"] == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    "answers, said",
    [
        (["a", "b"], "answers= has 2 answers for 1 input rows"),
        ("Paris", "answers= takes a dict"),
    ],
)
def test_answers_that_cannot_be_matched_are_refused_before_any_work(answers, said):
    with pytest.raises(ScoreInputError, match=said):
        _score([["Paris", "Lyon"]], "classes", answers)


def test_baseline_estimators_from_the_api_kle_from_texts_and_a_warning_for_the_rest():
    """`estimators=` adds lm-polygraph's baselines: KLE reads the texts alone and gets a column
    and summary rows; semantic entropy needs log-probs the input lacks: NaN, and a warning
    saying what it reads. Unknown names are refused before any work."""
    rows = [
        {
            "question": f"Capital {i}?",
            "reference": "Paris",
            "responses": ["Paris", "Paris", "Lyon", "Nice"][: 2 + i % 3] + ["Paris"],
        }
        for i in range(6)
    ]
    with pytest.warns(
        UserWarning,
        match=r"semantic_entropy: no value for 6 of 6 prompts: it "
        r"reads each sample's log-prob",
    ):
        df = score(rows, task="classes", estimators=["kle", "semantic_entropy"])
    assert df["kle"].notna().all() and df["semantic_entropy"].isna().all()
    import pipeline

    uq, _ = pipeline.summaries(df)
    assert set(uq["estimator"]) == {"bayes_risk", "latent_entropy", "kle"}
    with pytest.raises(ScoreInputError, match=r"estimators=\['kel'\]: unknown kel; choose from"):
        score(rows, task="classes", estimators=["kel"])
