"""The scorer when the world misbehaves (issue 53): the input file changes while it is read,
`--out` is killed or the disk fills while writing, two scorers share a work folder, a SIGTERM.
Each test fails without its fix; every file is written here."""

import json
import os

import pandas as pd
import pytest

from pipeline.scorer import readers
from pipeline.scorer.readers import InputChunks, ScoreInputError
from pipeline.scorer.run import score


def _rows(n, label="Paris"):
    # 400 kB a row: the reader reads 1 MiB at a time, a change must land past what it holds
    return [{"id": f"q{i}", "question": "Capital of France?", "reference": "Paris",
             "responses": [label, label, "Lyon"], "note": "x" * 400_000} for i in range(n)]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _changing_while_read(monkeypatch, path, changed: bytes):
    """The file is rewritten with `changed` once the first chunk is out, and restored byte for
    byte (its modification time too) once the reader has read to its end."""
    original, stat = path.read_bytes(), os.stat(path)
    real = readers._jsonl_chunks

    def chunks(*args, **kwargs):
        gen = real(*args, **kwargs)
        yield next(gen)
        path.write_bytes(changed)
        yield from gen
        path.write_bytes(original)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))

    monkeypatch.setattr(readers, "_jsonl_chunks", chunks)


def test_a_file_changed_during_the_read_and_restored_is_refused(tmp_path, monkeypatch):
    path = _write(tmp_path / "in.jsonl", _rows(6))
    changed = _rows(6)
    changed[5]["reference"] = "Lyon"
    _changing_while_read(monkeypatch, path, "".join(json.dumps(r) + "\n" for r in changed).encode())
    reader = InputChunks(path, chunk_rows=2)
    list(reader)
    with pytest.raises(ScoreInputError, match="changed while it was read"):
        reader.finish()


def test_no_stale_part_after_a_refused_read(tmp_path, monkeypatch):
    """The read refused, the rerun on the restored file scores what the file says (row q5's
    reference), not the part read from the changed content."""
    path = _write(tmp_path / "in.jsonl", _rows(6))
    work = tmp_path / "work"
    changed = _rows(6)
    changed[5]["reference"] = "Lyon"
    with monkeypatch.context() as m:
        _changing_while_read(m, path, "".join(json.dumps(r) + "\n" for r in changed).encode())
        with pytest.raises(ScoreInputError, match="changed while it was read"):
            score(path, task="classes", work_dir=work, part_prompts=2)
    again = score(path, task="classes", work_dir=work, part_prompts=2)
    fresh = score(path, task="classes", work_dir=tmp_path / "fresh", part_prompts=2)
    cols = ["prompt_id", "bayes_text", "bayes_risk", "quality_bayes_exact_match_error"]
    pd.testing.assert_frame_equal(again[cols], fresh[cols])
    assert again.set_index("prompt_id").loc["q5", "quality_bayes_exact_match_error"] == 0.0
