"""The bundled mini-datasets: every file loads, follows the DATASET schema and the brief's shape."""

from __future__ import annotations

import json
import math
import re

import pytest

from pipeline.artifacts.schema import DATASET
from pipeline.data import BUNDLED_DIR, DATASETS, DatasetFormatError, load_dataset, validate_records

# name -> (task, number of items)
EXPECTED = {
    "triviaqa_bundled": ("classes", 60),
    "maqa_bundled": ("sets", 60),
    "maqa_star_bundled": ("simplex", 50),
    "wmt19_fien_bundled": ("sphere", 50),
    "cnn_dm_bundled": ("graphs", 25),
}
# task -> the reference kind its records carry (pipeline/tasks/)
REFERENCE = {
    "classes": "one_answer",
    "sets": "answer_set",
    "simplex": "distribution",
    "sphere": "text",
    "graphs": "text",
}


# Independent re-statement of the schema's logical types (not read from pipeline.data).
def _is_type(value: object, logical: str) -> bool:
    if logical == "str":
        return isinstance(value, str)
    if logical == "list<float>":
        return isinstance(value, list) and all(type(v) is float for v in value)
    if logical == "list<list<str>>":
        return isinstance(value, list) and all(
            isinstance(a, list) and all(isinstance(s, str) for s in a) for a in value
        )
    raise AssertionError(f"unexpected logical type {logical}")


def _words(text: str) -> int:
    return len(text.split())


@pytest.fixture(scope="module", params=sorted(EXPECTED))
def bundled(request):
    name = request.param
    return name, load_dataset(name)


def test_every_bundled_config_is_registered_with_its_task():
    for name, (task, _) in EXPECTED.items():
        assert DATASETS[name].reference == REFERENCE[task]
        assert (BUNDLED_DIR / f"{name}.jsonl").is_file()


def test_bundled_frame_follows_schema(bundled):
    name, df = bundled
    task, n = EXPECTED[name]
    assert list(df.columns) == list(DATASET)
    assert len(df) == n
    assert df["prompt_id"].is_unique
    assert (df["dataset"] == name).all()
    prefix = name.replace("_", "-")
    assert df["prompt_id"].tolist() == [f"{prefix}-{i:04d}" for i in range(n)]
    for row in df.to_dict("records"):
        for col, logical in DATASET.items():
            assert _is_type(row[col], logical), (name, col, row[col])
        assert row["question"].strip() == row["question"] and row["question"]
        for aliases in row["answers"]:
            assert aliases, row
            assert all(a.strip() and a.strip() == a for a in aliases), row
            assert len(set(aliases)) == len(aliases), row
        if row["probabilities"]:
            assert len(row["probabilities"]) == len(row["answers"])
            assert all(0.0 <= p <= 1.0 for p in row["probabilities"])
            assert abs(math.fsum(row["probabilities"]) - 1.0) <= 1e-6
    validate_records(df.to_dict("records"), reference=REFERENCE[task])


def test_task_specific_shape(bundled):
    name, df = bundled
    rows = df.to_dict("records")
    if name == "triviaqa_bundled":
        assert all(
            len(r["answers"]) == 1 and not r["probabilities"] and r["reference_text"] == ""
            for r in rows
        )
        mona = rows[0]
        assert mona["question"] == "Who painted the Mona Lisa?"
        assert mona["answers"] == [["Leonardo da Vinci", "da Vinci", "Leonardo"]]
    elif name == "maqa_bundled":
        assert all(2 <= len(r["answers"]) <= 6 for r in rows)
        assert all(not r["probabilities"] for r in rows)
        assert rows[0]["answers"] == [
            ["Pacific Ocean", "Pacific"],
            ["Atlantic Ocean", "Atlantic"],
            ["Arctic Ocean", "Arctic"],
        ]
    elif name == "maqa_star_bundled":
        assert all(len(r["answers"]) >= 2 for r in rows)  # ambiguous: a real spread of answers
        assert all(max(r["probabilities"]) < 1.0 for r in rows)
        assert rows[0]["question"] == "Which is the largest city in Australia?"
        assert rows[0]["answers"] == [["Sydney"], ["Melbourne"]]
        assert rows[0]["probabilities"] == [0.6, 0.4]
    elif name == "wmt19_fien_bundled":
        for r in rows:
            assert 8 <= _words(r["question"]) <= 20, r["question"]
            assert r["reference_text"] and not r["answers"]
        # Finnish text: letters of the Finnish alphabet appear in the set overall
        assert any("ä" in r["question"] or "ö" in r["question"] for r in rows)
    elif name == "cnn_dm_bundled":
        for r in rows:
            assert 120 <= _words(r["question"]) <= 200, (_words(r["question"]), r["prompt_id"])
            highlights = r["reference_text"].split("\n")
            assert len(highlights) == 3 and all(h.endswith(".") for h in highlights)


