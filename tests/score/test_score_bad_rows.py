"""Bad input rows: `pipeline.score` scores every good row and lists the bad ones (line, field,
problem, fix) instead of stopping at the first; `--strict` stops at the first bad line; file-level
problems are one `error:` line with exit code 2; no input ever shows a traceback.

Real files are written to tmp_path; the command line runs as a subprocess where the exit code and
stderr matter. Expected values are worked out by hand from the files written here.
"""

import json
import math
import os
import subprocess
import sys

import pandas as pd
import pytest

from pipeline.scorer.readers import (
    MAX_DEPTH,
    MAX_ID_CHARS,
    FieldNames,
    ScoreInputError,
    read_input,
    read_prompts,
)
from pipeline.scorer.run import score

from .conftest import EXAMPLES, REPO

NO_MERGE = "task.extractor.merge_labels=false"
ENTROPY_2_1 = -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3))


def cli(*argv, timeout=300):
    res = subprocess.run(
        [sys.executable, "-m", "pipeline.score", *map(str, argv)],
        cwd=REPO,
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert "Traceback" not in res.stderr, res.stderr
    return res


def line(obj) -> bytes:
    return (json.dumps(obj) + "\n").encode()


def good(k: int) -> bytes:
    """A reals prompt: k, k, k + 3 -> Bayes action (l1 median) k, risk 3/3 = 1, reference k."""
    return line(
        {
            "id": f"g{k}",
            "question": f"q{k}",
            "responses": [str(10 + k), str(10 + k), str(13 + k)],
            "reference": 10 + k,
        }
    )


# 18 kinds of bad rows: (the bytes of the line, the field reported, a piece of the problem)
BAD = [
    (b'{"id": "b", "responses": ["1"\n', None, "not valid JSON"),
    (line({"id": "b", "responses": "12"}), "responses", "field 'responses' is one string"),
    (line({"id": "b", "question": "no responses here"}), "responses", "no responses field"),
    (line({"id": "b", "responses": ["1"], "logprobs": [0.5]}), "logprobs", "holds 0.5"),
    (
        line({"id": "b", "responses": ["1", "2"], "logprobs": [-1.0]}),
        "logprobs",
        "has 1 entries for 2 responses",
    ),
    (
        b'{"id": "b", "responses": ' + b"[" * 20000 + b"]" * 20000 + b"}\n",
        None,
        "nested too deeply for the JSON parser",
    ),
    (
        line({"id": "b", "responses": ["1"], "meta": json.loads("[" * 150 + "]" * 150)}),
        "meta",
        f"nested more than {MAX_DEPTH} levels deep (in field 'meta')",
    ),
    (b'{"id": ' + b"7" * 5001 + b', "responses": ["1"]}\n', "id", "id is a 5001-digit number"),
    (
        line({"id": "x" * (MAX_ID_CHARS + 1), "responses": ["1"]}),
        "id",
        f"id has {MAX_ID_CHARS + 1} characters",
    ),
    (line({"id": ["a", "b"], "responses": ["1"]}), "id", "id is a list"),
    (b'{"id": "b", "responses": ["caf\xe9"]}\n', None, "not UTF-8 text (byte 0xE9 at byte 31"),
    (line([1, 2, 3]), None, "is a JSON list, not an object"),
    (
        line({"id": "b", "responses": ["1"], "reference": "unknown"}),
        "reference",
        "reference 'unknown' holds no number",
    ),
    # rows the reliability audit found scored as if valid (stringified or read as no answer)
    (line({"id": "b", "responses": []}), "responses", "field 'responses' is an empty list"),
    (
        line({"id": "b", "responses": [1, 2, None]}),
        "responses",
        "response 2 of field 'responses' is null",
    ),
    (
        line({"id": "b", "responses": [["1", "2"], "3"]}),
        "responses",
        "response 0 of field 'responses' is a list",
    ),
    (line({"id": "b", "responses": ["1", True]}), "responses", "is a boolean"),
    (
        line({"id": "b", "responses": ["1"], "reference": [1, 2]}),
        "reference",
        "is a list of 2 values; give the one true value",
    ),
]


def write_mixed(path) -> tuple[list[str], dict[int, tuple]]:
    """20 good rows and 200 bad ones (every kind of BAD in turn), the first bad one on line 6,
    a blank line (line 10) that counts as a line but not as a row. Returns the good ids and the
    bad lines (line -> (field, problem)). scripts/chaos.py scores the same file."""
    lines, good_ids, bad = [], [], {}
    for k in range(5):
        lines.append(good(k))
        good_ids.append(f"g{k}")
    for b in range(200):
        if len(lines) + 1 == 10:
            lines.append(b"\n")
        data, field, problem = BAD[b % len(BAD)]
        lines.append(data)
        bad[len(lines)] = (field, problem)
        if b % 13 == 12 and len(good_ids) < 20:
            lines.append(good(len(good_ids)))
            good_ids.append(f"g{len(good_ids)}")
    while len(good_ids) < 20:
        lines.append(good(len(good_ids)))
        good_ids.append(f"g{len(good_ids)}")
    path.write_bytes(b"".join(lines))
    return good_ids, bad


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """The `write_mixed` file: its path, the good ids and the bad lines."""
    path = tmp_path_factory.mktemp("mixed") / "mixed.jsonl"
    good_ids, bad = write_mixed(path)
    assert min(bad) == 6 and len(bad) == 200 and len(good_ids) == 20
    return path, good_ids, bad


def test_200_bad_lines_score_the_good_rows_and_list_every_bad_one(mixed, tmp_path, overrides):
    path, good_ids, bad = mixed
    out = tmp_path / "res.parquet"
    with pytest.warns(UserWarning, match=r"skipped 200 of 220 input rows with problems") as rec:
        df = score(path, "reals", out=out, overrides=overrides)
    assert df["prompt_id"].tolist() == good_ids
    assert df["n_samples"].tolist() == [3] * 20 and df["n_parsed"].tolist() == [3] * 20
    assert list(df["bayes_action"]) == [10.0 + k for k in range(20)]
    assert df["bayes_risk"].tolist() == [1.0] * 20
    assert df["latent_entropy"].tolist() == pytest.approx([ENTROPY_2_1] * 20, rel=1e-12)
    assert df["quality_bayes_abs_error"].tolist() == [0.0] * 20

    skipped = df.attrs["skipped"]
    assert [s["line"] for s in skipped] == sorted(bad)
    for s in skipped:
        field, problem = bad[s["line"]]
        assert s["field"] == field and problem in s["problem"], s
        assert s["row"] is None and s["fix"]
    assert df.attrs["n_rows"] == 220
    # every skipped row is written next to the output, in the same order
    listed = [json.loads(x) for x in (tmp_path / "res.skipped.jsonl").read_text().splitlines()]
    assert listed == skipped
    assert df.attrs["skipped_path"] == str(tmp_path / "res.skipped.jsonl")
    # the warning shows the first 10 with their line numbers, then how many more
    text = next(str(w.message) for w in rec if "skipped 200" in str(w.message))
    shown = [int(x.split(":")[0].split()[1]) for x in text.splitlines()[1:11]]
    assert shown == sorted(bad)[:10]
    assert text.splitlines()[11] == "  ... and 190 more"
    assert str(tmp_path / "res.skipped.jsonl") in text.splitlines()[0]


def test_200_bad_lines_on_the_command_line(mixed, tmp_path):
    path, good_ids, bad = mixed
    out = tmp_path / "res.jsonl"
    res = cli(
        path,
        "--task",
        "reals",
        "--out",
        out,
        "-q",
        "evaluation.n_bootstrap=20",
        f"cache_dir={tmp_path / 'cache'}",
    )
    assert res.returncode == 0, res.stderr
    assert "warning: skipped 200 of 220 input rows with problems" in res.stderr
    first = sorted(bad)[:10]
    for lineno in first:
        assert f"\n  line {lineno}: " in res.stderr
    assert f"\n  line {sorted(bad)[10]}: " not in res.stderr  # only the first 10 are printed
    assert "  ... and 190 more" in res.stderr
    assert "scored 20 prompts, 60 responses, 60 parsed" in res.stdout
    assert "skipped 200 of 220 input rows" in res.stdout
    assert str(tmp_path / "res.skipped.jsonl") in res.stdout  # in the "wrote ..." line
    assert pd.read_json(out, lines=True)["prompt_id"].tolist() == good_ids
    listed = pd.read_json(tmp_path / "res.skipped.jsonl", lines=True)
    assert listed["line"].tolist() == sorted(bad)


@pytest.mark.parametrize(
    "task, reference, problem",
    [
        ("sets", {"answer": "Pacific"}, "must be a list of correct answers"),
        ("sets", [["Pacific", ["Atlantic"]]], "holds list ['Atlantic'] where an answer's name"),
        ("classes", {"answer": "Paris"}, "holds dict"),
        ("simplex", {"": 1.0}, "has an empty answer label"),
    ],
)
def test_references_that_would_be_read_as_their_repr_are_refused(
    tmp_path, overrides, task, reference, problem
):
    path = tmp_path / "in.jsonl"
    path.write_text(
        json.dumps(
            {
                "id": "ok",
                "question": "q?",
                "responses": ["Paris", "Paris"],
                "reference": "Paris" if task != "simplex" else {"Paris": 1},
            }
        )
        + "\n"
        + json.dumps(
            {"id": "bad", "question": "q?", "responses": ["Paris"], "reference": reference}
        )
        + "\n"
    )
    with pytest.warns(UserWarning, match="skipped 1 of 2 input rows"):
        df = score(path, task, overrides=overrides)
    assert df["prompt_id"].tolist() == ["ok"]
    [skipped] = df.attrs["skipped"]
    assert skipped["field"] == "reference" and problem in skipped["problem"], skipped


def test_strict_stops_at_the_first_bad_line(mixed, tmp_path, overrides):
    path, _, bad = mixed
    assert min(bad) == 6 and bad[6] == (BAD[0][1], BAD[0][2])  # line 6: the first bad one
    with pytest.raises(
        ScoreInputError,
        match=r"mixed\.jsonl: line 6: .*--strict stops at the "
        r"first bad row",
    ):
        score(path, "reals", overrides=overrides, strict=True)
    res = cli(path, "--task", "reals", "--strict", "--out", tmp_path / "s.parquet")
    assert res.returncode == 2
    assert res.stderr.startswith("error: ") and f"mixed.jsonl: line 6: {BAD[0][2]}" in res.stderr
    assert res.stderr.count("\n") == 1  # one line
    assert not (tmp_path / "s.parquet").exists() and not (tmp_path / "s.work").exists()


def test_strict_reports_the_lowest_line_whatever_the_check(tmp_path):
    # the reference problem (line 2) is found after reading, the JSON one (line 3) while reading
    path = tmp_path / "x.jsonl"
    path.write_bytes(
        good(0) + line({"id": "r", "responses": ["1"], "reference": "none"}) + b"{oops\n" + good(1)
    )
    with pytest.raises(ScoreInputError, match="x.jsonl: line 2: reference 'none' holds no number"):
        score(path, "reals", strict=True)


# ---- single kinds of problem, one at a time


def test_lone_surrogates_are_replaced_and_counted_through_the_whole_scorer(tmp_path, overrides):
    # a truncated LLM output ends inside a surrogate pair; a complete pair is an emoji and stays
    rows = [
        (
            '{"id": "p1\\ud800", "question": "Primary colours?\\udfff", "reference": ["red", "blue"],'
            ' "responses": ["red, blue", "red, blue\\ud83d", "red", "red, blue \\ud83d\\ude00",'
            ' "\\udc00"]}'
        ),
        (
            '{"id": "p2", "question": "Ocean?", "reference": ["Pacific"],'
            ' "responses": ["Pacific", "Pacific", "Atlantic"]}'
        ),
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="ascii")  # the escapes are plain ASCII
    got = read_input(path)
    p1 = got.prompts[0]
    assert p1.prompt_id == "p1\ufffd" and p1.question == "Primary colours?\ufffd"
    assert p1.responses[1] == "red, blue\ufffd" and p1.responses[4] == "\ufffd"
    assert p1.responses[3] == "red, blue \U0001f600"
    assert got.replaced_surrogates == {"line 1": 4} and got.skipped == []

    with pytest.warns(
        UserWarning,
        match=r"replaced 4 lone surrogate\(s\) .* by U\+FFFD in 1 "
        r"row\(s\): line 1",
    ):
        df = score(path, "sets", out=tmp_path / "s.parquet", overrides=overrides + [NO_MERGE])
    assert df.attrs["replaced_surrogates"] == 4
    assert df["prompt_id"].tolist() == ["p1\ufffd", "p2"]
    # "\ufffd" alone (all that is left of a truncated answer) holds no label: not parsed. Of the
    # 4 others, red is in all; "blue", "blue\ufffd" and "blue \U0001F600" are one label (symbols
    # are not part of a name's identity). The unread one counts as "no answer" (the empty set,
    # reading.unreadable=no_answer): p(red) = 4/5, p(blue) = 3/5, {blue, red}, risk 1/5 + 2/5
    assert df.loc[0, "n_parsed"] == 4 and df.loc[0, "n_no_answer"] == 1
    assert df.loc[0, "bayes_action"] == {"blue", "red"}
    assert df.loc[0, "bayes_risk"] == pytest.approx(3 / 5)
    back = pd.read_parquet(tmp_path / "s.parquet")
    assert back["prompt_id"].tolist() == ["p1\ufffd", "p2"]
    assert back["question"].tolist() == ["Primary colours?\ufffd", "Ocean?"]
    for suffix in (".jsonl", ".csv"):
        res = cli(
            path,
            "--task",
            "sets",
            "--out",
            tmp_path / f"t{suffix}",
            "-q",
            NO_MERGE,
            "evaluation.n_bootstrap=20",
            f"cache_dir={tmp_path / 'cache'}",
        )
        assert res.returncode == 0, res.stderr
        assert "replaced 4 lone surrogate(s)" in res.stderr
        text = (tmp_path / f"t{suffix}").read_bytes().decode("utf-8")  # valid UTF-8
        assert "p1\ufffd" in text and "\\ud800" not in text
    res = cli(
        path,
        "--task",
        "sets",
        "-q",
        NO_MERGE,
        "evaluation.n_bootstrap=20",
        f"cache_dir={tmp_path / 'cache'}",
    )  # printed to stdout
    assert res.returncode == 0 and "p1\ufffd" in res.stdout


def test_nesting_limit(tmp_path):
    # the row is level 0, so a field may hold MAX_DEPTH - 1 nested lists
    ok = {
        "id": "ok",
        "responses": ["1"],
        "meta": json.loads("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)),
    }
    deep = dict(ok, id="deep", meta=json.loads("[" * MAX_DEPTH + "]" * MAX_DEPTH))
    path = tmp_path / "d.jsonl"
    path.write_bytes(
        line(ok) + line(deep) + b'{"responses": ' + b"[" * 100000 + b"]" * 100000 + b"}\n"
    )
    got = read_input(path)
    assert [p.prompt_id for p in got.prompts] == ["ok"]
    assert [(p.line, p.id, p.field) for p in got.skipped] == [(2, "deep", "meta"), (3, None, None)]
    assert got.skipped[0].problem == f"nested more than {MAX_DEPTH} levels deep (in field 'meta')"
    assert got.skipped[1].problem == "nested too deeply for the JSON parser"
    res = cli(path, "--task", "reals", "-q", "--strict")
    assert res.returncode == 2 and "d.jsonl: line 2: nested more than" in res.stderr


def test_huge_numbers_and_odd_ids(tmp_path):
    path = tmp_path / "ids.jsonl"
    path.write_bytes(
        b'{"id": '
        + b"9" * 5001
        + b', "responses": ["1"]}\n'  # line 1
        + b'{"id": "'
        + b"9" * 5001
        + b'", "responses": ["1"]}\n'  # line 2
        + line({"id": "x" * MAX_ID_CHARS, "responses": ["1"]})  # 3: fine
        + line({"id": True, "responses": ["1"]})  # 4
        + line({"id": "", "responses": ["1"]})  # 5
        + line({"id": "a\nb", "responses": ["1"]})  # 6
        + line({"id": {"k": 1}, "responses": ["1"]})  # 7
        + line({"id": 12, "responses": ["1"]})  # 8: fine
        + b'{"id": "big", "responses": ["1"], "logprobs": [-'
        + b"1" * 5001
        + b"]}\n"  # 9: -inf
        + b'{"id": "big2", "responses": ["1"], "logprobs": ['
        + b"1" * 5001
        + b"]}\n"  # 10
        + line({"id": "lp", "responses": ["1"], "logprobs": [True]})  # 11
        + line({"id": "lp2", "responses": ["1"], "logprobs": [["a"]]})
    )  # 12
    got = read_input(path)
    assert [p.prompt_id for p in got.prompts] == ["x" * MAX_ID_CHARS, "12", "big"]
    assert got.prompts[2].logprobs == [-math.inf]  # a log-prob beyond float range: probability 0
    assert [(p.line, p.problem) for p in got.skipped] == [
        (1, "id is a 5001-digit number"),
        (2, "id has 5001 characters"),
        (4, "id is a boolean (True)"),
        (5, "id is empty"),
        (6, "id 'a\\nb' holds control characters (newline, tab, ...)"),
        (7, "id is a dict ({'k': 1})"),
        (10, "field 'logprobs' holds inf at position 0"),
        (11, "field 'logprobs' holds True at position 0, not a number"),
        (12, "field 'logprobs' holds ['a'] at position 0, not a number"),
    ]
    assert got.skipped[0].fix == f"ids are strings or integers of at most {MAX_ID_CHARS} characters"
    res = cli(path, "--task", "reals", "--strict")
    assert res.returncode == 2 and "line 1: id is a 5001-digit number" in res.stderr


def test_utf8_bom_is_accepted(tmp_path, overrides):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + good(0) + good(1) + b"\xef\xbb\xbf" + good(2))  # + a cat
    got = read_input(path)
    assert [p.prompt_id for p in got.prompts] == ["g0", "g1", "g2"] and got.skipped == []
    df = score(path, "reals", overrides=overrides)
    assert df["bayes_risk"].tolist() == [1.0, 1.0, 1.0] and df.attrs["skipped"] == []


def test_non_utf8_byte_names_its_line_and_does_not_suggest_parquet(tmp_path):
    path = tmp_path / "latin.jsonl"
    path.write_bytes(
        good(0) + good(1) + b"\n" + b'{"id": "x", "responses": ["Z\xfcrich"]}\n' + good(2)
    )
    got = read_input(path)
    assert [p.prompt_id for p in got.prompts] == ["g0", "g1", "g2"]
    (problem,) = got.skipped
    assert problem.line == 4
    assert problem.problem == (
        "not UTF-8 text (byte 0xFC at byte 29 of the line: invalid start byte)"
    )
    assert problem.fix == "save the file as UTF-8, e.g. iconv -f latin1 -t utf-8 IN > OUT"
    res = cli(path, "--task", "reals", "--strict")
    assert res.returncode == 2
    assert "latin.jsonl: line 4: not UTF-8 text (byte 0xFC" in res.stderr
    assert "parquet" not in res.stderr
    # a whole file in latin-1: no row to score, one error line naming line 1, no parquet hint
    path.write_bytes(b'{"responses": ["Z\xfcrich"]}\n' * 3)
    res = cli(path, "--task", "reals")
    assert res.returncode == 2 and "parquet" not in res.stderr
    assert res.stderr == (
        f"error: {path}: no row can be scored (3 of 3 rows have problems); the "
        "first: line 1: not UTF-8 text (byte 0xFC at byte 18 of the line: "
        "invalid start byte); save the file as UTF-8, e.g. iconv -f latin1 -t "
        "utf-8 IN > OUT\n"
    )


def test_a_parquet_file_named_jsonl_is_recognised(tmp_path):
    pd.DataFrame({"responses": [["1", "2"]]}).to_parquet(tmp_path / "p.jsonl")
    res = cli(tmp_path / "p.jsonl", "--task", "reals")
    assert res.returncode == 2
    assert (
        "this is a parquet file (it starts with PAR1), not JSON Lines; pass --format parquet"
        in res.stderr
    )


def test_parquet_bad_rows_are_numbered_like_pandas(tmp_path):
    df = pd.DataFrame(
        {
            "id": ["a", "b", "c", "d"],
            "responses": [["1"], None, ["2", "3"], ["4"]],
            "logprobs": [[-1.0], None, [-0.5, -0.25], [0.5]],
        }
    )
    df.to_parquet(tmp_path / "x.parquet")
    got = read_input(tmp_path / "x.parquet")
    assert [p.prompt_id for p in got.prompts] == ["a", "c"]
    assert [(p.row, p.line, p.id, p.field) for p in got.skipped] == [
        (1, None, "b", "responses"),
        (3, None, "d", "logprobs"),
    ]
    assert got.skipped[0].message() == (
        "row 1: field 'responses' is a null; make it the list of the M sampled responses (strings)"
    )


def test_parquet_gaps_in_an_integer_id_column_fall_back_to_the_row_number(tmp_path):
    pd.DataFrame({"id": [7, None, 9], "responses": [["1"], ["2"], ["3"]]}).to_parquet(
        tmp_path / "x.parquet"
    )  # pandas stores 7.0, NaN, 9.0
    got = read_input(tmp_path / "x.parquet")
    assert [p.prompt_id for p in got.prompts] == ["7.0", "1", "9.0"]
    with pytest.raises(ScoreInputError, match="row 1: no id \\(field 'id' is null\\)"):
        read_prompts(tmp_path / "x.parquet", fields=FieldNames(id="id"))


def test_lm_eval_file_with_bad_lines(tmp_path):
    rows = [
        json.loads(x)
        for x in (EXAMPLES / "samples_triviaqa_2025-06-01T12-00-00.000000.jsonl")
        .read_text()
        .splitlines()
    ]
    del rows[2]["doc_id"]
    del rows[3]["resps"]
    text = "\n".join(json.dumps(r) for r in rows).splitlines()
    text.insert(1, '{"doc_id": 99, "resps": [[')
    path = tmp_path / "samples_t.jsonl"
    path.write_text("\n".join(text) + "\n")
    got = read_input(path)
    assert got.format == "lm-eval"
    assert [p.prompt_id for p in got.prompts] == ["0", "1", "4"]
    assert [(p.line, p.field, p.problem) for p in got.skipped] == [
        (2, None, "not valid JSON (Expecting value at column 27)"),
        (4, "doc_id", "no id (field 'doc_id' is missing)"),
        (
            5,
            "resps",
            (
                "no 'resps' field (fields present: arguments, doc, doc_hash, doc_id, "
                "exact_match, filter, filtered_resps, metrics, prompt_hash, target, "
                "target_hash)"
            ),
        ),
    ]


def test_file_level_problems_stay_errors(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(line({"question": "q", "outputs_": ["a"]}) + b"{bad\n")
    with pytest.raises(
        ScoreInputError,
        match=r"no responses field in any row \(looked for "
        r"responses, samples, generations, outputs, "
        r"completions\); fields present: outputs_, question",
    ):
        read_input(path)
    path.write_bytes(good(0) + good(0))
    with pytest.raises(ScoreInputError, match="lines 1 and 2 share the id 'g0'"):
        read_input(path)
    (tmp_path / "u16.jsonl").write_bytes('{"responses": ["a"]}\n'.encode("utf-16"))
    with pytest.raises(ScoreInputError, match="UTF-16 text"):
        read_input(tmp_path / "u16.jsonl")


def test_no_good_row_lists_all_problems_next_to_out(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"{x\n" + line({"responses": "a"}) + line([1]))
    out = tmp_path / "r.csv"
    res = cli(path, "--task", "reals", "--out", out)
    assert res.returncode == 2
    assert res.stderr == (
        f"error: {path}: no row can be scored (3 of 3 rows have problems); the "
        "first: line 1: not valid JSON (Expecting property name enclosed in "
        "double quotes at column 2); each line must hold one complete JSON "
        f"object (JSON Lines) (all 3 problems in {tmp_path / 'r.skipped.jsonl'})\n"
    )
    listed = pd.read_json(tmp_path / "r.skipped.jsonl", lines=True)
    assert listed["line"].tolist() == [1, 2, 3] and not out.exists()


def test_stale_skipped_list_is_removed_when_the_file_is_fixed(tmp_path, overrides):
    path, out = tmp_path / "x.jsonl", tmp_path / "r.parquet"
    path.write_bytes(good(0) + b"{oops\n")
    with pytest.warns(UserWarning, match="skipped 1 of 2"):
        score(path, "reals", out=out, overrides=overrides)
    assert (tmp_path / "r.skipped.jsonl").exists()
    path.write_bytes(good(0))
    df = score(path, "reals", out=out, overrides=overrides)
    assert df.attrs["skipped"] == [] and not (tmp_path / "r.skipped.jsonl").exists()


# ---- the output path is checked before any work


def _no_work_done(tmp_path, *names):
    return not any((tmp_path / n).exists() for n in names)


def test_unwritable_out_is_reported_before_scoring(tmp_path):
    src = EXAMPLES / "reals.jsonl"
    (tmp_path / "adir.parquet").mkdir()
    (tmp_path / "afile").write_text("x")
    cases = [
        (
            tmp_path / "adir.parquet",
            f"--out {tmp_path / 'adir.parquet'} is a directory; give a file name",
        ),
        (
            tmp_path / "afile" / "r.parquet",
            f"--out {tmp_path / 'afile' / 'r.parquet'}: {tmp_path / 'afile'} is a file, not a directory",
        ),
        ("/proc/score-out.parquet", "--out /proc/score-out.parquet: cannot write in /proc"),
        (tmp_path / "r.txt", "unknown suffix '.txt'; use .parquet, .jsonl or .csv"),
        (src, "is the input file; writing it would destroy the input"),
    ]
    for out, message in cases:
        res = cli(src, "--task", "reals", "--out", out)
        assert res.returncode == 2, (out, res.stderr)
        assert res.stderr.startswith("error: ") and message in res.stderr, res.stderr
        assert res.stderr.count("\n") == 1 and res.stdout == ""
    assert _no_work_done(tmp_path, "adir.work", "r.work", "afile.work")
    res = cli(src, "--task", "reals", "--work-dir", tmp_path / "afile" / "w")
    assert res.returncode == 2
    assert res.stderr == (
        f"error: --work-dir {tmp_path / 'afile' / 'w'}: {tmp_path / 'afile'} is "
        "a file, not a directory; choose another place\n"
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through directory permissions")
def test_read_only_directory_out(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        res = cli(EXAMPLES / "reals.jsonl", "--task", "reals", "--out", ro / "r.parquet")
    finally:
        ro.chmod(0o700)
    assert res.returncode == 2 and "Permission denied" in res.stderr


def test_no_traceback_for_any_bad_input(tmp_path):
    """Every kind of bad row alone in a file, plus the same file with --strict: exit code 2 and
    one error line; with one good row added: exit code 0 and the row listed."""
    for i, (data, _, problem) in enumerate(BAD):
        alone = tmp_path / f"alone{i}.jsonl"
        alone.write_bytes(data)
        for extra in ([], ["--strict"]):
            res = cli(alone, "--task", "reals", *extra)
            assert res.returncode == 2, res.stderr
            assert problem in res.stderr and res.stderr.count("\n") == 1, res.stderr
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_bytes(good(0) + b"".join(d for d, _, _ in BAD))
    res = cli(
        mixed,
        "--task",
        "reals",
        "-q",
        "evaluation.n_bootstrap=10",
        f"cache_dir={tmp_path / 'cache'}",
    )
    assert res.returncode == 0, res.stderr
    assert f"skipped {len(BAD)} of {len(BAD) + 1} input rows" in res.stderr


def test_an_endpoint_outage_is_one_error_line_not_a_traceback(tmp_path):
    """`--mapper llm` against a real loopback server that answers every call with 503: the map
    stage fails its calls (none stored), the command says so in one line and exits 2."""
    sys.path.insert(0, str(REPO / "scripts"))
    from openai_stand_in import FakeOpenAIServer

    path = tmp_path / "in.jsonl"
    path.write_text(
        json.dumps(
            {
                "id": "q",
                "question": "Which oceans border the USA?",
                "responses": ["Atlantic and Pacific", "Pacific"],
            }
        )
        + "\n"
    )
    with FakeOpenAIServer() as server:
        server.state.faults = [503] * 50
        res = cli(
            path,
            "--task",
            "sets",
            "--mapper",
            "llm",
            f"task.extractor.base_url={server.base_url}",
            "task.extractor.max_retries=0",
            f"cache_dir={tmp_path / 'cache'}",
            "--work-dir",
            tmp_path / "work",
        )
    assert res.returncode == 2, res.stderr
    [error] = [x for x in res.stderr.splitlines() if x.startswith("error:")]
    assert (
        "calls to gpt-4.1-mini failed after retries" in error and "rerun once the endpoint" in error
    )


def test_rows_with_nothing_to_clean_are_read_as_the_cleaning_walk_reads_them(tmp_path):
    # the reader skips the walk for a line with no surrogate escape and few brackets: its rows
    # must equal the walked ones, with the walk still taken where there is something to clean
    from pipeline.scorer.readers import _Cleaner

    rows = [
        {
            "id": "a",
            "question": "Primary colours?",
            "responses": ["red", "blue\u00e9 \U0001f600"],
            "reference": [["red"], ["blue", "azure"]],
            "meta": {"k": [1, 2.5, None, True, 10**30]},
        },
        {"id": "b", "responses": ["\\ud800 is text, not an escape"], "reference": "x"},
    ]
    path = tmp_path / "r.jsonl"
    path.write_text(
        "".join(json.dumps(r) + "\n" for r in rows) + '{"id": "c", "responses": '
        '["lone \\udc00"]}\n',
        encoding="utf-8",
    )
    from pipeline.scorer.readers import read_rows

    replaced: dict = {}
    got = read_rows(path, "jsonl", [], replaced)
    assert [r.data for r in got[:2]] == [_Cleaner()(r) for r in rows]
    assert got[2].data["responses"] == ["lone \ufffd"] and replaced == {"line 3": 1}
