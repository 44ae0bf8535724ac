"""The paper's CNN/DM-based benchmark (Zhang et al. 2023, github.com/Tiiiger/
benchmark_llm_summarization) read from a file in its released format: writer_summaries.json, a
JSON list (4-space indented, ASCII-escaped) of {article_id, article, summary}, one entry per
freelance-writer summary, an article's entries next to each other. The rows below are our own
text in that format; the real file is checked too when `make paper-assets` has fetched it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hydra import compose
from omegaconf import OmegaConf

from pipeline.config import resolve_cell
from pipeline.data import DatasetFormatError, DatasetUnavailableError, load_dataset

ROOT = Path(__file__).resolve().parents[2]

ARTICLES = [  # (article_id, article, [writer summaries]); ids are 32 hex digits as in the file
    (
        "0f1d41fcf8934fdf8fc993851ba9c6c4",
        (
            "The harbour of Kestrel Bay reopened on Friday after a storm wrecked its sea wall.\n\n"
            "Repairs took five months and cost 3 million pounds, the port authority said.\n\n"
            "Fishing boats, which had moored in a neighbouring town, began returning at dawn."
        ),
        [
            (
                "Kestrel Bay harbour reopened on Friday, five months after a storm wrecked its sea wall. "
                "The repairs cost 3 million pounds. Fishing boats began returning at dawn.  "
            ),
            "A storm-damaged harbour reopened after repairs costing 3 million pounds.",
            "Kestrel Bay's harbour is open again. Boats that had moored elsewhere are returning.",
        ],
    ),
    (
        "a3c9e2b7d0f14e6a9b8c7d6e5f4a3b2c",
        (
            "A primary school in Ferndale has won a national award for its vegetable garden.\n\n"
            "Pupils grow beans, carrots and potatoes, which are served in the school canteen."
        ),
        [
            (
                "Ferndale primary school won a national award for its vegetable garden. Pupils grow the "
                "vegetables served in the canteen."
            )
        ],
    ),
    (
        "5e6f7a8b9c0d4e1f8a2b3c4d5e6f7a8b",
        (
            "Council workers in Millbrook repaired 400 potholes in March, a record for one month.\n\n"
            "The leader of the council said a mild winter had allowed crews to work every day."
        ),
        [
            "Millbrook repaired a record 400 potholes in March.",
            "A mild winter let Millbrook's crews fix 400 potholes in one month, a record.",
        ],
    ),
]
N_ROWS = sum(len(s) for _, _, s in ARTICLES)


def write_benchmark(path: Path, articles=ARTICLES, jsonl: bool = False) -> Path:
    rows = [
        {"article_id": aid, "article": art, "summary": s}
        for aid, art, summaries in articles
        for s in summaries
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    if jsonl:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    else:
        path.write_text(json.dumps(rows, indent=4), encoding="utf-8")
    return path


def _expected(aid: str, art: str, summaries: list[str], dataset: str = "cnn_dm") -> dict:
    return {
        "prompt_id": f"{dataset.replace('_', '-')}-{aid}",
        "dataset": dataset,
        "question": art,
        "answers": [],
        "probabilities": [],
        "reference_text": summaries[0].strip(),
    }


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# --- the loader ---------------------------------------------------------------------------------


def test_one_record_per_article_with_its_first_writer_summary(tmp_path):
    f = write_benchmark(tmp_path / "writer_summaries.json")
    df = load_dataset("cnn_dm", source="benchmark", benchmark_file=str(f))
    assert df.to_dict("records") == [_expected(*a) for a in ARTICLES]
    assert len(json.loads(f.read_text())) == N_ROWS  # 6 entries, 3 articles


def test_the_generations_record_the_benchmark_file_by_its_sha256(tmp_path):
    """The report names the file under the CNN/DM tables (docs/fidelity.md "MAQA source")."""
    import hashlib

    from pipeline.data.loaders import recording_sources

    f = write_benchmark(tmp_path / "writer_summaries.json")
    with recording_sources() as seen:
        load_dataset("cnn_dm", source="benchmark", benchmark_file=str(f))
    assert seen == [
        {"source": "file", "path": str(f), "sha256": hashlib.sha256(f.read_bytes()).hexdigest()}
    ]


def test_json_lines_and_subsets_select_articles_not_summaries(tmp_path):
    f = write_benchmark(tmp_path / "writer_summaries.jsonl", jsonl=True)
    df = load_dataset("cnn_dm", source="benchmark", benchmark_file=str(f), limit=2)
    assert df["prompt_id"].tolist() == [f"cnn-dm-{a[0]}" for a in ARTICLES[:2]]
    shuffled = load_dataset(
        "cnn_dm", source="benchmark", benchmark_file=str(f), shuffle=True, seed=3
    )
    again = load_dataset("cnn_dm", source="benchmark", benchmark_file=str(f), shuffle=True, seed=3)
    assert shuffled.equals(again)
    assert sorted(shuffled["prompt_id"]) == sorted(f"cnn-dm-{a[0]}" for a in ARTICLES)


def test_missing_file_names_the_file_and_the_fetch_step(tmp_path):
    missing = tmp_path / "data" / "cnn_dm" / "writer_summaries.json"
    with pytest.raises(DatasetUnavailableError) as info:
        load_dataset("cnn_dm", source="benchmark", benchmark_file=str(missing))
    msg = str(info.value)
    assert str(missing) in msg and "not found" in msg
    assert "make paper-assets" in msg and "Tiiiger/benchmark_llm_summarization" in msg
    assert "source=hub" in msg and "dataset=cnn_dm_bundled" in msg
    with pytest.raises(DatasetUnavailableError, match="needs benchmark_file.*make paper-assets"):
        load_dataset("cnn_dm", source="benchmark")


def test_missing_column_names_the_file_the_entry_and_the_column(tmp_path):
    f = write_benchmark(tmp_path / "writer_summaries.json")
    rows = json.loads(f.read_text())
    del rows[4]["summary"]
    f.write_text(json.dumps(rows, indent=4))
    with pytest.raises(DatasetFormatError) as info:
        load_dataset("cnn_dm", source="benchmark", benchmark_file=str(f))
    msg = str(info.value)
    assert f"{f}: entry 4: missing column(s) ['summary']" in msg
    assert "['article_id', 'article', 'summary']" in msg
    # a CNN/DM hub file (article, highlights, id) is not the benchmark's format
    g = tmp_path / "hub_like.json"
    g.write_text(json.dumps([{"article": "A.", "highlights": "B.", "id": "x"}]))
    with pytest.raises(
        DatasetFormatError, match=r"missing column\(s\) \['article_id', 'summary'\]"
    ):
        load_dataset("cnn_dm", source="benchmark", benchmark_file=str(g))


def test_malformed_files_get_clear_errors(tmp_path):
    f = tmp_path / "writer_summaries.json"
    f.write_text(json.dumps({"data": []}))
    with pytest.raises(DatasetFormatError, match="expected a JSON list"):
        load_dataset("cnn_dm", source="benchmark", benchmark_file=str(f))
    f.write_text("[{not json")
    with pytest.raises(DatasetFormatError, match="neither a JSON list nor JSON lines"):
        load_dataset("cnn_dm", source="benchmark", benchmark_file=str(f))
    f.write_text(
        json.dumps(
            [
                {"article_id": "a", "article": "One.", "summary": "S."},
                {"article_id": "a", "article": "Two.", "summary": "T."},
            ]
        )
    )
    with pytest.raises(DatasetFormatError, match="'a' appears with two different article texts"):
        load_dataset("cnn_dm", source="benchmark", benchmark_file=str(f))
    f.write_text(json.dumps([{"article_id": "a", "article": "One.", "summary": "  "}]))
    with pytest.raises(DatasetFormatError, match="entry 0: summary must be a non-empty string"):
        load_dataset("cnn_dm", source="benchmark", benchmark_file=str(f))


def test_sources_do_not_mix(tmp_path):
    f = write_benchmark(tmp_path / "writer_summaries.json")
    with pytest.raises(ValueError, match=r"source must be one of \['benchmark', 'hub'\]"):
        load_dataset("cnn_dm", source="writers", benchmark_file=str(f))
    with pytest.raises(
        TypeError,
        match=r"\['data_files', 'summary_field'\] are options of "
        "source=hub",
    ):
        load_dataset(
            "cnn_dm",
            source="benchmark",
            benchmark_file=str(f),
            data_files=str(f),
            summary_field="summary",
        )


def test_hub_source_ignores_the_benchmark_file(tmp_path):
    """`dataset.overrides.source=hub` on top of conf/dataset/cnn_dm.yaml: the benchmark_file it
    sets is not read, the hub format is (here a local parquet in that format)."""
    rows = [{"article": "A long article.", "highlights": "One.\nTwo.", "id": "abc123"}]
    p = tmp_path / "test.parquet"
    pq.write_table(pa.Table.from_pylist(rows), p)
    df = load_dataset(
        "cnn_dm",
        source="hub",
        benchmark_file=str(tmp_path / "absent.json"),
        data_files=str(p),
        cache_dir=str(tmp_path / "c"),
    )
    assert df["prompt_id"].tolist() == ["cnn-dm-abc123"]
    assert df["reference_text"].tolist() == ["One.\nTwo."]


# --- the configuration --------------------------------------------------------------------------


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TASK_AWARE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _load(cfg):
    from pipeline.generation.cell import load_cell_dataset

    return load_cell_dataset(resolve_cell(cfg))


def test_paper_cnn_dm_reads_the_fetched_benchmark(hydra_ctx, cache):
    cfg = compose("config", overrides=["experiment=paper", "dataset=cnn_dm"])
    overrides = OmegaConf.to_container(cfg.dataset.overrides, resolve=True)
    target = cache / "data" / "cnn_dm" / "writer_summaries.json"
    assert overrides == {"source": "benchmark", "benchmark_file": str(target)}
    fetch = _script("fetch_paper_assets")  # the fetch step writes exactly where the config reads
    assert fetch.cache_dir() / "data" / "cnn_dm" / "writer_summaries.json" == target
    write_benchmark(target)
    df = _load(cfg)
    assert df.to_dict("records") == [_expected(*a) for a in ARTICLES]


def test_paper_cnn_dm_missing_benchmark_stops_naming_the_fetch_step(hydra_ctx, cache):
    from pipeline.driver.assets import MissingAssetsError, cell_assets, check_assets

    cfg = compose("config", overrides=["experiment=paper", "dataset=cnn_dm"])
    target = str(cache / "data" / "cnn_dm" / "writer_summaries.json")
    data = [a for a in cell_assets(resolve_cell(cfg)) if a.what == "data of cnn_dm"]
    assert [(a.source, a.stage, a.available, a.how) for a in data] == [
        (target, "generate", False, "make paper-assets")
    ]
    with pytest.raises(
        MissingAssetsError,
        match="data of cnn_dm: .*writer_summaries.json "
        r"\(needed by generate\) -> make paper-assets",
    ):
        check_assets(resolve_cell(cfg), ["generate"])
    write_benchmark(Path(target))
    assert all(a.available for a in cell_assets(resolve_cell(cfg)) if a.what == "data of cnn_dm")
    # the hub source reads no local file: nothing to check for it
    hub = compose(
        "config", overrides=["experiment=paper", "dataset=cnn_dm", "dataset.overrides.source=hub"]
    )
    assert not [a for a in cell_assets(resolve_cell(hub)) if a.what == "data of cnn_dm"]


def test_hub_source_composes_and_loads_from_the_cnn_dm_config(hydra_ctx, cache, tmp_path):
    p = tmp_path / "test.parquet"
    pq.write_table(
        pa.Table.from_pylist([{"article": "Text.", "highlights": "Sum.", "id": "q1"}]), p
    )
    cfg = compose(
        "config",
        overrides=[
            "experiment=paper",
            "dataset=cnn_dm",
            "dataset.overrides.source=hub",
            f"+dataset.overrides.data_files={p}",
            f"+dataset.overrides.cache_dir={tmp_path / 'c'}",
        ],
    )
    df = _load(cfg)
    assert df[["prompt_id", "reference_text"]].values.tolist() == [["cnn-dm-q1", "Sum."]]


def test_rehearsal_writes_the_benchmark_format_and_the_real_loader_reads_it(
    hydra_ctx, tmp_path, monkeypatch
):
    builder = _script("build_rehearsal_assets")
    assets = tmp_path / "rehearsal"
    monkeypatch.setenv("TASK_AWARE_REHEARSAL_ASSETS", str(assets))
    monkeypatch.setenv("REHEARSAL_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    f = builder.write_cnn_dm(assets / "data" / builder.DATA_FILES["cnn_dm"])
    rows = json.loads(f.read_text())
    assert all(list(r) == ["article_id", "article", "summary"] for r in rows)
    ids = [r["article_id"] for r in rows]
    assert len(ids) > len(set(ids))  # some articles have two writer summaries, as in the real file
    cfg = compose(
        "config",
        overrides=["experiment=paper", "+rehearsal=local", "model=qwen3-4b", "dataset=cnn_dm"],
    )
    assert OmegaConf.to_container(cfg.dataset.overrides, resolve=True) == {
        "source": "benchmark",
        "benchmark_file": str(f),
    }
    df = _load(cfg)
    bundled = builder.bundled("cnn_dm")
    assert len(df) == len(bundled) == builder.ITEMS["cnn_dm"]
    assert df["question"].tolist() == [r["question"] for r in bundled]
    assert df["reference_text"].tolist() == [
        r["reference_text"].replace("\n", " ") for r in bundled
    ]
    assert df["prompt_id"].tolist() == [
        "cnn-dm-" + hashlib.md5(r["prompt_id"].encode()).hexdigest() for r in bundled
    ]


def test_fetch_step_checks_the_pinned_file(tmp_path):
    fetch = _script("fetch_paper_assets")
    assert fetch.CNN_DM_COMMIT in fetch.CNN_DM_URL
    source = write_benchmark(tmp_path / "served.json")
    target = tmp_path / "cache" / "data" / "cnn_dm" / "writer_summaries.json"
    with pytest.raises(ValueError, match="SHA-256 .* != the pinned"):
        fetch.fetch_cnn_dm_benchmark(target, url=source.as_uri())
    assert not target.exists()
    msg = fetch.fetch_cnn_dm_benchmark(target, url=source.as_uri(), sha256=None)
    assert msg == f"{N_ROWS} writer summaries of {len(ARTICLES)} articles -> {target}"
    assert target.read_bytes() == source.read_bytes()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"article": "A.", "highlights": "B."}]))
    with pytest.raises(ValueError, match="not a JSON list of"):
        fetch.fetch_cnn_dm_benchmark(target, url=bad.as_uri(), sha256=None)


# --- the real file, when fetched ---------------------------------------------------------------

REAL = (
    Path(os.environ.get("TASK_AWARE_CACHE", Path.home() / ".cache" / "task-aware"))
    / "data"
    / "cnn_dm"
    / "writer_summaries.json"
)


@pytest.mark.skipif(not REAL.is_file(), reason="make paper-assets has not fetched the benchmark")
def test_the_fetched_benchmark():
    fetch = _script("fetch_paper_assets")
    assert hashlib.sha256(REAL.read_bytes()).hexdigest() == fetch.CNN_DM_SHA256
    df = load_dataset("cnn_dm", source="benchmark", benchmark_file=str(REAL))
    assert len(df) == 109 and len(json.loads(REAL.read_text())) == 302
