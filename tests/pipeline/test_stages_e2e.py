"""The stages end to end on the real packaged SmolLM2 and MiniLM (small sizes): artifacts, the
stage cache, Bayes risks consistent with the latent core, uq values equal to lm-polygraph's own
estimators, W&B offline runs, and resume after a kill between generation shards."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from pipeline.artifacts.store import ArtifactStore
from pipeline.config import register_configs, resolve_cell
from pipeline.driver.job import run
from pipeline.latent import get_space
from pipeline.latent.codec import from_json

ROOT = Path(__file__).resolve().parents[2]
register_configs()

SMALL = [
    "dataset.limit=3",
    "generation.n_samples=4",
    "dataset.max_new_tokens=12",
    "evaluation.n_bootstrap=50",
    "generation.shard_size=2",
]


def make_cfg(tmp: Path, *overrides: str):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(
            "config",
            overrides=[
                f"output_root={tmp / 'outputs'}",
                f"results_dir={tmp / 'results'}",
                f"wandb.dir={tmp}",
                *SMALL,
                *overrides,
            ],
        )


@pytest.fixture(scope="module")
def maqa_run(tmp_path_factory):
    # A credential in the environment must never reach artifacts or W&B (checked below).
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", "sk-test-e2e-do-not-log-0123456789")
    tmp = tmp_path_factory.mktemp("e2e")
    cfg = make_cfg(tmp, "dataset=maqa_bundled")
    first = run(cfg)
    yield tmp, cfg, first
    mp.undo()


def test_every_artifact_written_with_manifest(maqa_run):
    _, cfg, first = maqa_run
    store = ArtifactStore(resolve_cell(cfg).root)
    for name in (
        "dataset",
        "samples",
        "decodes",
        "ptrue",
        "latents",
        "decisions",
        "uncertainty",
        "quality",
        "uq_scores",
    ):
        m = store.manifest(name)
        assert m is not None and m["rows"] == len(store.read(name)), name
    assert not first["generate"]["skipped"]
    samples = store.read("samples")
    assert len(samples) == 3 * 4 and set(samples["sample_idx"]) == {0, 1, 2, 3}
    sums = samples["token_logprobs"].map(lambda v: float(sum(v)))
    assert (sums == samples["logprob"]).all()  # the log-prob identity, bit for bit
    decodes = store.read("decodes")
    assert sorted(decodes["strategy"].unique()) == ["ar", "beam", "contrastive", "greedy"]
    assert (store.read("ptrue")["p_true"].between(0, 1)).all()
    assert not (store.root / "samples.shards").exists()  # shards merged and removed


def test_stored_bayes_risk_is_the_latent_core_risk(maqa_run):
    _, cfg, _ = maqa_run
    store = ArtifactStore(resolve_cell(cfg).root)
    latents, decisions = store.read("latents"), store.read("decisions")
    space = get_space("sets")
    checked = 0
    for d in decisions[decisions["action"] != "null"].itertuples():
        rows = latents[
            (latents["prompt_id"] == d.prompt_id)
            & (latents["source"] == "sample")
            & latents["parse_ok"]
        ]
        sample_latents = [from_json("sets", s) for s in rows["latent"]]
        action = from_json("sets", d.action)
        expected = (
            get_space("sets-fbeta", **cfg.task.decisions.bayes_fbeta.options)
            if d.method == "bayes_fbeta"
            else space
        ).risk(action, sample_latents)
        assert d.risk == pytest.approx(expected, abs=1e-12), (d.prompt_id, d.method)
        if d.method == "bayes":
            assert d.risk == pytest.approx(space.bayes(sample_latents).risk, abs=1e-12)
        checked += 1
    assert checked >= 9


def test_uq_values_equal_lm_polygraph_called_directly(maqa_run):
    from lm_polygraph.estimators import MaximumSequenceProbability, PTrue

    _, cfg, _ = maqa_run
    store = ArtifactStore(resolve_cell(cfg).root)
    unc = store.read("uncertainty").pivot_table(
        index="prompt_id", columns="estimator", values="value"
    )
    beam = store.read("decodes").query("strategy == 'beam'").set_index("prompt_id")
    ptrue = store.read("ptrue").set_index("prompt_id")
    ids = list(unc.index)
    msp = MaximumSequenceProbability()(
        {"greedy_log_likelihoods": [np.asarray(beam.loc[i, "token_logprobs"]) for i in ids]}
    )
    np.testing.assert_allclose(unc.loc[ids, "msp"], msp, rtol=1e-12)
    pt = PTrue()({"p_true": np.asarray([ptrue.loc[i, "logprob_true"] for i in ids])})
    np.testing.assert_allclose(unc.loc[ids, "ptrue"], pt, rtol=1e-12)
    assert {"semantic_entropy", "kle", "sar", "cocoa_msp", "latent_entropy", "bayes_risk"} <= set(
        unc.columns
    )


def test_second_run_does_no_work(maqa_run):
    tmp, cfg, _ = maqa_run
    runs_before = sorted((tmp / "wandb").glob("offline-run-*"))
    again = run(cfg)
    assert all(again[s]["skipped"] for s in ("generate", "map", "decide", "uq", "evaluate"))
    assert again["report"]["skipped"]
    # nothing to do: no W&B run for `make sync` to upload
    assert sorted((tmp / "wandb").glob("offline-run-*")) == runs_before


def test_changing_an_evaluation_setting_reruns_only_evaluate_and_report(maqa_run):
    tmp, _, _ = maqa_run
    cfg = make_cfg(tmp, "dataset=maqa_bundled", "evaluation.n_bootstrap=60")
    out = run(cfg)
    assert [s for s in ("generate", "map", "decide", "uq") if not out[s]["skipped"]] == []
    assert not out["evaluate"]["skipped"] and not out["report"]["skipped"]


def test_report_tables_and_figures(maqa_run):
    tmp, _, _ = maqa_run
    tables = tmp / "results" / "tables"
    for name in (
        "generation",
        "generation_72b",
        "uq_prr_bayes",
        "uq_auc_bayes",
        "uq_prr_beam",
        "uq_auc_beam",
        "uq_72b",
    ):
        for ext in ("md", "tex", "csv"):
            assert (tables / f"{name}.{ext}").stat().st_size > 0
    gen = (tables / "generation.md").read_text()
    assert "| smollm2-135m | Bayes (ours) | ours |" in gen
    assert "| gemma-3-4b-it | Bayes (ours) | paper | **0.729** |" in gen
    assert r"\toprule" in (tables / "generation.tex").read_text()
    for fig in (
        "uq_prr_rank",
        "uq_maqa_prr",
        "latent_entropy_vs_risk",
        "hamming_improvement",
        "samples_ablation",
    ):
        for ext in ("png", "pdf"):
            assert (tmp / "results" / "figures" / f"{fig}.{ext}").stat().st_size > 1000


def _logged_key(item) -> str:
    parts = list(item.nested_key) or [item.key]
    if parts[-1].startswith("_") or parts[-1] in (
        "path",
        "sha256",
        "size",
        "format",
        "height",
        "width",
        "ncols",
        "nrows",
        "log_mode",
        "artifact_path",
    ):
        parts = parts[:-1] or parts
    return "/".join(parts)


def read_wandb_run(path: Path) -> dict:
    """Records of an offline run file, read with wandb's own datastore reader."""
    from wandb.proto import wandb_internal_pb2 as pb
    from wandb.sdk.internal import datastore

    ds = datastore.DataStore()
    ds.open_for_scan(str(path))
    out = {"name": None, "config": {}, "history": set(), "summary": set()}
    while (data := ds.scan_data()) is not None:
        rec = pb.Record()
        rec.ParseFromString(data)
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            out["name"] = rec.run.display_name
            out["config"] = {i.key: json.loads(i.value_json) for i in rec.run.config.update}
        elif kind == "history":
            # media and tables are logged as flattened dicts: keep the logged key itself
            out["history"] |= {_logged_key(i) for i in rec.history.item}
        elif kind == "summary":
            out["summary"] |= {_logged_key(i) for i in rec.summary.update}
    return out