def test_bundled_questions_are_distinct(bundled):
    _, df = bundled
    assert df["question"].is_unique


def test_license_file_names_cc_by_and_not_samples():
    text = (BUNDLED_DIR / "LICENSE.md").read_text(encoding="utf-8")
    assert "CC-BY-4.0" in text
    assert "Not samples of the original datasets" in text
    for name in EXPECTED:
        assert f"{name}.jsonl" in text


# That the bundled files ship in the wheel: tests/test_packaging.py builds it and lists them.


def test_bundled_path_override_reads_a_user_file_and_validates(tmp_path):
    good = tmp_path / "mine.jsonl"
    rec = {
        "prompt_id": "mine-0",
        "dataset": "x",
        "question": "Q?",
        "answers": [["A"], ["B"]],
        "probabilities": [0.25, 0.75],
        "reference_text": "",
    }
    good.write_text(json.dumps(rec) + "\n\n", encoding="utf-8")
    df = load_dataset("maqa_star_bundled", path=str(good))
    assert df.to_dict("records") == [{**rec, "dataset": "maqa_star_bundled"}]

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**rec, "probabilities": [0.5, 0.6]}) + "\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match="sum to 1"):
        load_dataset("maqa_star_bundled", path=str(bad))
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"prompt_id": \n', encoding="utf-8")
    with pytest.raises(DatasetFormatError, match=re.escape(f"{broken}:1: invalid JSON")):
        load_dataset("maqa_bundled", path=str(broken))


def test_limit_and_seeded_shuffle_are_deterministic():
    first = load_dataset("maqa_bundled", limit=3)
    assert first["prompt_id"].tolist() == [
        "maqa-bundled-0000",
        "maqa-bundled-0001",
        "maqa-bundled-0002",
    ]
    a = load_dataset("maqa_bundled", limit=5, shuffle=True, seed=1)["prompt_id"].tolist()
    b = load_dataset("maqa_bundled", limit=5, shuffle=True, seed=1)["prompt_id"].tolist()
    c = load_dataset("maqa_bundled", limit=5, shuffle=True, seed=2)["prompt_id"].tolist()
    assert a == b and a != c
    # pinned: numpy default_rng(1).permutation(60)[:3]
    assert a[:3] == ["maqa-bundled-0058", "maqa-bundled-0025", "maqa-bundled-0044"]
    everything = load_dataset("maqa_bundled", shuffle=True, seed=3)["prompt_id"].tolist()
    assert sorted(everything) == [f"maqa-bundled-{i:04d}" for i in range(60)]
    assert len(load_dataset("maqa_bundled", limit=1000)) == 60


def test_bundled_frames_pass_the_artifact_store_contract(bundled):
    from pipeline.artifacts.store import to_table

    _, df = bundled
    table = to_table("dataset", df)
    assert table.num_rows == len(df)
    assert table.column("answers").to_pylist() == df["answers"].tolist()


def test_validate_records_rejects_each_kind_of_bad_record():
    good = {
        "prompt_id": "p-0",
        "dataset": "d",
        "question": "Q?",
        "answers": [["a"]],
        "probabilities": [],
        "reference_text": "",
    }
    validate_records([good], reference="one_answer")
    cases = [
        ([good, dict(good)], None, "duplicate prompt_id 'p-0'"),
        ([{**good, "question": "  "}], None, "question must be a non-empty string"),
        ([{**good, "answers": [[]]}], None, "answers must be non-empty lists"),
        ([{**good, "answers": [[""]]}], None, "answers must be non-empty lists"),
        ([{**good, "probabilities": [1]}], None, "must be floats in \\[0, 1\\]"),
        ([{**good, "probabilities": [0.5, 0.5]}], None, "align with answers and sum to 1"),
        ([{k: v for k, v in good.items() if k != "reference_text"}], None, "columns"),
        ([{**good, "answers": [["a"], ["b"]]}], "one_answer", "exactly one answer"),
        ([good], "distribution", "needs probabilities"),
        ([good], "text", "needs a reference_text"),
        ([{**good, "answers": []}], "answer_set", "needs at least one answer"),
    ]
    for records, reference, msg in cases:
        with pytest.raises(DatasetFormatError, match=msg):
            validate_records(records, reference=reference)
