"""Input readers: field detection, the lm-evaluation-harness samples format, clear errors."""

import json
import subprocess
import sys

import pandas as pd
import pytest

from pipeline.scorer.readers import (
    FieldNames,
    ScoreInputError,
    parse_target,
    read_input,
    read_prompts,
)
from pipeline.scorer.run import reference_columns, score

from .conftest import EXAMPLES, LM_EVAL_FILE, REPO


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_generic_jsonl_fields_are_found_by_their_usual_names():
    prompts, fmt = read_prompts(EXAMPLES / "reals.jsonl")
    assert fmt == "jsonl"
    assert [p.prompt_id for p in prompts] == ["r1", "r2", "r3", "r4", "r5"]
    assert prompts[2].question.startswith("What is the boiling point")
    assert prompts[2].responses[0] == "212 \u00b0F"
    assert prompts[2].logprobs == [-1.2, -0.9, -2.0, -1.1, -3.5, -1.4]
    assert prompts[2].reference == 212


def test_lm_eval_samples_mapping():
    prompts, fmt = read_prompts(LM_EVAL_FILE)
    assert fmt == "lm-eval"  # detected from doc_id + resps
    first = prompts[0]
    assert first.prompt_id == "0"
    # question: doc["question"]; responses: resps[0], one string per repeat; reference: target
    assert (
        first.question == "Which American-born Sinclair won the Nobel Prize for Literature in 1930?"
    )
    assert first.responses == [
        " Sinclair Lewis",
        " Upton Sinclair",
        " Sinclair Lewis",
        " Sinclair Lewis",
        " Upton Sinclair",
    ]
    assert first.reference[:2] == ["Sinclair Lewis", "Lewis"]  # str(list) parsed back
    assert reference_columns("one_answer", first.reference, "0")["answers"] == [
        [
            "Sinclair Lewis",
            "Lewis",
            "Harry Sinclair Lewis",
            "Harry Lewis",
            "Grace Hegger",
            "Sinclair lewis",
        ]
    ]


def test_lm_eval_filtered_resps_and_other_fields():
    prompts, _ = read_prompts(
        LM_EVAL_FILE,
        fields=FieldNames(
            responses="filtered_resps",
            question="arguments.gen_args_0.arg_0",
            reference="doc.answer.value",
        ),
    )
    assert prompts[1].responses == ["York"]  # take_first kept one repeat
    assert prompts[1].question == "Question: Where in England was Dame Judi Dench born?\nAnswer:"
    assert prompts[1].reference == "York"


def test_lm_eval_several_filters_keep_one(tmp_path):
    rows = [json.loads(line) for line in LM_EVAL_FILE.read_text().splitlines()]
    other = [dict(r, filter="strict-match", resps=[["x"] * 5]) for r in rows]
    path = write_jsonl(tmp_path / "samples_t.jsonl", rows + other)
    first, _ = read_prompts(path)
    assert len(first) == 5 and first[0].responses[0] == " Sinclair Lewis"
    chosen, _ = read_prompts(path, fields=FieldNames(lm_eval_filter="strict-match"))
    assert chosen[0].responses == ["x"] * 5
    with pytest.raises(ScoreInputError, match="filters present: remove_whitespace, strict-match"):
        read_prompts(path, fields=FieldNames(lm_eval_filter="flexible"))


def test_parse_target():
    assert parse_target("['a', \"b\"]") == ["a", "b"]
    assert parse_target('{"x": 0.5}') == {"x": 0.5}
    assert parse_target("[not a list") == "[not a list"
    assert parse_target("Paris") == "Paris"
    deep = "[" * 900 + "]" * 900  # literal_eval reads it; nesting past MAX_DEPTH keeps the text
    assert parse_target(deep) == deep
    assert parse_target('["half \\ud83d"]') == ["half \ufffd"]


def test_parquet_reader_matches_jsonl(tmp_path):
    rows = [json.loads(line) for line in (EXAMPLES / "reals.jsonl").read_text().splitlines()]
    for r in rows:  # a parquet column has one type: references as text
        r["reference"] = str(r["reference"])
    pd.DataFrame(rows).to_parquet(tmp_path / "reals.parquet")
    a, _ = read_prompts(EXAMPLES / "reals.jsonl")
    b, fmt = read_prompts(tmp_path / "reals.parquet")
    assert fmt == "parquet"
    assert [(p.prompt_id, p.question, p.responses, p.logprobs) for p in a] == [
        (p.prompt_id, p.question, p.responses, p.logprobs) for p in b
    ]