def test_wandb_offline_runs_hold_config_metrics_and_no_secret(maqa_run):
    tmp, _, _ = maqa_run
    files = sorted((tmp / "wandb").glob("offline-run-*/*.wandb"))
    runs = [read_wandb_run(f) for f in files]  # in time order: the first cell run did the work
    cell = next(r for r in runs if r["name"] == "default/smollm2-135m/maqa_bundled")
    assert cell["config"]["dataset"]["name"] == "maqa_bundled"
    assert cell["config"]["task"]["extractor"]["api_key_env"] == "OPENAI_API_KEY"
    assert {"generate/wall_time_s", "map/wall_time_s", "evaluate/wall_time_s", "uq_scores"} <= cell[
        "history"
    ]
    assert "prr/bayes/f1/bayes_risk" in cell["summary"]
    report = next(r for r in runs if r["name"] == "default/report")
    assert {"table/generation", "figure/uq_prr_rank"} <= report["history"]
    # the key exported for the whole test session never reaches a run file
    secret = os.environ["OPENAI_API_KEY"].encode()
    assert all(secret not in f.read_bytes() for f in files)


def test_killed_generation_resumes_at_first_unfinished_shard(tmp_path):
    """SIGKILL after the first shard is written; the rerun keeps it and does only the rest."""
    overrides = [
        f"output_root={tmp_path / 'o'}",
        f"results_dir={tmp_path / 'r'}",
        "wandb.enabled=false",
        "stage=generate",
        "dataset=triviaqa_bundled",
        "dataset.limit=3",
        "generation.n_samples=2",
        "dataset.max_new_tokens=8",
        "generation.shard_size=1",
        "generation.strategies=[greedy]",
        "generation.ptrue=false",
    ]
    cmd = [sys.executable, "-m", "pipeline", *overrides]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    shard_root = tmp_path / "o" / "default" / "smollm2-135m" / "triviaqa_bundled" / "ptrue.shards"
    deadline = time.time() + 600
    while time.time() < deadline and not list(shard_root.glob("*/shard-00000.parquet")):
        assert proc.poll() is None, "generation ended before it could be killed"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    written = sorted(p.name for p in shard_root.glob("*/*.parquet"))
    assert written and "shard-00002.parquet" not in written
    store = ArtifactStore(tmp_path / "o" / "default" / "smollm2-135m" / "triviaqa_bundled")
    assert store.manifest("samples") is None  # no partial artifact
    first_shard = pd.read_parquet(
        next(shard_root.parent.glob("samples.shards/*/shard-00000.parquet"))
    )

    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"resuming: {len(written)} of 3 shards already written" in done.stderr + done.stdout
    samples = store.read("samples")
    assert len(samples) == 3 * 2
    kept = samples[samples["prompt_id"].isin(first_shard["prompt_id"])].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, first_shard.reset_index(drop=True))


def test_report_after_sweep_callback_with_hydra_node(maqa_run):
    """The sweep callback gets the config with Hydra's node (job-time interpolations unresolved)
    and the sweep's primary cell, whose keys may not resolve (the rehearsal's model.path for the
    default model did not); it must build the report and log the W&B report run all the same."""
    from pipeline.driver.callbacks import ReportAfterSweep

    tmp, _, _ = maqa_run
    (tmp / "results" / ".report.manifest.json").unlink()
    before = len(list((tmp / "wandb").glob("offline-run-*")))
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(
            "config",
            return_hydra_config=True,
            overrides=[
                f"output_root={tmp / 'outputs'}",
                f"results_dir={tmp / 'results'}",
                f"wandb.dir={tmp}",
                *SMALL,
                "dataset=maqa_bundled",
                "model.path=${oc.env:TASK_AWARE_TEST_UNSET_VARIABLE}",
            ],
        )
    ReportAfterSweep().on_multirun_end(cfg)
    assert (tmp / "results" / ".report.manifest.json").exists()
    new = sorted((tmp / "wandb").glob("offline-run-*/*.wandb"))[before:]
    assert [read_wandb_run(f)["name"] for f in new] == ["default/report"]
