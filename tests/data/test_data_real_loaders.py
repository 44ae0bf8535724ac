"""Real loaders on local files written in each real dataset's format (no hub here).

The files go through `datasets.load_dataset("parquet"|"json", data_files=...)` inside the same
loader the hub path uses; only the hub download itself cannot run on this machine.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.artifacts.schema import DATASET
from pipeline.data import (
    DATASETS,
    DatasetFormatError,
    DatasetUnavailableError,
    load_dataset,
    subset_indices,
)

COLS = list(DATASET)


def _rec(pid, ds, q, answers=(), probs=(), ref=""):
    return {
        "prompt_id": pid,
        "dataset": ds,
        "question": q,
        "answers": list(answers),
        "probabilities": list(probs),
        "reference_text": ref,
    }


def _triviaqa_row(qid, question, value, aliases):
    # mandarjoshi/trivia_qa rc.nocontext columns (entity_pages / search_results empty, as there)
    return {
        "question": question,
        "question_id": qid,
        "question_source": "http://www.example.org/",
        "entity_pages": {"doc_source": [], "filename": [], "title": [], "wiki_context": []},
        "search_results": {
            "description": [],
            "filename": [],
            "rank": [],
            "title": [],
            "url": [],
            "search_context": [],
        },
        "answer": {
            "aliases": aliases,
            "normalized_aliases": [a.lower() for a in aliases],
            "matched_wiki_entity_name": "",
            "normalized_matched_wiki_entity_name": "",
            "normalized_value": value.lower(),
            "type": "WikipediaEntity",
            "value": value,
        },
    }


def test_triviaqa_parquet_in_real_format(tmp_path):
    rows = [
        _triviaqa_row(
            "tc_1",
            "Which planet is nearest the Sun?",
            "Mercury",
            ["Mercury (planet)", "Mercury", "Planet Mercury"],
        ),
        _triviaqa_row(
            "tc_2",
            "Who wrote Hamlet?",
            "William Shakespeare",
            ["Shakespeare", "William Shakespeare", "The Bard"],
        ),
        _triviaqa_row("tc_3", "What is H2O?", "Water", []),
    ]
    f = tmp_path / "validation-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(rows), f)
    df = load_dataset("triviaqa", data_files=str(f), cache_dir=str(tmp_path / "cache"))
    assert list(df.columns) == COLS
    assert df.to_dict("records") == [
        _rec(
            "triviaqa-tc_1",
            "triviaqa",
            "Which planet is nearest the Sun?",
            [["Mercury", "Mercury (planet)", "Planet Mercury"]],
        ),
        _rec(
            "triviaqa-tc_2",
            "triviaqa",
            "Who wrote Hamlet?",
            [["William Shakespeare", "Shakespeare", "The Bard"]],
        ),
        _rec("triviaqa-tc_3", "triviaqa", "What is H2O?", [["Water"]]),
    ]
    # subset: ids come from the source, not from the position in the subset
    sub = load_dataset(
        "triviaqa",
        data_files=str(f),
        cache_dir=str(tmp_path / "cache"),
        limit=2,
        shuffle=True,
        seed=0,
    )
    expected = [f"triviaqa-tc_{i + 1}" for i in subset_indices(3, 2, seed=0, shuffle=True)]
    assert sub["prompt_id"].tolist() == expected


def test_maqa_json_list_and_nested_field(tmp_path):
    items = [
        {"question": "Which oceans border Canada?", "answers": ["Atlantic", "Pacific", "Arctic"]},
        {"question": "Name two primes below 5.", "answers": [2, 3.0]},
        {
            "question": "Which languages are official in Ireland?",
            "answers": [["Irish", "Gaelic"], ["English"]],
        },
    ]
    f = tmp_path / "maqa.json"
    f.write_text(json.dumps(items), encoding="utf-8")
    expected = [
        _rec(
            "maqa-00000",
            "maqa",
            "Which oceans border Canada?",
            [["Atlantic"], ["Pacific"], ["Arctic"]],
        ),
        _rec("maqa-00001", "maqa", "Name two primes below 5.", [["2"], ["3"]]),
        _rec(
            "maqa-00002",
            "maqa",
            "Which languages are official in Ireland?",
            [["Irish", "Gaelic"], ["English"]],
        ),
    ]
    # path= is how the official JSON (local file or URL) is given
    df = load_dataset("maqa", path=str(f), cache_dir=str(tmp_path / "c1"))
    assert df.to_dict("records") == expected

    g = tmp_path / "maqa_nested.json"
    g.write_text(json.dumps({"data": items[:1]}), encoding="utf-8")
    df = load_dataset("maqa", path=str(g), field="data", cache_dir=str(tmp_path / "c2"))
    assert df.to_dict("records") == expected[:1]


def test_maqa_star_parquet_renormalises_and_falls_back_to_counts(tmp_path, caplog):
    rows = [
        {
            "question": "Largest city in Australia?",
            "answers": [["Sydney"], ["Melbourne", "Melb"]],
            "probabilities": [0.6, 0.4],
            "counts": [6, 4],
        },
        {
            "question": "Capital of Bolivia?",
            "answers": [["Sucre"], ["La Paz"]],
            "probabilities": [0.5, 0.3],
            "counts": [5, 3],
        },
        {
            "question": "Longest river?",
            "answers": [["Nile"], ["Amazon"], ["Yangtze"]],
            "probabilities": [0.0, 0.0, 0.0],
            "counts": [2, 1, 1],
        },
    ]
    f = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist(rows), f)
    with caplog.at_level("WARNING"):
        df = load_dataset("maqa_star", data_files=str(f), cache_dir=str(tmp_path / "cache"))
    assert "renormalised p* of 2/3 questions" in caplog.text
    got = df.to_dict("records")
    probs = [r.pop("probabilities") for r in got]  # compared below with a float tolerance
    expected = [
        _rec(
            "maqa-star-00000",
            "maqa_star",
            "Largest city in Australia?",
            [["Sydney"], ["Melbourne", "Melb"]],
        ),
        _rec("maqa-star-00001", "maqa_star", "Capital of Bolivia?", [["Sucre"], ["La Paz"]]),
        _rec("maqa-star-00002", "maqa_star", "Longest river?", [["Nile"], ["Amazon"], ["Yangtze"]]),
    ]
    for r in expected:
        del r["probabilities"]
    assert got == expected
    assert probs[0] == [0.6, 0.4]  # already sums to 1: kept exactly as given
    assert probs[1] == pytest.approx([0.5 / 0.8, 0.3 / 0.8], abs=1e-15)  # 0.625, 0.375
    assert probs[2] == [0.5, 0.25, 0.25]  # all-zero p*: from counts 2, 1, 1


def test_maqa_star_rejects_misaligned_or_negative_p(tmp_path):
    for i, (probs, msg) in enumerate(
        [([0.5], "has 1 entries but there are 2 answers"), ([1.5, -0.5], "must be finite and >= 0")]
    ):
        f = tmp_path / f"bad{i}.parquet"
        pq.write_table(
            pa.Table.from_pylist(
                [
                    {
                        "question": "Q?",
                        "answers": [["a"], ["b"]],
                        "probabilities": probs,
                        "counts": [1, 1],
                    }
                ]
            ),
            f,
        )
        with pytest.raises(DatasetFormatError, match=msg):
            load_dataset("maqa_star", data_files=str(f), cache_dir=str(tmp_path / f"c{i}"))


def test_wmt19_parquet_translation_struct(tmp_path):
    rows = [
        {"translation": {"en": "The weather is cold today.", "fi": "Tänään on kylmä sää."}},
        {"translation": {"en": "The shop opens at nine.", "fi": "Kauppa aukeaa yhdeksältä."}},
    ]
    f = tmp_path / "validation.parquet"
    pq.write_table(pa.Table.from_pylist(rows), f)
    df = load_dataset(
        "wmt19_fien", data_files={"validation": [str(f)]}, cache_dir=str(tmp_path / "cache")
    )
    assert df.to_dict("records") == [
        _rec(
            "wmt19-fien-00000",
            "wmt19_fien",
            "Tänään on kylmä sää.",
            ref="The weather is cold today.",
        ),
        _rec(
            "wmt19-fien-00001",
            "wmt19_fien",
            "Kauppa aukeaa yhdeksältä.",
            ref="The shop opens at nine.",
        ),
    ]
    with pytest.raises(
        ValueError, match="data_files has splits \\['validation'\\], but split='test'"
    ):
        load_dataset("wmt19_fien", data_files={"validation": [str(f)]}, split="test")


def test_cnn_dm_parquet_and_renamed_benchmark_fields(tmp_path):
    rows = [{"article": "A long article.", "highlights": "One.\nTwo.\nThree.", "id": "abc123"}]
    f = tmp_path / "test.parquet"
    pq.write_table(pa.Table.from_pylist(rows), f)
    df = load_dataset("cnn_dm", data_files=str(f), cache_dir=str(tmp_path / "c1"))
    assert df.to_dict("records") == [
        _rec("cnn-dm-abc123", "cnn_dm", "A long article.", ref="One.\nTwo.\nThree.")
    ]
    # a CNN/DM-based benchmark with other column names and no id column
    g = tmp_path / "bench.jsonl"
    g.write_text(json.dumps({"document": "Text.", "summary": "Sum."}) + "\n", encoding="utf-8")
    df = load_dataset(
        "cnn_dm",
        data_files=str(g),
        article_field="document",
        summary_field="summary",
        id_field=None,
        cache_dir=str(tmp_path / "c2"),
    )
    assert df.to_dict("records") == [_rec("cnn-dm-00000", "cnn_dm", "Text.", ref="Sum.")]


def test_hub_defaults_match_the_paper_sources():
    d = {n: dict(DATASETS[n].defaults) for n in ("triviaqa", "maqa_star", "wmt19_fien", "cnn_dm")}
    assert (d["triviaqa"]["path"], d["triviaqa"]["config"], d["triviaqa"]["split"]) == (
        "mandarjoshi/trivia_qa",
        "rc.nocontext",
        "validation",
    )
    assert (d["maqa_star"]["path"], d["maqa_star"]["split"]) == ("ttomov/maqa_star", "train")
    assert (d["wmt19_fien"]["path"], d["wmt19_fien"]["config"], d["wmt19_fien"]["split"]) == (
        "wmt/wmt19",
        "fi-en",
        "validation",
    )
    assert (d["cnn_dm"]["path"], d["cnn_dm"]["config"], d["cnn_dm"]["split"]) == (
        "abisee/cnn_dailymail",
        "3.0.0",
        "test",
    )
    kinds = {n: DATASETS[n].reference for n in DATASETS.names() if not n.endswith("_bundled")}
    assert kinds == {
        "triviaqa": "one_answer",
        "maqa": "answer_set",
        "maqa_star": "distribution",
        "wmt19_fien": "text",
        "cnn_dm": "text",
        "gsm8k": "number",
    }


def test_offline_hub_error_names_the_bundled_config(tmp_path):
    import datasets

    # tests/conftest.py turns offline mode on before `datasets` is imported; without it the
    # hub client would retry for ~30 s instead of failing at once.
    assert datasets.config.HF_HUB_OFFLINE, "run with HF_DATASETS_OFFLINE=1 / HF_HUB_OFFLINE=1"
    for name in ("triviaqa", "maqa_star", "wmt19_fien", "cnn_dm"):
        with pytest.raises(DatasetUnavailableError) as info:
            load_dataset(name, limit=2, cache_dir=str(tmp_path / name))
        msg = str(info.value)
        assert f"use dataset={name}_bundled" in msg.lower()
        assert DATASETS[name].defaults["path"] in msg
        assert "data_files=" in msg


def test_maqa_without_a_path_and_missing_local_files_name_the_bundled_config(tmp_path):
    with pytest.raises(DatasetUnavailableError, match="dataset=maqa_bundled"):
        load_dataset("maqa")
    with pytest.raises(DatasetUnavailableError, match="dataset=triviaqa_bundled"):
        load_dataset(
            "triviaqa", data_files=str(tmp_path / "missing.parquet"), cache_dir=str(tmp_path / "c")
        )


def test_bad_arguments_get_clear_errors():
    with pytest.raises(ValueError, match="unknown dataset 'trivia'; registered: "):
        load_dataset("trivia")
    with pytest.raises(TypeError, match=r"does not accept \['splt'\]; accepted options"):
        load_dataset("triviaqa", splt="test")
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="limit must be a positive int or None"):
            load_dataset("triviaqa_bundled", limit=bad)
    with pytest.raises(ValueError, match="cannot tell the format"):
        load_dataset("cnn_dm", data_files="articles.txt")


def test_data_files_from_a_hydra_config(tmp_path):
    """Hydra hands over ListConfig/DictConfig, not list/dict: they load the same."""
    from omegaconf import OmegaConf

    f = tmp_path / "validation.parquet"
    pq.write_table(pa.Table.from_pylist([{"translation": {"en": "Yes.", "fi": "Kyllä."}}]), f)
    cfg = OmegaConf.create({"as_list": [str(f)], "as_dict": {"validation": [str(f)]}})
    for files in (cfg.as_list, cfg.as_dict):
        df = load_dataset("wmt19_fien", data_files=files, cache_dir=str(tmp_path / "c"))
        assert df[["question", "reference_text"]].values.tolist() == [["Kyllä.", "Yes."]]
