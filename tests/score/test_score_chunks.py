"""`InputChunks`: a JSON Lines input read a chunk of rows at a time gives what `read_input` gives
reading it whole (the prompts, the skipped rows and their order, the rows counted, the replaced
surrogates, the errors), and `score` on it the rows and files of a whole read.

The reference is `read_input` on the same file (the whole-file reader, which the chunked one
does not call unless it falls back); every file is written here.
"""

import json

import pandas as pd
import pytest

from pipeline.scorer import readers
from pipeline.scorer.readers import (
    FieldNames,
    InputChunks,
    ReadAgain,
    ScoreInputError,
    read_input,
)
from pipeline.scorer.run import reference_columns, score

from .test_score_bad_rows import write_mixed


def _chunked(path, chunk_rows, **kwargs):
    reader = InputChunks(path, chunk_rows=chunk_rows, **kwargs)
    chunks = list(reader)
    return reader, chunks, reader.finish()


def _same_reading(path, chunk_rows, unit="rows", **kwargs):
    whole = read_input(path, **kwargs)
    reader, chunks, got = _chunked(path, chunk_rows, **kwargs)
    assert reader.unit == unit and reader.format == whole.format
    assert [p for chunk in chunks for p in chunk] == whole.prompts
    assert got.skipped == whole.skipped and got.n_rows == whole.n_rows
    assert got.replaced_surrogates == whole.replaced_surrogates
    return whole, chunks