# ---- errors: each names the problem and the fix


def test_missing_responses_field_lists_fields_present(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [{"question": "q", "answers_given": ["a"]}])
    with pytest.raises(
        ScoreInputError,
        match=r"no responses field.*fields present: "
        r"answers_given, question.*--responses-field",
    ):
        read_prompts(path)


def test_named_field_missing(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [{"question": "q", "responses": ["a"]}])
    with pytest.raises(
        ScoreInputError,
        match=r"'outs' \(--responses-field\) is in no row; "
        r"fields present: question, responses",
    ):
        read_prompts(path, fields=FieldNames(responses="outs"))


def test_field_missing_in_a_later_row(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [{"responses": ["a"]}, {"text": ["b"]}])
    with pytest.raises(
        ScoreInputError,
        match="line 2: no responses field 'responses' "
        r"\(fields present: text\)",
    ):
        read_prompts(path)  # strict
    got = read_input(path)  # lenient: the good row is read, the bad one listed
    assert [p.responses for p in got.prompts] == [["a"]]
    assert [(p.line, p.field) for p in got.skipped] == [(2, "responses")]


def test_empty_file(tmp_path):
    (tmp_path / "e.jsonl").write_text("\n\n")
    with pytest.raises(ScoreInputError, match="is empty"):
        read_prompts(tmp_path / "e.jsonl")


def test_unparseable_file(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"responses": ["a"]}\n{"responses": [\n')
    with pytest.raises(ScoreInputError, match="line 2: not valid JSON"):
        read_prompts(tmp_path / "bad.jsonl")
    (tmp_path / "bad.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(ScoreInputError, match="cannot be read as parquet"):
        read_prompts(tmp_path / "bad.parquet")


def test_responses_must_be_a_list(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [{"responses": "Paris"}])
    with pytest.raises(
        ScoreInputError, match="line 1: field .responses. is one string; make it the list"
    ):
        read_prompts(path)


def test_logprobs_length_and_sign(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [{"responses": ["a", "b"], "logprobs": [-1.0]}])
    with pytest.raises(ScoreInputError, match="has 1 entries for 2 responses"):
        read_prompts(path)
    path = write_jsonl(tmp_path / "y.jsonl", [{"responses": ["a"], "logprobs": [0.7]}])
    with pytest.raises(ScoreInputError, match="must be <= 0"):
        read_prompts(path)


def test_duplicate_ids(tmp_path):
    path = write_jsonl(
        tmp_path / "x.jsonl", [{"id": 1, "responses": ["a"]}, {"id": 1, "responses": ["b"]}]
    )
    with pytest.raises(ScoreInputError, match="lines 1 and 2 share the id '1'"):
        read_prompts(path)
    with pytest.raises(ScoreInputError, match="lines 1 and 2 share the id '1'"):
        read_input(path)  # not a row problem: which of the two rows is right cannot be told


def test_wrong_task_lists_valid_ones():
    with pytest.raises(
        ScoreInputError,
        match=r"did you mean --task sets\? \(tasks: classes, "
        r"graphs, reals, sets, sets_fbeta, simplex, sphere\)",
    ):
        score(EXAMPLES / "sets.jsonl", task="set")


def test_bad_reference_shape():
    with pytest.raises(ScoreInputError, match="prompt 'p': reference must be a non-empty object"):
        reference_columns("distribution", ["a", "b"], "p")
    with pytest.raises(ScoreInputError, match="holds no number"):
        reference_columns("number", "unknown", "p")


def test_cli_errors_exit_2_without_traceback(tmp_path):
    (tmp_path / "e.jsonl").write_text("")
    cases = [
        (["--task", "sets", str(tmp_path / "e.jsonl")], "is empty"),
        (["--task", "bogus", str(EXAMPLES / "sets.jsonl")], "--task 'bogus' is not known"),
        (["--task", "sets", str(tmp_path / "missing.jsonl")], "does not exist"),
        (
            ["--task", "sets", "--responses-field", "outs", str(EXAMPLES / "sets.jsonl")],
            "fields present: id, question, reference, responses",
        ),
    ]
    for argv, message in cases:
        res = subprocess.run(
            [sys.executable, "-m", "pipeline.score", *argv],
            cwd=REPO,
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert res.returncode == 2, res.stderr
        assert message in res.stderr
        assert "Traceback" not in res.stderr
