"""`pipeline.score` on data in memory: the four input forms give the rows a file gives, bad
entries are skipped and listed like bad lines, and the frame prints (its attrs are records)."""

import json
from pathlib import Path

import pandas as pd
import pytest

import pipeline
from pipeline.scorer.readers import ScoreInputError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "byo"
ROWS = [json.loads(line) for line in (EXAMPLES / "sets.jsonl").read_text().splitlines()]
KEEP = [
    "prompt_id",
    "bayes_action",
    "bayes_risk",
    "confidence",
    "latent_distribution",
    "quality_bayes_f1",
]


@pytest.fixture(scope="module")
def from_file(tmp_path_factory):
    return pipeline.score(EXAMPLES / "sets.jsonl", task="sets")


@pytest.mark.parametrize("form", ["records", "dataframe", "path_str"])
def test_every_form_gives_the_rows_of_the_file(from_file, form):
    data = {
        "records": ROWS,
        "dataframe": pd.DataFrame(ROWS),
        "path_str": str(EXAMPLES / "sets.jsonl"),
    }[form]
    got = pipeline.score(data, task="sets")
    pd.testing.assert_frame_equal(got[KEEP], from_file[KEEP])
    assert got.attrs["summary"] == from_file.attrs["summary"]


def test_lists_of_responses_are_prompts_numbered_from_zero(from_file):
    got = pipeline.score([r["responses"] for r in ROWS], task="sets")
    assert got["prompt_id"].tolist() == [str(i) for i in range(len(ROWS))]
    assert got["bayes_action"].tolist() == from_file["bayes_action"].tolist()
    assert got.attrs["summary"] is None  # no references: no quality


def test_a_scored_frame_prints_and_its_summaries_rebuild(from_file):
    text = repr(from_file) + from_file.to_string()  # pandas compares attrs while printing
    assert "bayes_risk" in text
    uq, quality = pipeline.scorer.run.summaries(from_file)
    assert set(uq["estimator"]) == {"bayes_risk", "latent_entropy"}
    assert {"metric", "method", "mean", "n"} <= set(quality.columns)


def test_a_bad_entry_is_skipped_and_listed_by_its_row():
    data = [{"responses": ["Paris"]}, {"responses": "Paris"}, {"responses": ["Lyon", "Lyon"]}]
    with pytest.warns(UserWarning, match="skipped 1 of 3"):
        got = pipeline.score(data, task="classes")
    assert got["prompt_id"].tolist() == ["0", "2"]
    assert got.attrs["skipped"][0]["row"] == 1


@pytest.mark.parametrize(
    "data, message",
    [
        ([], "is empty"),
        ({"responses": ["a"]}, "one dict"),
        ([{"responses": ["a"]}, ["a"]], "list of dict, list"),
        (42, "int"),
    ],
)
def test_data_of_the_wrong_shape_is_refused_with_the_fix(data, message):
    with pytest.raises(ScoreInputError, match=message):
        pipeline.score(data, task="classes")


def test_pipeline_score_is_a_function_and_its_cli_file_refuses_an_import():
    import importlib
    import inspect

    assert inspect.isfunction(pipeline.score)
    with pytest.raises(
        ImportError, match=r"pipeline.score is a function .* the scorer is pipeline.scorer"
    ):
        importlib.import_module("pipeline.score")  # would rebind the package attribute
    assert inspect.isfunction(pipeline.score)  # the failed import bound nothing
    got = pipeline.score([["a", "a", "b"]], task="classes")
    assert got["bayes_text"].tolist() == ["a"]


def test_a_config_edited_between_two_calls_is_composed_again(tmp_path):
    """The composed config is kept between calls (a notebook's second call costs ~0.1 s, not
    ~0.3 s more), but never past an edit of a config file."""
    import os

    from pipeline.scorer.run import score as score_rows

    task = tmp_path / "conf" / "task" / "mine.yaml"
    task.parent.mkdir(parents=True)
    body = (
        "defaults:\n  - /schema/task@_here_\nname: mine\nspace: classes\nmapper: classes\n"
        "reference: one_answer\nprompt: single_answer\nmetrics: [{}]\n"
    )
    task.write_text(body.format("exact_match_error"))
    rows = [{"responses": ["Paris", "Paris", "Lyon"], "reference": "Paris"}]
    first = score_rows(rows, task="mine", config_dirs=[tmp_path / "conf"])
    assert "quality_bayes_exact_match_error" in first
    task.write_text(body.format(""))  # no metric: no quality column
    st = task.stat()
    os.utime(task, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # a later edit, same second
    second = score_rows(rows, task="mine", config_dirs=[tmp_path / "conf"])
    assert not [c for c in second.columns if c.startswith("quality_")]


def test_the_api_requires_the_task_and_checks_options_before_any_request():
    """`pipeline.score(data)` scored as `sets` without a word (risk 0.667 where classes gives
    0.333); an option misspelt surfaced only after sampling."""
    import pipeline
    from pipeline.scorer.readers import ScoreInputError

    with pytest.raises(
        ScoreInputError,
        match=r"score: task= is required, e.g. task='classes' "
        r"\(tasks: classes, graphs, reals, sets",
    ):
        pipeline.score([["Paris", "Paris", "Lyon"]])
    with pytest.raises(
        TypeError,
        match=r"score: unknown option\(s\) mapperr; the options are "
        r"mapper, fmt",
    ):
        pipeline.score([["Paris"]], task="classes", mapperr="rule")
    # nothing listens on port 9: a request would fail with a connection error, not these
    with pytest.raises(ScoreInputError, match="generate_and_score: task= is required"):
        pipeline.generate_and_score(["q"], model="m", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(TypeError, match=r"generate_and_score: unknown option\(s\) overides"):
        pipeline.generate_and_score(
            ["q"], task="sets", model="m", base_url="http://127.0.0.1:9/v1", overides=["x=1"]
        )