def _lines(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _numbers(prompt):
    """The reals task's check of a reference (what `score` passes as `validate`)."""
    reference_columns("number", prompt.reference, prompt.prompt_id)


@pytest.mark.parametrize("chunk_rows", [1, 7, 50, 219, 220, 1000])
def test_chunks_of_a_file_with_200_bad_rows_read_as_the_whole_file(tmp_path, chunk_rows):
    path = tmp_path / "mixed.jsonl"
    write_mixed(path)  # 20 good rows, 200 bad ones of 18 kinds, a blank line
    whole, chunks = _same_reading(path, chunk_rows, validate=_numbers)
    assert len(whole.prompts) == 20 and len(whole.skipped) == 200
    assert len(chunks) == -(-220 // chunk_rows)  # a chunk per chunk_rows rows (blank: none)


def test_the_reader_holds_one_chunk(tmp_path, monkeypatch):
    """Lazy: the first chunk comes after its rows are parsed, before the rest of the file is."""
    path = _lines(tmp_path / "a.jsonl", [{"responses": [str(i)]} for i in range(100)])
    parsed = []
    real = readers._parse_line
    monkeypatch.setattr(
        readers,
        "_parse_line",
        lambda raw, lineno, *a: (parsed.append(lineno), real(raw, lineno, *a))[1],
    )
    chunks = iter(InputChunks(path, chunk_rows=30))
    assert len(next(chunks)) == 30 and parsed == list(range(1, 31))
    assert [len(c) for c in chunks] == [30, 30, 10] and len(parsed) == 100


def test_surrogates_and_strict_mode_in_later_chunks(tmp_path):
    rows = [{"id": f"q{i}", "responses": ["a", "b"]} for i in range(9)]
    text = "".join(json.dumps(r) + "\n" for r in rows)
    text += '{"id": "s", "responses": ["x\\ud800y", "\\udfff"]}\n'
    path = tmp_path / "s.jsonl"
    path.write_text(text + '{"id": "bad", "responses": "one string"}\n')
    whole, _ = _same_reading(path, 4)
    assert whole.replaced_surrogates == {"line 10": 2} and len(whole.skipped) == 1
    with pytest.raises(ScoreInputError) as whole_error:
        read_input(path, strict=True)
    with pytest.raises(ScoreInputError) as chunk_error:
        _chunked(path, 4, strict=True)
    assert str(chunk_error.value) == str(whole_error.value)
    assert "line 11" in str(whole_error.value)


def test_duplicate_ids_in_different_chunks_are_the_whole_files_error(tmp_path):
    rows = [{"id": f"q{i % 7}", "responses": ["a"]} for i in range(10)]
    path = _lines(tmp_path / "d.jsonl", rows)
    with pytest.raises(ScoreInputError) as whole_error:
        read_input(path)
    with pytest.raises(ScoreInputError) as chunk_error:
        _chunked(path, 3)
    assert str(chunk_error.value) == str(whole_error.value)
    assert "lines 1 and 8 share the id 'q0' (2 more rows repeat an id)" in str(whole_error.value)


def test_no_good_row_anywhere_is_the_whole_files_error(tmp_path):
    path = _lines(tmp_path / "n.jsonl", [{"id": f"q{i}", "responses": []} for i in range(5)])
    with pytest.raises(ScoreInputError) as whole_error:
        read_input(path)
    with pytest.raises(ScoreInputError) as chunk_error:
        _chunked(path, 2)
    assert str(chunk_error.value) == str(whole_error.value)


def test_a_usual_field_first_seen_in_a_later_chunk_makes_a_read_again(tmp_path, overrides):
    """The whole file takes "responses" (the first usual name any row has): chunk 1, with only
    "samples", would have read those rows; `finish` says so, and `score` reads the file whole."""
    rows = [{"id": f"s{i}", "samples": ["France", "Spain"]} for i in range(3)]
    rows += [
        {"id": f"r{i}", "responses": ["France", "Italy"], "reference": ["France"]} for i in range(4)
    ]
    path = _lines(tmp_path / "f.jsonl", rows)
    whole = read_input(path)
    assert [p.prompt_id for p in whole.prompts] == ["r0", "r1", "r2", "r3"]
    reader = InputChunks(path, chunk_rows=3)
    assert [p.prompt_id for p in next(iter(reader))] == ["s0", "s1", "s2"]
    with pytest.raises(ReadAgain):
        list(reader), reader.finish()
    again = reader.again()
    assert [p for c in again for p in c] == whole.prompts and again.unit == "prompts"
    with pytest.warns(UserWarning, match="skipped 3 of 7"):
        chunked = score(path, "sets", overrides=overrides, part_prompts=3)
        one = score(path, "sets", overrides=overrides)
    pd.testing.assert_frame_equal(chunked, one)


def test_optional_fields_first_seen_in_a_later_chunk_are_taken_there(tmp_path):
    """Log-probs, reference, question and id only from row 4 on: the first rows have them
    under no usual name, so a whole read gives them none either; no read again."""
    rows = [{"responses": ["a", "b"]} for _ in range(3)]
    rows += [
        {
            "qid": f"q{i}",
            "query": f"Q{i}",
            "responses": ["a", "b"],
            "sample_logprobs": [-1.0, -2.0],
            "answers": ["a"],
        }
        for i in range(5)
    ]
    path = _lines(tmp_path / "o.jsonl", rows)
    whole, _ = _same_reading(path, 3)
    assert [p.prompt_id for p in whole.prompts] == ["0", "1", "2", *(f"q{i}" for i in range(5))]
    assert whole.prompts[0].logprobs is None and whole.prompts[3].logprobs == [-1.0, -2.0]
    assert whole.prompts[3].question == "Q0" and whole.prompts[3].reference == ["a"]


def test_a_first_chunk_that_cannot_decide_reads_the_file_whole(tmp_path):
    """No good row (or no responses field) in the first chunk: read_input's way from the start."""
    rows = [{"id": f"b{i}", "question": "no responses"} for i in range(4)]
    rows += [{"id": f"g{i}", "responses": ["x"]} for i in range(3)]
    path = _lines(tmp_path / "late.jsonl", rows)
    whole, chunks = _same_reading(path, 4, unit="prompts")
    assert [p.prompt_id for p in whole.prompts] == ["g0", "g1", "g2"] and len(chunks) == 1


def _lm_eval_rows(filters_of):
    return [
        {
            "doc_id": i,
            "doc": {"question": f"q{i}"},
            "target": "a",
            "filter": filters_of(i),
            "resps": [["a", "b"]],
            "filtered_resps": ["a", "b"],
        }
        for i in range(8)
    ]


def test_lm_eval_filters_in_chunks(tmp_path, caplog):
    both = _lines(
        tmp_path / "both.jsonl", _lm_eval_rows(lambda i: "strict" if i % 2 else "flexible")
    )
    with caplog.at_level("WARNING"):
        whole, _ = _same_reading(both, 3)
    assert whole.format == "lm-eval" and len(whole.prompts) == 4
    assert {p.extra["filter"] for p in whole.prompts} == {"flexible"}
    assert "holds 2 filters (flexible, strict)" in caplog.text
    named, _ = _same_reading(both, 3, fields=FieldNames(lm_eval_filter="strict"))
    assert [p.prompt_id for p in named.prompts] == ["1", "3", "5", "7"]
    late = _lines(
        tmp_path / "late.jsonl", _lm_eval_rows(lambda i: "strict" if i >= 5 else "flexible")
    )
    reader = InputChunks(late, chunk_rows=3)
    with pytest.raises(ReadAgain):
        list(reader), reader.finish()
    assert [p for c in reader.again() for p in c] == read_input(late).prompts


def test_parquet_and_data_in_memory_are_read_whole_and_handed_out_in_chunks(tmp_path):
    frame = pd.DataFrame({"id": [f"q{i}" for i in range(5)], "responses": [["a", "b"]] * 5})
    frame.to_parquet(tmp_path / "p.parquet")
    for source in (tmp_path / "p.parquet", frame):
        reader, chunks, got = _chunked(source, 2)
        assert reader.unit == "prompts" and [len(c) for c in chunks] == [2, 2, 1]
        assert [p for c in chunks for p in c] == read_input(source).prompts
        assert got.n_rows == 5


def test_a_chunked_score_with_bad_rows_writes_what_a_whole_one_writes(tmp_path, overrides):
    path = tmp_path / "mixed.jsonl"
    write_mixed(path)
    outs = {}
    for name, part_prompts in (("whole", None), ("chunks", 6)):
        with pytest.warns(UserWarning, match="skipped 200 of 220"):
            outs[name] = score(
                path,
                "reals",
                out=tmp_path / f"{name}.jsonl",
                overrides=overrides,
                part_prompts=part_prompts,
            )
    pd.testing.assert_frame_equal(outs["whole"], outs["chunks"])
    for key in ("skipped", "n_rows"):
        assert outs["whole"].attrs[key] == outs["chunks"].attrs[key], key
    for key in ("summary", "quality_summary"):  # records with NaN (constant risks here)
        pd.testing.assert_frame_equal(
            pd.DataFrame(outs["whole"].attrs[key]), pd.DataFrame(outs["chunks"].attrs[key])
        )
    for suffix in ("jsonl", "skipped.jsonl", "summary.csv", "quality.csv"):
        assert (tmp_path / f"whole.{suffix}").read_bytes() == (
            tmp_path / f"chunks.{suffix}"
        ).read_bytes(), suffix
    # a part per chunk of 6 rows (non-blank lines) with a good row; chunks of bad rows only
    # make none
    good_lines = {p.line for p in read_input(path, validate=_numbers).prompts}
    rows = [n for n, text in enumerate(path.read_bytes().split(b"\n"), 1) if text.strip()]
    chunks_with_good = {i // 6 for i, n in enumerate(rows) if n in good_lines}
    assert len(chunks_with_good) < -(-220 // 6)
    parts = sorted(p.name for p in (tmp_path / "chunks.work").glob("*/part-*"))
    assert parts == [f"part-{i:05d}" for i in range(len(chunks_with_good))]
